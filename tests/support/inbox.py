"""Agents that wait for people, for the inbox's tests and bench: a stateless model that says a few words and asks
for the call its prompt names (`read /tmp/a`, `delete /etc/x`, `ask Which one?`), then reports the result."""

from __future__ import annotations

from typing import Any

import rein
from rein import Agent, Completion, LoopConfig, Message, ToolCall, Usage
from tests.support.waiting import poll


class FilesModel:
    """Stateless: `read P` -> read_file(path=P), `delete P` -> delete_file(path=P), `ask Q` -> ask_human(question=Q);
    after a tool result, `Done: <result>`."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        usage = Usage(input_tokens=3, output_tokens=2)
        results = [m for m in messages if m.role == "tool"]
        if results:
            return Completion(message=Message(role="assistant", content=f"Done: {results[-1].content}"),
                              finish_reason="stop", usage=usage)
        prompt = next(m.content for m in messages if m.role == "user") or ""
        verb, _, rest = prompt.partition(" ")
        name, arguments = {"read": ("read_file", {"path": rest}), "delete": ("delete_file", {"path": rest}),
                           "ask": ("ask_human", {"question": rest})}.get(verb, ("read_file", {"path": rest}))
        call = ToolCall(id=f"call-{verb}", name=name, arguments=arguments)
        return Completion(message=Message(role="assistant", content=f"I will {verb} {rest} now.", tool_calls=[call]),
                          finish_reason="tool_calls", usage=usage)


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: Which file.
    """
    return f"contents of {path}"


@rein.tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (always asks a person).

    Args:
        path: Which file.
    """
    return f"{path} deleted"


def files_agent(name: str, **config: Any) -> Agent:
    """An agent whose every call asks (permission "ask"); delete_file asks whatever a rule says."""
    return Agent(provider=FilesModel(), tools=[read_file, delete_file, rein.ask_human], name=name,
                 config=LoopConfig(permission="ask", **config))


async def rules_heard(client: Any, run_id: str, version: int, timeout: float = 60) -> None:
    """Until the run's own rule check (rein.policy_check) has read the rules of version `version` or later: what a rule
    added while it waits does to it is done then. Bounded; fails naming what never came."""
    from temporalio.api.enums.v1 import EventType

    from rein.core.policy import POLICY_CHECK
    from tests.support.waiting import poll

    async def heard() -> bool:
        events = list((await client.get_workflow_handle(run_id).fetch_history()).events)
        checks = {e.event_id for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                  and e.activity_task_scheduled_event_attributes.activity_type.name == POLICY_CHECK}
        for e in events:
            done = e.activity_task_completed_event_attributes
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED and done.scheduled_event_id in checks:
                [verdicts] = await client.data_converter.decode(done.result.payloads)
                if any(v.get("version", 0) >= version for v in verdicts):
                    return True
        return False

    await poll(heard, f"{run_id}'s rule check to read version {version}", timeout, interval=0.2)


# --------------------------------------------------------------------------- an identity provider, `rein serve`


AUDIENCE = "rein-inbox"
"""The audience the identity provider's tokens are for, as `rein serve` is told (REIN_CODEC_JWT_AUDIENCE)."""


class IdentityProvider:
    """A JWKS endpoint with one RSA key, as an identity provider publishes it, and JWTs signed with that key."""

    def __init__(self) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        body = json.dumps({"keys": [{**public, "kid": "idp-1", "use": "sig", "alg": "RS256"}]}).encode()

        class Jwks(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"

    def token(self, key: Any = None, **claims: Any) -> str:
        import time

        import jwt

        payload = {"sub": "ops@example.com", "aud": AUDIENCE, "exp": int(time.time()) + 600, **claims}
        return jwt.encode({k: v for k, v in payload.items() if v is not None},  # a claim given as None: left out
                          key or self.key, algorithm="RS256", headers={"kid": "idp-1"})

    def close(self) -> None:
        self.server.shutdown()


def start_serve(log: Any, address: str, queue: str, idp: IdentityProvider, token: str, ui: str = "http://ui.example") -> tuple[Any, str]:
    """`rein serve` as a user runs it (its own process), signing people in with the IdP's JWTs or `token`."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from rein.durable.embedded_server import free_port
    from tests.support.processes import wait_for_text

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REIN_CODEC")}
    env.update(REIN_CODEC_JWKS_URL=idp.url, REIN_CODEC_JWT_AUDIENCE=AUDIENCE, REIN_CODEC_TOKEN=token,
               REIN_TASK_QUEUE=queue, PYTHONUNBUFFERED="1")
    rein_bin = str(Path(sys.executable).parent / "rein")
    root = Path(__file__).resolve().parent.parent.parent
    with open(log, "wb") as out:
        process = subprocess.Popen([rein_bin, "serve", "--port", str(port), "--address", address, "--ui", ui,
                                    "--poll", "0.2"], env=env, cwd=str(root), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    wait_for_text(log, f"rein serve on http://127.0.0.1:{port}", process, 60)
    return process, f"http://127.0.0.1:{port}"


async def waiting(runs: Any, agent: str, prompt: str, tenant: str | None = None) -> str:
    """A run of `agent` started with `prompt`, once the inbox lists it as waiting (its id)."""
    handle = await runs.start(agent, prompt, tenant=tenant)
    await poll(lambda: _listed(runs, agent, handle.id), f"{handle.id} in the inbox", 30)
    return handle.id


async def _listed(runs: Any, agent: str, run_id: str) -> bool:
    return any(i.run_id == run_id and i.since for i in await runs.inbox(agent=agent))

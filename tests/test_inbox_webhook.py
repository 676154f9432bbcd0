"""Nobody has to look: a run that starts to wait has a webhook delivered at least once (Slack/Teams-style JSON,
signed with HMAC-SHA256 of its time and body, and of the body alone as before), from an activity that retries,
while the wait itself never depends on it. A receiver that checks the signed time refuses an old or replayed post;
what the model wrote cannot ping a channel or plant a link in the message's markup.

The receivers are real processes (one stopped and started again on the same port); the worker's first retry comes
after REIN_WAITING_WEBHOOK_RETRY_S (short here, a setting: no sleeps).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

import rein
from rein.client import ReinClient
from rein.durable.embedded_server import free_port
from tests.support.inbox import files_agent
from tests.support.processes import stop_process, wait_for_text
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parent.parent
SUFFIX = uuid.uuid4().hex[:6]
QUEUE = f"inbox-hook-{SUFFIX}"
AGENT = f"hook-files-{SUFFIX}"
SECRET, GLOBEX_SECRET = "hook-secret-1", "globex-secret-2"
CHECKED, CHECKED_SECRET = f"hook-checked-{SUFFIX}", "checked-secret-3"
"""An agent whose webhook goes to a receiver that checks the timestamped signature, with its own secret."""


class Receiver:
    def __init__(self, port: int, out: Path, log: Path, secret: str = ""):
        self.port, self.out, self.log, self.secret = port, out, log, secret
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "tests.support.webhook_receiver", str(self.port),
                                             str(self.out), *([self.secret] if self.secret else [])], cwd=str(ROOT),
                                            stdout=log, stderr=subprocess.STDOUT)
        wait_for_text(self.log, f"receiver listening on {self.port}", self.process, 30, offset)

    def stop(self) -> None:
        stop_process(self.process, 10)
        self.process = None

    def got(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.read_text().splitlines()] if self.out.exists() else []

    def for_run(self, run_id: str) -> list[dict[str, Any]]:
        return [g for g in self.got() if json.loads(g["body"])["run_id"] == run_id]


@pytest.fixture(scope="module")
def receivers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Receiver, Receiver]]:
    folder = tmp_path_factory.mktemp("hook")
    port, checked_port = free_port(), free_port()
    hook = Receiver(port, folder / "got.jsonl", folder / "receiver.log")
    checker = Receiver(checked_port, folder / "checked.jsonl", folder / "checker.log", CHECKED_SECRET)
    settings = {"REIN_WAITING_WEBHOOK": f"http://127.0.0.1:{port}/hook tenant:globex=http://127.0.0.1:{port}/globex "
                                        f"agent:{CHECKED}=http://127.0.0.1:{checked_port}/checked",
                "REIN_WAITING_WEBHOOK_SECRET": f"{SECRET} tenant:globex={GLOBEX_SECRET} agent:{CHECKED}={CHECKED_SECRET}",
                "REIN_WAITING_WEBHOOK_RETRY_S": "0.2", "REIN_INBOX_URL": "http://inbox.example/inbox"}
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)  # the worker (in this process) reads them
    hook.start()
    checker.start()
    try:
        yield hook, checker
    finally:
        hook.stop()
        checker.stop()
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


@pytest.fixture(scope="module")
def receiver(receivers: tuple[Receiver, Receiver]) -> Receiver:
    return receivers[0]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def runs(dev, receivers: tuple[Receiver, Receiver]) -> AsyncIterator[ReinClient]:  # noqa: ANN001
    async with rein.create_worker(dev.client, agents=[files_agent(AGENT), files_agent(CHECKED)], task_queue=QUEUE):
        yield ReinClient(dev.client, QUEUE)


async def _notice_attempts(runs: ReinClient, run_id: str) -> int:
    """How often the run's webhook activity has been tried so far (0: none pending)."""
    description = await runs.handle(run_id).describe()
    return max((a.attempt for a in description.raw_description.pending_activities
                if a.activity_type.name == "rein.notify_waiting"), default=0)


async def test_a_waiting_run_is_announced_signed_and_again_after_the_receiver_comes_back(runs: ReinClient,
                                                                                      receiver: Receiver) -> None:
    acme = await runs.start(AGENT, "read /tmp/report", tenant="acme")
    got = await poll(lambda: receiver.for_run(acme.id), "the webhook for the acme run", 30)
    [delivery] = got
    body = delivery["body"].encode()
    message = json.loads(body)
    assert delivery["path"] == "/hook"
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert delivery["headers"]["X-Rein-Signature"] == expected
    assert message["run_id"] == acme.id and message["agent"] == AGENT and message["tenant"] == "acme"
    assert message["kind"] == "approval" and message["calls"][0]["tool"] == "read_file"
    assert acme.id in message["text"] and 'read_file(path="/tmp/report")' in message["text"]
    assert message["link"] == f"http://inbox.example/inbox#run={acme.id}" and message["link"] in message["text"]
    assert SECRET not in json.dumps(await _history_json(runs, acme.id))  # secrets only in the worker's environment

    receiver.stop()
    globex = await runs.start(AGENT, "delete /srv/old", tenant="globex")
    gone = await runs.start(AGENT, "read /tmp/soon-decided", tenant="acme")
    for handle in (globex, gone):  # the waits do not depend on the webhook: both wait while it is down
        await poll(lambda h=handle: _waiting(runs, h.id), f"{handle.id} waiting", 30)
    await poll(lambda: _tried(runs, globex.id, 3), "the globex webhook retried while the receiver is down", 30)
    await runs.approve(gone.id, approver="bob")  # decided before anyone was told: its notice is cancelled
    assert (await gone.result()).output == "Done: contents of /tmp/soon-decided"

    receiver.start()
    [late] = await poll(lambda: receiver.for_run(globex.id), "the globex webhook after the receiver came back", 60)
    assert late["path"] == "/globex"  # its tenant's own webhook, with its own secret
    assert late["headers"]["X-Rein-Signature"] == "sha256=" + hmac.new(
        GLOBEX_SECRET.encode(), late["body"].encode(), hashlib.sha256).hexdigest()
    assert receiver.for_run(gone.id) == []
    assert await _notice_attempts(runs, gone.id) == 0
    await runs.approve(globex.id)
    assert (await globex.result()).output == "Done: /srv/old deleted"
    assert (await acme.result() if await runs.approve(acme.id) else None).output == "Done: contents of /tmp/report"
    assert len(receiver.for_run(acme.id)) == 1  # delivered once: the wait ended, nothing more to say


async def test_a_receiver_checks_the_signed_time_and_refuses_an_old_or_replayed_post(
        runs: ReinClient, receivers: tuple[Receiver, Receiver]) -> None:
    import httpx

    from rein.activities.webhook import timed_signature

    checker = receivers[1]
    planted = "/tmp/<!channel>&<https://evil.example|click me>"  # what a model could be talked into writing
    handle = await runs.start(CHECKED, f"read {planted}")
    [delivery] = await poll(lambda: checker.for_run(handle.id), "the checked webhook", 30)
    assert delivery["verdict"] == "accepted"  # signed with the time, and fresh
    headers, body = delivery["headers"], delivery["body"].encode()
    stamp = int(headers["Rein-Signature"].split(",")[0].removeprefix("t="))
    assert headers["Rein-Signature"] == timed_signature(CHECKED_SECRET, body, stamp)
    assert headers["X-Rein-Signature"] == "sha256=" + hmac.new(CHECKED_SECRET.encode(), body, hashlib.sha256).hexdigest()
    message = json.loads(body)
    assert message["wait"] == (await runs.status(handle.id)).wait  # the wait a decision from the message names
    assert "&lt;!channel&gt;&amp;&lt;https://evil.example|click me&gt;" in message["text"]
    assert "<!channel>" not in message["text"] and "<https://" not in message["text"]
    assert message["calls"][0]["args"] == f"path={json.dumps(planted)}"  # the JSON fields stay as written

    url = f"http://127.0.0.1:{checker.port}/checked"
    sent = {k: v for k, v in headers.items() if k.lower() in ("content-type", "rein-signature", "x-rein-signature")}
    async with httpx.AsyncClient(timeout=30) as http:
        replayed = await http.post(url, content=body, headers=sent)  # a captured post, sent again
        old = await http.post(url, content=body, headers={**sent, "Rein-Signature": timed_signature(
            CHECKED_SECRET, body, stamp - 600)})  # signed right, ten minutes ago
        forged = await http.post(url, content=body.replace(b"/tmp/", b"/etc/"), headers=sent)
        bare = await http.post(url, content=body, headers={"X-Rein-Signature": sent["X-Rein-Signature"]})
    assert (replayed.status_code, replayed.text) == (409, "replayed")
    assert (old.status_code, old.text) == (401, "too old")
    assert (forged.status_code, forged.text) == (401, "forged")
    assert (bare.status_code, bare.text) == (401, "unsigned")  # the body-only signature proves nothing about when
    assert [g["verdict"] for g in checker.got()] == ["accepted", "replayed", "too old", "forged", "unsigned"]
    await runs.deny(handle.id, reason="not that path")
    assert (await handle.result()).status == "done"


async def _waiting(runs: ReinClient, run_id: str) -> bool:
    return (await runs.status(run_id)).status == "waiting_approval"


async def _tried(runs: ReinClient, run_id: str, attempts: int) -> bool:
    return await _notice_attempts(runs, run_id) >= attempts


async def _history_json(runs: ReinClient, run_id: str) -> Any:
    return json.loads((await runs.handle(run_id).fetch_history()).to_json())

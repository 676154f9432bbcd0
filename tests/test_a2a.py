"""The A2A server on the official a2a-sdk, driven by the SDK's own client over real HTTP.

Agents use MockProvider (or a small deterministic provider in the restart test). Some run on
the default durable engine (the shared embedded Temporal server of the test REIN_HOME), some
with engine="local". The restart test runs the server as a subprocess, kills it and starts it
again on the same state directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_message_text, new_text_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict

import rein
from rein import Agent, LoopConfig, MemorySessionStore, MockProvider, Session, StreamChunk, Usage
from rein.client import ReinClient, connect
from rein.core.ir import Completion, Message
from rein.durable.embedded_server import free_port
from rein.web.a2a import A2A_PROTOCOL_VERSION, A2AServer, make_server
from tests.support.processes import stop_process, wait_for_port
from tests.support.providers import RecordingProvider
from tests.support.runs import forget_sticky_worker
from tests.support.tools import add, tc


def request(text: str, task_id: str | None = None, context_id: str | None = None) -> SendMessageRequest:
    message = new_text_message(text, context_id=context_id, task_id=task_id, role=Role.ROLE_USER)
    return SendMessageRequest(message=message)


@pytest.fixture
def serve() -> Iterator[Any]:
    """Start A2A servers on free ports; yields a factory (A2AServer -> base url)."""
    started = []

    def start(a2a: A2AServer) -> str:
        served = make_server(a2a, "127.0.0.1", 0)
        started.append(served)
        return a2a.url

    yield start
    for served in started:
        served.shutdown()


class Peer:
    """The SDK's client for one server: send a message and get the task it ends in."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def send(self, text: str, **ids: Any) -> Any:
        events = [e async for e in self.client.send_message(request(text, **ids))]
        assert events, "no response"
        task = events[-1].task if events[-1].HasField("task") else None
        assert task is not None, events[-1]
        return task

    async def get(self, task_id: str) -> Any:
        return await self.client.get_task(GetTaskRequest(id=task_id))

    async def cancel(self, task_id: str) -> Any:
        return await self.client.cancel_task(CancelTaskRequest(id=task_id))


async def peer(base: str, *, streaming: bool = False, token: str | None = None) -> Peer:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    config = ClientConfig(streaming=streaming, httpx_client=httpx.AsyncClient(headers=headers, timeout=60))
    return Peer(await ClientFactory(config).create_from_url(base))


def text(message: Any) -> str:
    return get_message_text(message, "")


# --------------------------------------------------------------------------- card and auth


def test_public_names() -> None:
    assert rein.A2AServer is A2AServer
    assert "A2AServer" in rein.__all__ and "serve_a2a" in rein.__all__
    assert A2A_PROTOCOL_VERSION == "1.0"


async def test_agent_card_over_http(serve: Any) -> None:
    agent = Agent(provider=MockProvider([]), system="You answer questions.", engine="local")
    base = serve(A2AServer(agent, version="2.1.0"))
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, base).get_agent_card()
    assert card.name == "Rein Agent"
    assert card.description == "You answer questions."
    assert card.version == "2.1.0"
    (interface,) = card.supported_interfaces
    assert (interface.url, interface.protocol_binding, interface.protocol_version) == (base, "JSONRPC", "1.0")
    assert card.capabilities.streaming is True
    assert [s.id for s in card.skills] == ["chat"]
    assert not card.security_schemes and not card.security_requirements


async def test_bearer_token(serve: Any) -> None:
    agent = Agent(provider=MockProvider(["allowed in"]), engine="local")
    base = serve(A2AServer(agent, name="Ops", auth_token="s3cret"))
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, base).get_agent_card()  # the card stays public
        assert card.name == "Ops"
        assert card.security_schemes["bearerAuth"].http_auth_security_scheme.scheme == "bearer"
        refused = await http.post(base + "/", json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {}})
        assert refused.status_code == 401
        assert refused.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Unauthorized"}}
        wrong = await http.post(base + "/", json={}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401

    with pytest.raises(A2AClientError):
        await (await peer(base)).send("hi")
    task = await (await peer(base, token="s3cret")).send("hi")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert text(task.status.message) == "allowed in"


async def test_a_reply_over_a2a_is_recorded_as_the_peers_decision(serve: Any) -> None:
    """The approval is the token holder's (`a2a:token`), never this server process's person (REIN_IDENTITY)."""
    agent = Agent(provider=MockProvider([[tc("add", a=2, b=3)], "The sum is 5."]), tools=[add],
                  config=LoopConfig(permission="ask"), engine="local")
    store = MemorySessionStore()
    client = await peer(serve(A2AServer(agent, store=store, auth_token="s3cret")), token="s3cret")
    task = await client.send("Add 2 and 3")
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    done = await client.send("approve", task_id=task.id, context_id=task.context_id)
    assert text(done.status.message) == "The sum is 5."
    assert [(d.approved, d.approver) for d in store.load(task.context_id).decisions] == [(True, "a2a:token")]


# --------------------------------------------------------------------------- tasks


async def test_send_get_cancel_durable(serve: Any) -> None:
    """Default (durable) engine: every task is a Temporal workflow."""
    base = serve(A2AServer(Agent(provider=MockProvider(["Hello from rein."]))))
    client = await peer(base)
    task = await client.send("Say hello")
    assert task.id and task.context_id
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    reply = task.status.message
    assert reply.role == Role.ROLE_AGENT and reply.task_id == task.id and reply.context_id == task.context_id
    assert text(reply) == "Hello from rein."
    assert [a.name for a in task.artifacts] == ["response"]
    assert text(task.artifacts[0]) == "Hello from rein."
    assert [text(m) for m in task.history] == ["Say hello"]

    got = await client.get(task.id)
    assert got.status.state == TaskState.TASK_STATE_COMPLETED and text(got.artifacts[0]) == "Hello from rein."
    with pytest.raises(TaskNotFoundError):
        await client.get("nope-42")
    with pytest.raises(TaskNotCancelableError):
        await client.cancel(task.id)  # a completed task cannot be canceled


async def test_a_context_is_a_thread_on_the_durable_engine(serve: Any) -> None:
    """Each context id is a thread: its conversation lives in Temporal (any server of the agent goes on with
    it), not in the server's session store."""
    from rein.client import connect

    store = MemorySessionStore()
    agent = Agent(provider=MockProvider(["one", "two"]), system="Be brief.")
    server = A2AServer(agent, store=store)
    client = await peer(serve(server))
    first = await client.send("first")
    second = await client.send("second", context_id=first.context_id)
    assert second.context_id == first.context_id and second.id != first.id
    assert text(second.status.message) == "two"
    assert store.load(first.context_id) is None
    runs = await connect()
    thread = await runs.thread(server.thread_id(first.context_id))
    assert (thread.turns, thread.status) == (2, "idle")
    roles = [(m.role, m.content) for m in (await runs.session(server.thread_id(first.context_id))).messages]
    assert roles == [("system", "Be brief."), ("user", "first"), ("assistant", "one"),
                     ("user", "second"), ("assistant", "two")]


async def test_ask_permission_input_required_then_approve_durable(serve: Any) -> None:
    agent = Agent(
        provider=MockProvider([[tc("add", a=2, b=3)], "The sum is 5.", [tc("add", a=7, b=7)]]),
        tools=[add],
        config=LoopConfig(permission="ask"),
    )
    server = A2AServer(agent)
    client = await peer(serve(server))
    task = await client.send("Add 2 and 3")
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    pending = task.status.message
    assert "add" in text(pending) and "approve" in text(pending)
    assert MessageToDict(pending.metadata)["interrupt"] == {
        "type": "need_approval", "tool": "add", "arguments": {"a": 2, "b": 3},
    }
    assert list(task.artifacts) == []

    approved_run = server.paused.load(task.id).run_id
    done = await client.send("approve", task_id=task.id, context_id=task.context_id)
    assert done.id == task.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert text(done.status.message) == "The sum is 5."
    assert server.paused.load(task.id) is None
    # The approval is the remote peer's (unauthenticated here), never this server process's person.
    from rein.durable import engine

    eng = engine.Engine._instance
    session = asyncio.run_coroutine_threadsafe(ReinClient(eng.client).session(approved_run), eng.loop).result(60)
    assert [(d.approved, d.approver) for d in session.decisions] == [(True, "a2a:anonymous")]

    # Canceling a paused durable task also cancels the workflow waiting for it.

    paused = await client.send("Add 7 and 7")
    run_id = server.paused.load(paused.id).run_id
    assert run_id is not None  # the task is that durable run
    canceled = await client.cancel(paused.id)
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel(paused.id)  # canceled is terminal too: the A2A spec's answer, not "canceled" again
    assert server.paused.load(paused.id) is None
    eng = engine.Engine._instance
    handle = eng.client.get_workflow_handle(run_id)
    result = asyncio.run_coroutine_threadsafe(ReinClient(eng.client).outcome(handle), eng.loop).result(60)
    assert result.stop_reason == "cancelled"  # the workflow that waited for the reply ended
    assert asyncio.run_coroutine_threadsafe(handle.describe(), eng.loop).result(30).status.name == "CANCELED"


async def test_deny_ask_human_and_failure_local(serve: Any) -> None:
    ran: list[tuple[int, int]] = []

    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append((a, b))
        return a + b

    agent = Agent(
        provider=MockProvider([[tc("add", a=1, b=1)], "Fine, I will not add."]),
        tools=[add],
        config=LoopConfig(permission="ask"),
        engine="local",
    )
    client = await peer(serve(A2AServer(agent)))
    task = await client.send("Add 1 and 1")
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    done = await client.send("no thanks", task_id=task.id, context_id=task.context_id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED and text(done.status.message) == "Fine, I will not add."
    assert ran == []

    asker = Agent(
        provider=MockProvider([[tc("ask_human", "q1", question="Which city?")], "Booked for Paris."]),
        tools=[rein.ask_human],
        engine="local",
    )
    client = await peer(serve(A2AServer(asker)))
    task = await client.send("Book a trip")
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and "Which city?" in text(task.status.message)
    done = await client.send("Paris", task_id=task.id, context_id=task.context_id)
    assert text(done.status.message) == "Booked for Paris."

    failing = Agent(provider=MockProvider([ValueError("provider exploded")]), engine="local")
    task = await (await peer(serve(A2AServer(failing)))).send("hi")
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "provider exploded" in text(task.status.message)


async def test_streaming_client_sees_the_task_progress(serve: Any) -> None:
    client = await peer(serve(A2AServer(Agent(provider=MockProvider(["Streamed!"]), engine="local"))), streaming=True)
    events = [e async for e in client.client.send_message(request("Stream"))]
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING and states[-1] == TaskState.TASK_STATE_COMPLETED
    updates = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert {u.artifact.artifact_id for u in updates} == {"response"}
    live, (closing,) = updates[:-1], updates[-1:]
    assert "".join(text(u.artifact) for u in live) == "Streamed!"  # MockProvider streams a character at a time
    assert [u.append for u in live] == [False] + [True] * (len(live) - 1)
    assert (closing.append, closing.last_chunk, text(closing.artifact)) == (False, True, "Streamed!")


ANSWER_PIECES = ["Live ", "text ", "while the model ", "writes."]
ANSWER = "".join(ANSWER_PIECES)


class Gated:
    """Streams its answer in pieces and holds the rest back until a client has the first piece:
    the text reaches the client while the model writes, not after."""

    def __init__(self) -> None:
        self.seen = threading.Event()
        self.waited: list[bool] = []

    async def complete(self, messages: Any, tools: Any = None, **kwargs: Any) -> Completion:
        return Completion(message=Message(role="assistant", content=ANSWER), finish_reason="stop")

    async def stream(self, messages: Any, tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        yield StreamChunk(type="text", text=ANSWER_PIECES[0])
        self.waited.append(await asyncio.to_thread(self.seen.wait, 10))
        for piece in ANSWER_PIECES[1:]:
            yield StreamChunk(type="text", text=piece)
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=4))


@pytest.mark.parametrize("engine, with_store", [("temporal", False), ("local", True)])
async def test_a_streaming_client_gets_the_text_as_the_model_writes_it(serve: Any, engine: str, with_store: bool) -> None:
    model, store = Gated(), MemorySessionStore() if with_store else None
    base = serve(A2AServer(Agent(provider=model, engine=engine), store=store))
    client = await peer(base, streaming=True)
    chunks, closing, done = [], [], None
    async for event in client.client.send_message(request("Talk")):
        if event.HasField("artifact_update"):
            update = event.artifact_update
            assert done is None  # every chunk comes before the task completes
            (closing if update.last_chunk else chunks).append(text(update.artifact))
            model.seen.set()
        elif event.HasField("status_update") and event.status_update.status.state == TaskState.TASK_STATE_COMPLETED:
            done = event.status_update
    assert model.waited == [True]  # the client had the first piece while the model still held the rest
    assert len(chunks) >= 2 and "".join(chunks) == ANSWER
    assert closing == [ANSWER]  # the closing chunk replaces the pieces with the whole answer
    assert done is not None and text(done.status.message) == ANSWER

    task = await client.get(done.task_id)  # what the task holds: the answer once, in one part
    assert [(a.name, text(a)) for a in task.artifacts] == [("response", ANSWER)]
    assert len(task.artifacts[0].parts) == 1
    sent = await (await peer(base)).send("Again", context_id=done.context_id)  # message/send: the same final task
    assert sent.status.state == TaskState.TASK_STATE_COMPLETED
    assert [(a.name, text(a)) for a in sent.artifacts] == [("response", ANSWER)] and len(sent.artifacts[0].parts) == 1
    if store is not None:
        said = [m.content for m in store.load(done.context_id).messages if m.role != "system"]
        assert said == ["Talk", ANSWER, "Again", ANSWER]


async def test_a_streamed_task_that_pauses_is_input_required_as_before(serve: Any) -> None:
    """Text before a tool call that needs approval: the task pauses as without streaming; the reply's
    answer then replaces that text in `response`."""
    said = Message(role="assistant", content="Let me add.", tool_calls=[tc("add", a=2, b=3)])
    agent = Agent(provider=MockProvider([Completion(message=said, finish_reason="tool_calls"), "The sum is 5."]),
                  tools=[add], config=LoopConfig(permission="ask"), engine="local")
    base = serve(A2AServer(agent))
    events = [e async for e in (await peer(base, streaming=True)).client.send_message(request("Add 2 and 3"))]
    live = "".join(text(e.artifact_update.artifact) for e in events if e.HasField("artifact_update"))
    assert live == "Let me add."
    pending = events[-1].status_update.status
    assert pending.state == TaskState.TASK_STATE_INPUT_REQUIRED and "approve" in text(pending.message)
    assert MessageToDict(pending.message.metadata)["interrupt"] == {
        "type": "need_approval", "tool": "add", "arguments": {"a": 2, "b": 3},
    }
    task_id, context_id = events[-1].status_update.task_id, events[-1].status_update.context_id
    done = await (await peer(base)).send("approve", task_id=task_id, context_id=context_id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [(a.name, text(a)) for a in done.artifacts] == [("response", "The sum is 5.")]


async def test_a_0_3_client_is_served_on_the_same_endpoint(serve: Any) -> None:
    base = serve(A2AServer(Agent(provider=MockProvider(["old friend"]), engine="local")))
    message = {"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]}
    async with httpx.AsyncClient(timeout=60) as http:
        response = await http.post(
            base + "/", json={"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"message": message}}
        )
    body = response.json()
    assert body["id"] == 3 and body["result"]["status"]["state"] == "completed"
    assert body["result"]["status"]["message"]["parts"] == [{"kind": "text", "text": "old friend"}]


# --------------------------------------------------------------------------- restart


SERVER_MODULE = '''
import sys
from rein import Agent, LoopConfig, ToolCall
from rein.web.a2a import serve_a2a
from rein.core.ir import Completion, Message


class Scripted:
    """Answers from the conversation itself, so a restarted process answers the same way."""

    async def complete(self, messages, tools=None, **kwargs):
        if messages[-1].role == "tool":
            return Completion(message=Message(role="assistant", content="sum: " + messages[-1].content), finish_reason="stop")
        call = ToolCall(id="c1", name="add", arguments={"a": 20, "b": 22})
        return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls")


def add(a: int, b: int) -> int:
    return a + b


agent = Agent(
    provider=Scripted(), tools=[add], config=LoopConfig(permission="ask"), name="restart-bot", engine=sys.argv[3]
)
serve_a2a(agent, port=int(sys.argv[1]), state_dir=sys.argv[2])
'''


def _start_server(script: Path, port: int, state: Path, engine: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port), str(state), engine],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_for_port(port, proc, 60)
    except AssertionError:
        stop_process(proc)
        raise
    return proc


@pytest.mark.parametrize("engine", ["temporal", "local"])
async def test_a_paused_task_survives_a_server_restart(tmp_path: Path, engine: str) -> None:
    """Durable: the restarted server decides for the very workflow that waits (the task is a turn of the
    context's thread)."""
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent(SERVER_MODULE))
    state, port = tmp_path / "state", free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start_server(script, port, state, engine)
    try:
        task = await (await peer(base)).send("add 20 and 22")
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    finally:
        proc.kill()
        proc.wait(timeout=30)
    paused = Session.model_validate_json((state / "paused" / f"{task.id}.json").read_text())
    if engine == "temporal":  # the run's next task goes straight to the restarted process, not the dead one's sticky queue
        await forget_sticky_worker(await connect(), paused.run_id)

    proc = _start_server(script, port, state, engine)
    try:
        client = await peer(base)
        again = await client.get(task.id)  # the task outlived the process that created it
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert MessageToDict(again.status.message.metadata)["interrupt"]["tool"] == "add"
        done = await client.send("approve", task_id=task.id, context_id=task.context_id)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert text(done.status.message) == "sum: 42"
        if engine == "temporal":  # the thread that waited before the restart is the one whose turn finished
            assert paused.run_id
            thread = await ReinClient(await connect()).thread(paused.run_id)
            assert (thread.status, thread.turns, thread.last_output) == ("idle", 1, "sum: 42")
    finally:
        proc.kill()
        proc.wait(timeout=30)


STUCK_MODULE = '''
import sys, time
from rein import Agent, MockProvider, ToolCall
from rein.web.a2a import serve_a2a


def wait_forever() -> str:
    """Never finishes (the server is killed meanwhile)."""
    time.sleep(3600)
    return "never"


agent = Agent(provider=MockProvider([[ToolCall(id="w1", name="wait_forever", arguments={})], "done"]),
              tools=[wait_forever], name="crash-bot", engine="local")
serve_a2a(agent, port=int(sys.argv[1]), state_dir=sys.argv[2])
'''


async def test_a_task_cut_off_by_a_crash_is_failed_after_the_restart(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent(STUCK_MODULE))
    state, port = tmp_path / "state", free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, str(script), str(port), str(state)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_for_port(port, proc, 60)
        client = await peer(base, streaming=True)
        sent = request("go")
        events = client.client.send_message(sent)
        first = await anext(aiter(events))  # the task exists and works; its tool never returns
        task_id = first.task.id if first.HasField("task") else first.status_update.task_id
        for _ in range(200):
            if (await client.get(task_id)).status.state == TaskState.TASK_STATE_WORKING:
                break
            await asyncio.sleep(0.05)
        assert (await client.get(task_id)).status.state == TaskState.TASK_STATE_WORKING
    finally:
        proc.kill()  # a crash: nothing updates the task
        proc.wait(timeout=30)

    proc = _start_server(script, port, state, "local")
    try:
        again = await (await peer(base)).get(task_id)
        assert again.status.state == TaskState.TASK_STATE_FAILED
        assert "stopped while this task ran" in text(again.status.message)
    finally:
        proc.kill()
        proc.wait(timeout=30)


async def test_a_page_of_another_site_or_a_rebound_name_starts_nothing(serve: Any) -> None:
    """The A2A server sits behind rein.web.guard like every rein surface: a browser page of another site (a form, a
    no-cors fetch) or a DNS-rebound name starts no task and reads nothing; an A2A client of its own host is served."""
    provider = RecordingProvider(["started", "started"])
    base = serve(A2AServer(Agent(provider=provider, engine="local")))
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": MessageToDict(request("wipe it"))}
    async with httpx.AsyncClient(timeout=30) as http:
        served = await http.post(base + "/", json=body, headers={"A2A-Version": "1.0"})
        assert served.status_code == 200 and "result" in served.json(), served.text
        form = await http.post(base + "/", content=json.dumps(body), headers={
            "Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
        rebound = await http.post(base + "/", json=body, headers={"Host": "rebound.example:80"})
        same_site = await http.post(base + "/", json=body, headers={"Sec-Fetch-Site": "same-site"})
    assert [form.status_code, rebound.status_code, same_site.status_code] == [403, 403, 403]
    assert "another origin" in form.json()["error"] and "rebound.example" in rebound.json()["error"]
    assert len(provider.seen) == 1  # only the A2A client's task ran


def test_a_server_without_a_token_says_so_as_it_starts(caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent(provider=MockProvider(["hi"]), engine="local")
    with caplog.at_level("WARNING", logger="rein"):
        A2AServer(agent, url="http://127.0.0.1:8123").app()
        A2AServer(agent, auth_token="s3cret").app()
    said = [r.getMessage() for r in caplog.records if "auth_token" in r.getMessage()]
    assert said == ["a2a: no auth_token: any A2A client that reaches http://127.0.0.1:8123 starts tasks and answers "
                    "paused ones (approvals) without signing in; pass auth_token=... to require a bearer token"]

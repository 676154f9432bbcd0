"""The AG-UI endpoint (rein.web.agui) against the real AG-UI client: `@ag-ui/client`'s HttpAgent run by Node
(tests/agui_driver.mjs; .ci/run installs it in examples/agui), and plain HTTP for what a client may get wrong.

One worker serves the calculator (rein.examples.calculator: offline, asks approval for every tool call) and the
endpoint runs in this process under uvicorn, as `rein serve` runs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from temporalio.service import RPCError

import rein
from rein.client import ReinClient
from rein.core.contract import READERS_QUERY
from rein.durable.embedded_server import free_port
from rein.examples.calculator import agent as calculator
from rein.temporal.bearer import BearerAuth
from rein.web.agui import app
from tests.support.history import assert_no_task_failures, history_events
from tests.support.processes import ROOT
from tests.support.waiting import poll
from tests.support.wipe import LOOKUP, approvals_taken, wipe_agent, wiped
from tests.test_codec_server_auth import _jwt, idp  # noqa: F401  (the identity provider fixture)

pytestmark = pytest.mark.timeout(180)
DRIVER = ROOT / "tests" / "agui_driver.mjs"
WIPER = f"wiper-{uuid.uuid4().hex[:6]}"
"""An agent whose model repeats call ids across turns (tests.support.wipe)."""
PICK = {"name": "pick_number", "description": "Ask for a number.", "parameters": {"type": "object", "properties": {}}}


class Endpoint:
    def __init__(self, url: str, runs: ReinClient, web: Any):
        self.url, self.runs, self.web = url, runs, web


async def serve(web: Any) -> tuple[str, uvicorn.Server, asyncio.Task[None]]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(web, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    await poll(lambda: server.started, "uvicorn to start")
    return f"http://127.0.0.1:{port}", server, task


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def endpoint(dev) -> AsyncIterator[Endpoint]:
    queue = f"agui-{uuid.uuid4().hex[:8]}"
    runs = ReinClient(dev.client, queue)
    wiper = wipe_agent(WIPER)
    web = app(dev.client, agents=[calculator, wiper, "other"], task_queue=queue, auth=BearerAuth(), open=True)  # loopback
    url, server, task = await serve(web)
    async with rein.create_worker(dev.client, agents=[calculator, wiper], task_queue=queue):
        yield Endpoint(url, runs, web)
        server.should_exit = True
        await task


async def drive(url: str, thread_id: str, steps: list[dict[str, Any]], **env: str) -> list[dict[str, Any]]:
    """The steps through the real HttpAgent (one Node process); one report per step."""
    process = await asyncio.create_subprocess_exec(
        "node", str(DRIVER), url, thread_id, json.dumps(steps), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, **env})
    out, err = await asyncio.wait_for(process.communicate(), 120)
    reports = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert len(reports) == len(steps), f"the driver stopped early: {err.decode()[-2000:]}"
    return reports


async def sse(http: httpx.AsyncClient, url: str, body: Any, *, until: str = "RUN_FINISHED",
              headers: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]], list[str]]:
    """A POST's events (and SSE ids) up to the first of type `until` (or the response's end)."""
    events: list[dict[str, Any]] = []
    ids: list[str] = []
    method = "POST" if body is not None else "GET"
    async with http.stream(method, url, json=body, headers=headers or {}) as response:
        if response.status_code != 200:
            return response.status_code, [json.loads(await response.aread())], []
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                ids.append(line[4:])
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                if events[-1]["type"] in (until, "RUN_ERROR"):
                    break
    return 200, events, ids


def body(thread_id: str, *messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": uuid.uuid4().hex, "messages": list(messages), **fields}


def user(text: str, message_id: str | None = None) -> dict[str, Any]:
    return {"id": message_id or uuid.uuid4().hex, "role": "user", "content": text}


async def test_the_npm_client_chats_approves_runs_a_frontend_tool_and_reconnects(endpoint: Endpoint) -> None:
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    url = f"{endpoint.url}/calculator"
    first, approved, asked = await drive(url, thread_id, [
        {"do": "send", "text": "What is 12 + 30?", "id": "q1"},
        {"do": "approve", "approve": True, "cut": "TEXT_MESSAGE_CONTENT"},
        {"do": "send", "text": "What is my number plus 5?"},
    ])
    assert first["outcome"] == "interrupt" and first["interrupts"][0]["reason"] == "tool_approval"
    assert first["types"][0] == "RUN_STARTED" and "TOOL_CALL_START" in first["types"]
    # the connection dropped after the answer's first delta; the reconnect told the rest, and the text once
    assert approved["errors"] == ["connection lost (cut by the test)"] and approved["reconnectedFrom"]
    assert approved["text"] == "The answer is 42." and approved["outcome"] == "success"
    answers = [m["content"] for m in approved["messages"] if m["role"] == "assistant" and m["content"]]
    assert answers == ["The answer is 42."]
    assert "TOOL_CALL_RESULT" in approved["types"]
    # the model called the page's own tool: the run ended with it pending, the thread waits for its result
    assert asked["outcome"] == "success" and len(asked["pending"]) == 1
    view = await endpoint.runs.thread(thread_id)
    assert (view.status, view.client_tools) == ("waiting_input", ["pick_number"])
    # the client that asked has gone; another process (a new HttpAgent, no history) brings the result
    told, added, unknown, retried = await drive(url, thread_id, [
        {"do": "tool", "content": "7", "call": asked["pending"][0]},
        {"do": "approve", "approve": True},
        {"do": "tool", "content": "8", "call": "no-such-call"},
        {"do": "repost"},
    ])
    assert told["outcome"] == "interrupt"  # the result went in: the model adds 5 + 7, which asks approval
    assert added["text"] == "The answer is 12."
    assert unknown["error"]["code"] == "DecisionRejected" and "no-such-call" in unknown["error"]["message"]
    # the last run's input again (a client retrying its POST): refused, and nothing changed
    assert retried["error"] is not None
    view = await endpoint.runs.thread(thread_id)
    assert (view.status, view.turns) == ("idle", 2)


async def test_a_retried_message_joins_its_turn_and_never_starts_another(endpoint: Endpoint) -> None:
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    url = f"{endpoint.url}/calculator"
    question = user("What is 1 + 2?", "only-once")
    async with httpx.AsyncClient(timeout=60) as http:
        _, first, _ = await sse(http, url, body(thread_id, question))
        _, again, _ = await sse(http, url, body(thread_id, question))  # the same message, POSTed again
        assert [e["type"] for e in again] == [e["type"] for e in first]
        assert again[-1]["outcome"]["interrupts"] == first[-1]["outcome"]["interrupts"]
        interrupt = first[-1]["outcome"]["interrupts"][0]
        assert interrupt["id"] == f"rein.{(await endpoint.runs.status(thread_id)).wait}.{interrupt['toolCallId']}"
        resume = body(thread_id, resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approve": True}}])
        _, done, _ = await sse(http, url, resume)
        # once more after the turn ended: its whole story, through the wait that was answered, to its answer
        _, whole, _ = await sse(http, url, body(thread_id, question))
        # (the first run ended at the wait: the conversation so far, then its end; the replay goes through it)
        assert [e["type"] for e in first[-2:]] == ["MESSAGES_SNAPSHOT", "RUN_FINISHED"]
        assert first[-2]["messages"][-1]["toolCalls"][0]["id"] == interrupt["toolCallId"]
        assert [e["type"] for e in whole] == [e["type"] for e in first[:-2]] + [e["type"] for e in done[2:]]
        assert whole[-1]["result"]["stop_reason"] == "done"
        view = await endpoint.runs.thread(thread_id)
        assert (view.turns, view.queued) == (1, [])
        await endpoint.runs.cancel(thread_id)


async def test_bad_input_is_refused_with_why_and_changes_nothing(endpoint: Endpoint) -> None:
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    url = f"{endpoint.url}/calculator"
    async with httpx.AsyncClient(timeout=30) as http:
        bad = await http.post(url, content=b"{not json", headers={"Content-Type": "application/json"})
        assert bad.status_code == 422 and "not JSON" in bad.json()["error"]
        as_text = await http.post(url, content=json.dumps(body(thread_id, user("hi"))), headers={"Content-Type": "text/plain"})
        assert as_text.status_code == 415 and "application/json" in as_text.json()["error"]  # what a form can send
        wide = {"type": "object", "description": "x" * 14_000}  # one tool's schema: at most 16 KiB; all: 64 KiB
        tools = [{"name": f"t{n}", "description": "", "parameters": wide} for n in range(5)]
        bad = await http.post(url, json=body(thread_id, user("hi"), tools=[{**tools[0], "description": "y" * 3000}]))
        assert bad.status_code == 422 and "more than 16384" in bad.json()["error"], bad.text
        bad = await http.post(url, json=body(thread_id, user("hi"), tools=tools))
        assert bad.status_code == 422 and "more than 65536 bytes as JSON together" in bad.json()["error"], bad.text
        bad = await http.post(url, json={"threadId": thread_id, "runId": "r"})
        assert bad.status_code == 422 and "messages" in bad.json()["error"]
        bad = await http.post(url, json=body(thread_id, user("hi"), forwardedProps={"mode": "shout"}))
        assert bad.status_code == 422 and "mode" in bad.json()["error"]
        bad = await http.post(url, json=body(thread_id, user("hi"), tools=[{**PICK, "name": "add"}]))
        assert bad.status_code == 422 and "add" in bad.json()["error"]
        bad = await http.post(url, json=body(thread_id, user("hi"), resume=[{"interruptId": "x", "status": "resolved",
                                                                              "payload": {"maybe": 1}}]))
        assert bad.status_code == 422
        missing = await http.post(f"{endpoint.url}/nobody", json=body(thread_id, user("hi")))
        assert missing.status_code == 404 and "calculator" in missing.json()["error"]
        watching = await http.get(f"{endpoint.url}/calculator/{thread_id}")
        assert watching.status_code == 404
    with pytest.raises(RPCError):  # none of it started the thread
        await endpoint.runs.thread(thread_id)


async def test_modes_while_a_turn_runs_and_a_client_that_leaves(endpoint: Endpoint) -> None:
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    url = f"{endpoint.url}/calculator"
    async with httpx.AsyncClient(timeout=60) as http:
        _, first, _ = await sse(http, url, body(thread_id, user("What is 2 + 2?")))
        assert first[-1]["outcome"]["type"] == "interrupt"  # turn 1 waits for an approval
        _, refused, _ = await sse(http, url, body(thread_id, user("What is 3 + 3?"), forwardedProps={"mode": "reject"}))
        assert refused[-1]["type"] == "RUN_ERROR" and refused[-1]["code"] == "Busy"
        # queued (the default): the POST waits for its own turn, then tells it; a client that leaves early
        # (this one, after RUN_STARTED) ends only its request
        _, early, _ = await sse(http, url, body(thread_id, user("What is 4 + 4?")), until="RUN_STARTED")
        assert [e["type"] for e in early] == ["RUN_STARTED"]
        queued = asyncio.create_task(sse(http, url, body(thread_id, user("What is 5 + 5?", "fifth"))))
        await poll(lambda: _queued(endpoint.runs, thread_id, "fifth"), "the fifth message to be taken")
        other = await http.post(f"{endpoint.url}/other", json=body(thread_id, user("hi")))
        assert other.status_code == 409 and "calculator" in other.json()["error"]
        interrupt = first[-1]["outcome"]["interrupts"][0]["id"]
        _, done, _ = await sse(http, url, body(thread_id, resume=[{"interruptId": interrupt, "status": "resolved",
                                                                   "payload": {"approve": True}}]))
        assert done[-1]["result"]["stop_reason"] == "done"
        # turn 2 (4 + 4, whose client left) runs anyway and waits for its approval
        view = await poll(lambda: _waiting(endpoint.runs, thread_id, 2), "turn 2 to wait for approval")
        assert view.queued and view.queued[0].message_id == "fifth"
        assert not queued.done()
        await endpoint.runs.approve(thread_id)
        _, third, _ = await queued
        calls = [e for e in third if e["type"] == "TOOL_CALL_ARGS"]
        assert json.loads(calls[0]["delta"]) == {"a": 5.0, "b": 5.0}  # its own turn's, told to its own POST
        await endpoint.runs.cancel(thread_id)


async def _queued(runs: ReinClient, thread_id: str, message_id: str) -> bool:
    return any(w.message_id == message_id for w in (await runs.thread(thread_id)).queued)


async def _waiting(runs: ReinClient, thread_id: str, turn: int) -> Any:
    view = await runs.thread(thread_id)
    return view if view.turns == turn and view.status == "waiting_approval" else None


async def test_a_hundred_viewers_cost_one_stream_reader_and_see_the_same_events(endpoint: Endpoint) -> None:
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    url = f"{endpoint.url}/calculator"
    hub = endpoint.web.state.agui.hub
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=200)) as http:
        _, first, _ = await sse(http, url, body(thread_id, user("What is 20 + 22?")))
        started = hub.readers_started

        async def view() -> list[tuple[str, str]]:
            seen: list[tuple[str, str]] = []
            async with http.stream("GET", f"{url}/{thread_id}") as response:
                last_id = ""
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        last_id = line[4:]
                    elif line.startswith("data: "):
                        event = json.loads(line[6:])
                        seen.append((last_id, event["type"] + ":" + event.get("delta", "")))
                        if event["type"] == "RUN_FINISHED" and "result" in event:
                            return seen
            return seen

        viewers = [asyncio.create_task(view()) for _ in range(100)]
        await poll(lambda: sum(f.viewers for f in hub.feeds.values()) >= 100, "a hundred viewers to attach")
        assert hub.feeds[thread_id].reading and hub.readers_started - started <= 1  # no reader per viewer
        polls = await dev_readers(endpoint.runs, thread_id)
        assert polls == 1  # the thread counts ONE reader: the hub's one poll in flight
        interrupt = first[-1]["outcome"]["interrupts"][0]["toolCallId"]
        await endpoint.runs.approve(thread_id, interrupt)
        seen = await asyncio.wait_for(asyncio.gather(*viewers), 60)
    differ = [n for n, s in enumerate(seen) if s != seen[0]]
    assert not differ, f"viewers {differ} saw {seen[differ[0]]}, viewer 0 saw {seen[0]}" if differ else ""
    assert all(event_id for event_id, _ in seen[0]) and any(kind == "TEXT_MESSAGE_CONTENT:42." for _, kind in seen[0])
    await endpoint.runs.cancel(thread_id)


async def dev_readers(runs: ReinClient, thread_id: str) -> int:
    async def counted() -> int | None:
        count = await runs.client.get_workflow_handle(thread_id).query(READERS_QUERY, result_type=int)
        return count or None
    return await poll(counted, "the thread to count its readers")


async def test_a_token_is_needed_once_one_is_set_and_a_tenant_reaches_its_own_threads(dev, endpoint: Endpoint) -> None:
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    guarded = app(dev.client, agents=[calculator], task_queue=endpoint.runs.task_queue, auth=BearerAuth(token="s3cret"))
    url, server, task = await serve(guarded)
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            status, refused, _ = await sse(http, f"{url}/calculator", body(thread_id, user("What is 1 + 1?")))
            assert status == 401 and "bearer" in refused[0]["error"]
            status, _, _ = await sse(http, f"{url}/calculator", body(thread_id, user("What is 1 + 1?")),
                                     headers={"Authorization": "Bearer wrong"})
            assert status == 401
            status, events, _ = await sse(http, f"{url}/calculator", body(thread_id, user("What is 1 + 1?")),
                                          headers={"Authorization": "Bearer s3cret"})
            assert status == 200 and events[-1]["outcome"]["type"] == "interrupt"
    finally:
        server.should_exit = True
        await task
    await endpoint.runs.cancel(thread_id)


async def test_a_tenant_claim_scopes_the_threads_a_caller_reaches(dev, endpoint: Endpoint, idp) -> None:  # noqa: F811
    scoped = app(dev.client, agents=[calculator], task_queue=endpoint.runs.task_queue,
                 auth=BearerAuth(jwks_url=idp.url, audience="temporal-ui"))
    url, server, task = await serve(scoped)
    acme = {"Authorization": f"Bearer {_jwt(idp, tenant='acme')}"}
    globex = {"Authorization": f"Bearer {_jwt(idp, tenant='globex')}"}
    nobody = {"Authorization": f"Bearer {_jwt(idp)}"}  # no tenant claim: refused, as the inbox page refuses it
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            status, refused, _ = await sse(http, f"{url}/calculator", body(thread_id, user("Hi")), headers=nobody)
            assert status == 403 and "no 'tenant' claim" in refused[0]["error"]
            status, events, _ = await sse(http, f"{url}/calculator", body(thread_id, user("What is 6 + 1?")), headers=acme)
            assert status == 200 and events[-1]["outcome"]["type"] == "interrupt"
            status, refused, _ = await sse(http, f"{url}/calculator", body(thread_id, user("What is 7 + 1?")), headers=globex)
            assert status == 404 and "acme" not in refused[0]["error"]
            interrupt = events[-1]["outcome"]["interrupts"][0]
            resume = body(thread_id, resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approve": True}}])
            status, _, _ = await sse(http, f"{url}/calculator", resume, headers=globex)
            assert status == 404  # a decision outside the caller's tenant never reaches the thread
            status, done, _ = await sse(http, f"{url}/calculator", resume, headers=acme)
            assert done[-1]["result"]["stop_reason"] == "done"
        view = await endpoint.runs.thread(thread_id)
        assert view.turns == 1  # globex's message never reached it
        session = await endpoint.runs.session(thread_id)
        decided = [d for d in session.decisions if d.tool_call_id == interrupt["toolCallId"]]
        assert decided and decided[0].approver == "ops@example.com"  # who decided: the caller's subject
    finally:
        server.should_exit = True
        await task
    await endpoint.runs.cancel(thread_id)


async def test_the_stored_history_of_a_thread_with_a_client_tool_replays() -> None:
    """tests/histories/make_histories.py thread_client_tools: a turn offered a client tool (the patch rein-client-tools
    marks it), waited for its result, took it with rein.tool_results; then a turn without. This build replays it."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from rein.temporal.converter import rein_data_converter
    from rein.workflows import AgentWorkflow

    path = ROOT / "tests" / "histories" / "agent_thread_client_tools_v1.json"
    history = WorkflowHistory.from_json("agent-thread-tools", path.read_text())
    kinds = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_MARKER_RECORDED in kinds  # the patch, as the turn with the client tool opened
    updates = [e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
               for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
    assert "rein.tool_results" in updates
    await Replayer(workflows=[AgentWorkflow], data_converter=rein_data_converter()).replay_workflow(history)


async def test_a_reconnect_reads_what_the_shared_reader_no_longer_holds_with_the_query(endpoint: Endpoint) -> None:
    """A client reconnects (Last-Event-ID) to a run older than what this process's reader of the thread holds (it
    stopped with its last viewer, and a later viewer started it again further on): the missed events come from the
    stream's poll query, and the reconnect tells the run's rest exactly as the first request did."""
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    url = f"{endpoint.url}/calculator"
    hub = endpoint.web.state.agui.hub
    hub.linger_s = 0.0
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            _, events, ids = await sse(http, url, body(thread_id, user("What is 9 + 9?")))
            assert events[-1]["outcome"]["type"] == "interrupt" and len(ids) >= 4
            await poll(lambda: thread_id not in hub.feeds, "the reader to stop with its last viewer")
            now = (await endpoint.runs.thread(thread_id)).offset
            later = asyncio.create_task(sse(http, f"{url}/{thread_id}?after={now}.{now}.0", None))
            await poll(lambda: thread_id in hub.feeds and hub.feeds[thread_id].first == now, "a viewer from now on")
            _, again, again_ids = await sse(http, url, body(thread_id, user("What is 9 + 9?")),
                                            headers={"Last-Event-ID": ids[1]})
            # events[0:2] are RUN_STARTED and STATE_SNAPSHOT (no id): ids[1] is events[3]'s
            rest = [e["type"] for e in events[4:]]
            # the state, the step and the tool call it was in the middle of are opened again, then the rest, once
            assert [e["type"] for e in again] == ["RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED", "TOOL_CALL_START", *rest]
            assert again_ids == [ids[1], *ids[2:]] and again[-1]["outcome"] == events[-1]["outcome"]
            later.cancel()
    finally:
        hub.linger_s = 5.0
    await endpoint.runs.cancel(thread_id)


async def test_a_steer_into_a_turn_that_waits_for_approval_is_told_that_turn_from_its_message_on(
        endpoint: Endpoint) -> None:
    """A steer POST while turn 1 waits for its approval joins turn 1: its run is not the wait it joined but what
    the turn does with the message once the call is decided (the answer to it), then the turn's end."""
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    url = f"{endpoint.url}/calculator"
    async with httpx.AsyncClient(timeout=60) as http:
        _, first, _ = await sse(http, url, body(thread_id, user("What is 2 + 3?")))
        assert first[-1]["outcome"]["type"] == "interrupt"
        steered = asyncio.create_task(sse(http, url, body(thread_id, user("What is 4?", "steer-1"),
                                                          forwardedProps={"mode": "steer"})))
        await poll(lambda: _steering(endpoint.runs, thread_id, "steer-1"), "the steer to be taken")
        await endpoint.runs.approve(thread_id)
        _, told, _ = await asyncio.wait_for(steered, 60)
        assert [e["type"] for e in told if e["type"].startswith("RUN_")] == ["RUN_STARTED", "RUN_FINISHED"]
        assert told[-1]["result"] == {"stop_reason": "done", "turn": 1}
        assert "".join(e["delta"] for e in told if e["type"] == "TEXT_MESSAGE_CONTENT") == "The answer is 4."
        assert [e["toolCallId"] for e in told if e["type"] == "TOOL_CALL_RESULT"] == ["call-add-2"]  # the decided call
        await endpoint.runs.cancel(thread_id)


async def _steering(runs: ReinClient, thread_id: str, message_id: str) -> bool:
    return any(w.message_id == message_id for w in (await runs.thread(thread_id)).steering)


async def test_a_resume_for_a_stale_interrupt_is_refused_and_decides_nothing(dev, endpoint: Endpoint) -> None:  # noqa: ANN001
    """The interrupt the client holds asks `wipe(target="alpha")` as call_0; meanwhile someone else approves it and
    the thread asks `wipe(target="prod")` as call_0 again. The client's resume of its interrupt is refused (one line,
    RUN_ERROR, naming what the thread waits on now); prod does not run and no decision is recorded for it."""
    thread_id, runs = f"agui-{uuid.uuid4().hex[:8]}", endpoint.runs
    url = f"{endpoint.url}/{WIPER}"
    async with httpx.AsyncClient(timeout=60) as http:
        _, first, _ = await sse(http, url, body(thread_id, user("wipe alpha prod")))
        (interrupt,) = first[-1]["outcome"]["interrupts"]
        shown = await runs.status(thread_id)
        assert (interrupt["id"], interrupt["toolCallId"]) == (f"rein.{shown.wait}.call_0", "call_0")
        assert interrupt["metadata"]["rein"]["wait"] == shown.wait and "alpha" in interrupt["message"]
        await runs.approve(thread_id)  # someone else, elsewhere
        now = await poll(lambda: _waits_after(runs, thread_id, shown.wait), "the thread to ask again")
        assert [c.arguments for c in now.pending_tool_calls] == [{"target": "prod"}] and now.waiting_on == ["call_0"]
        for stale in (interrupt["id"], "call_0"):  # its interrupt; a bare call id (an earlier build's interrupt id)
            resume = body(thread_id, resume=[{"interruptId": stale, "status": "resolved", "payload": {"approve": True}}])
            status, refused, _ = await sse(http, url, resume)
            error = refused[-1]
            assert status == 200 and error["type"] == "RUN_ERROR" and error["code"] == "DecisionRejected", refused
            assert "stale" in error["message"] and f'wait {now.wait} for approval of wipe(target="prod") [call_0]' \
                in error["message"] and "\n" not in error["message"], error
    assert wiped(thread_id) == [("call_0", "alpha")]  # prod did not run
    assert await approvals_taken(dev.client, thread_id) == 1  # the history: only the first approval was taken
    assert len((await runs.session(thread_id)).decisions) == 1
    assert (await runs.status(thread_id)).wait == now.wait  # still waits, on the new call
    await runs.cancel(thread_id)


async def test_a_resume_that_approves_one_call_and_denies_another_of_one_wait_decides_just_those(
        dev, endpoint: Endpoint) -> None:  # noqa: ANN001
    """Two interrupts of one wait, answered differently: the denial goes first (bound to the wait shown), the
    approval to the wait that follows at the same model answer; each call as the person said."""
    thread_id, runs = f"agui-{uuid.uuid4().hex[:8]}", endpoint.runs
    url = f"{endpoint.url}/{WIPER}"
    async with httpx.AsyncClient(timeout=60) as http:
        _, first, _ = await sse(http, url, body(thread_id, user("wipe-all staging prod")))
        interrupts = first[-1]["outcome"]["interrupts"]
        assert [i["toolCallId"] for i in interrupts] == ["call_0", "call_1"]
        answers = [{"interruptId": interrupts[0]["id"], "status": "resolved", "payload": {"approve": True}},
                   {"interruptId": interrupts[1]["id"], "status": "resolved", "payload": {"approve": False,
                                                                                           "reason": "not prod"}}]
        _, done, _ = await sse(http, url, body(thread_id, resume=answers))
        assert done[-1]["type"] == "RUN_FINISHED" and done[-1]["result"]["stop_reason"] == "done", done[-3:]
    assert wiped(thread_id) == [("call_0", "staging")]
    decisions = {d.tool_call_id: (d.approved, d.reason) for d in (await runs.session(thread_id)).decisions}
    assert decisions == {"call_0": (True, ""), "call_1": (False, "not prod")}
    await runs.cancel(thread_id)


async def _waits_after(runs: ReinClient, thread_id: str, wait: str | None) -> Any:
    status = await runs.status(thread_id)
    return status if status.status == "waiting_approval" and status.wait not in (None, wait) else None


def asked_lookup(key: str) -> dict[str, Any]:
    """The assistant message a page holds for the model's `lookup(key=...)` call (call_0, as the model repeats it)."""
    return {"id": uuid.uuid4().hex, "role": "assistant", "toolCalls": [
        {"id": "call_0", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"key": key})}}]}


def looked_up(text: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex, "role": "tool", "toolCallId": "call_0", "content": text}


async def test_a_page_result_for_a_call_whose_id_the_thread_asks_again_is_stale_and_taken_nowhere(
        endpoint: Endpoint) -> None:
    """The page ran its tool for `lookup(key="alpha")` (call_0); the next turn asks `lookup(key="beta")` as call_0
    again. The page's history sent again (a retried POST, a second tab) ends on alpha's result: refused in one line
    naming what the thread waits on now, nothing taken; beta's own result is taken."""
    thread_id, url = f"agui-{uuid.uuid4().hex[:8]}", f"{endpoint.url}/{WIPER}"
    first, second = user("look alpha"), user("look beta")
    alpha = [first, asked_lookup("alpha"), looked_up("A")]
    async with httpx.AsyncClient(timeout=60) as http:
        for messages in ([first], alpha, [*alpha, {"id": "a1", "role": "assistant", "content": "Looked up: A."}, second]):
            status, events, _ = await sse(http, url, body(thread_id, *messages, tools=[LOOKUP]))
            assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events[-1]
        waiting = await endpoint.runs.status(thread_id)
        assert waiting.status == "waiting_input" and [(c.id, c.arguments) for c in waiting.pending_tool_calls] == [
            ("call_0", {"key": "beta"})]
        status, events, _ = await sse(http, url, body(thread_id, *alpha, tools=[LOOKUP]))  # alpha's page again
        error = events[-1]
        assert error["type"] == "RUN_ERROR" and error["message"].startswith("stale: the result of lookup(key=\"alpha\")")
        assert f'wait {waiting.wait} for ' in error["message"] and 'lookup(key="beta") [call_0]' in error["message"]
        assert (await endpoint.runs.status(thread_id)).wait == waiting.wait  # nothing was taken
        status, events, _ = await sse(http, url, body(thread_id, second, asked_lookup("beta"), looked_up("B"),
                                                      tools=[LOOKUP]))
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    messages = (await endpoint.runs.session(thread_id)).messages
    assert [m.content for m in messages if m.role == "tool"] == ["A", "B"]
    assert_no_task_failures(await history_events(endpoint.runs.client.get_workflow_handle(thread_id)))
    assert messages[-1].content == "Looked up: B."

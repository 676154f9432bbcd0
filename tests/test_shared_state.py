"""A thread's shared state (rein.core.shared_state): a tool changes it and a page sees the change (AG-UI's
STATE_DELTA, the AI SDK's data-state part), a page writes it on the version it read (a stale write refused, 409),
forks copy it, and it outlives the worker: killed, replaced, and the page that reconnects gets it whole.

The planner agent (tests/agents/ai_sdk.py) keeps a to-do list in it: `add X and Y` is one tool call per item.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest
import pytest_asyncio

import rein
from rein.client import DecisionRejected, ReinClient
from rein.web.app import build
from tests.agents.ai_sdk import hold_file, planner
from tests.support.processes import WorkerProcess
from tests.test_agui import body, serve, sse, user

pytestmark = pytest.mark.timeout(180)


class Site:
    def __init__(self, url: str, runs: ReinClient):
        self.url, self.runs = url, runs


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def site(dev, tmp_path_factory) -> AsyncIterator[Site]:
    """`rein serve`'s app (AG-UI and the AI SDK on one hub) and a worker for the planner."""
    os.environ["REINTEST_DIR"] = str(tmp_path_factory.mktemp("state"))
    queue = f"state-{uuid.uuid4().hex[:8]}"
    url, server, task = await serve(build(dev.client, [planner], task_queue=queue, auth=rein.temporal.bearer.BearerAuth(), open=True))
    async with rein.create_worker(dev.client, agents=[planner], task_queue=queue):
        yield Site(url, ReinClient(dev.client, queue))
        server.should_exit = True
        await task


def deltas_applied(events: list[dict[str, Any]]) -> Any:
    """The state a client holds after the run's STATE_SNAPSHOT and STATE_DELTA events (applied with jsonpatch)."""
    state: Any = None
    for event in events:
        if event["type"] == "STATE_SNAPSHOT":
            state = event["snapshot"]
        elif event["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, event["delta"])
    return state


async def told_while_held(http: httpx.AsyncClient, url: str, payload: dict[str, Any], question: str) -> list[Any]:
    """An AG-UI run's events (or a UI message stream's chunks), the planner held (tests/agents/ai_sdk.py) until the
    state's snapshot has come: every change its tools make comes after it."""
    hold = hold_file(question)
    hold.touch()
    events: list[dict[str, Any]] = []
    try:
        async with http.stream("POST", url, json=payload) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(json.loads(line[6:]))
                    if events[-1]["type"] in ("STATE_SNAPSHOT", "data-state") and hold.exists():
                        hold.unlink()
                    if events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                        break
    finally:
        hold.unlink(missing_ok=True)
    return events


async def ui_chunks(http: httpx.AsyncClient, url: str, payload: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    async with http.stream("POST", url, json=payload) as response:
        if response.status_code != 200:
            return response.status_code, [json.loads(await response.aread())]
        return 200, [json.loads(line[6:]) async for line in response.aiter_lines()
                     if line.startswith("data: ") and line != "data: [DONE]"]


async def test_a_tool_changes_the_state_pages_see_it_and_a_stale_page_cannot_overwrite_it(site: Site) -> None:
    thread_id = f"state-{uuid.uuid4().hex[:8]}"
    agui = f"{site.url}/agui/planner"
    async with httpx.AsyncClient(timeout=60) as http:
        # the run starts with the state as it is; the tool's change comes as an RFC 6902 delta
        events = await told_while_held(http, agui, body(thread_id, user("add milk")), "add milk")
        assert [e["type"] for e in events][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"] and events[1]["snapshot"] == {}
        assert [e["delta"] for e in events if e["type"] == "STATE_DELTA"] == [
            [{"op": "add", "path": "/todos", "value": ["milk"]}]]
        # two calls of one batch each see the state as the batch began; their changes apply in call order
        events = await told_while_held(http, agui, body(thread_id, user("add eggs and tea")), "add eggs and tea")
        assert events[1]["snapshot"] == {"todos": ["milk"]} and events[1]["metadata"]["rein"]["stateVersion"] == 1
        assert [e["delta"] for e in events if e["type"] == "STATE_DELTA"] == [
            [{"op": "add", "path": "/todos/1", "value": "eggs"}], [{"op": "add", "path": "/todos/1", "value": "tea"}]]
        assert deltas_applied(events) == {"todos": ["milk", "tea", "eggs"]}
        state = await site.runs.state(thread_id)
        assert (state.value, state.version) == ({"todos": ["milk", "tea", "eggs"]}, 3)
        # a page that read version 1 writes: refused, the tools' change stands
        stale = body(thread_id, user("add tea"), state={"todos": []}, forwardedProps={"stateVersion": 1})
        status, refused, _ = await sse(http, agui, stale)
        assert status == 409 and "stale" in refused[0]["error"]
        assert (await site.runs.state(thread_id)).version == 3
        assert (await site.runs.thread(thread_id)).turns == 2  # and its message was not sent either
        # written on the version it read: taken, and the next tool call sees the page's list
        fresh = body(thread_id, user("add rice"), state={"todos": ["bread"]}, forwardedProps={"stateVersion": 3})
        events = await told_while_held(http, agui, fresh, "add rice")
        assert events[1]["snapshot"] == {"todos": ["bread"]}
        assert deltas_applied(events) == {"todos": ["bread", "rice"]}
        # the AI SDK: the state as a data part at the start, and again whole after each change
        ai = f"{site.url}/ai-sdk/planner"
        status, refused = await ui_chunks(http, ai, {"id": thread_id, "messages": [
            {"id": "m-jam", "role": "user", "parts": [{"type": "text", "text": "add jam"}]}],
            "state": {"value": {"todos": []}, "version": 3}})
        assert status == 409 and "stale" in refused[0]["error"]
        chunks = await told_while_held(http, ai, {"id": thread_id, "messages": [
            {"id": "m-jam", "role": "user", "parts": [{"type": "text", "text": "add jam"}]}]}, "add jam")
    parts = [c["data"] for c in chunks if c["type"] == "data-state"]
    assert [p["version"] for p in parts] == [5, 6] and parts[-1]["value"]["todos"][-1] == "jam"
    assert all(c.get("id") == "state" for c in chunks if c["type"] == "data-state")
    # a client of rein's own: the same versioned write
    with pytest.raises(DecisionRejected, match="stale"):
        await site.runs.set_state(thread_id, {"todos": []}, version=5)
    assert await site.runs.set_state(thread_id, {"todos": ["one"]}, version=6) == 7
    # a fork at the first batch starts from the state as it was then
    steps = await site.runs.steps(thread_id)
    batch = max(s.index for s in steps if s.kind == "tool" and "tea" in s.summary)
    fork = await site.runs.fork(thread_id, at_step=batch)
    forked = await site.runs.state(fork)
    assert forked.value == {"todos": ["milk", "tea", "eggs"]}
    await site.runs.cancel(fork)
    await site.runs.cancel(thread_id)


async def test_the_state_outlives_a_killed_worker_and_a_reconnecting_page_gets_it(dev, tmp_path: Path) -> None:
    address = dev.client.service_client.config.target_host
    queue = f"state-kill-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(address, ["tests.agents.ai_sdk:planner"], queue, tmp_path / "worker.log").start()
    url, server, task = await serve(build(dev.client, ["planner"], task_queue=queue,
                                          auth=rein.temporal.bearer.BearerAuth(), open=True))
    runs = ReinClient(dev.client, queue)
    thread_id = f"state-{uuid.uuid4().hex[:8]}"
    try:
        async with httpx.AsyncClient(timeout=120) as http:
            _, events, ids = await sse(http, f"{url}/agui/planner", body(thread_id, user("add milk")))
            assert deltas_applied(events) == {"todos": ["milk"]}
            worker.kill()  # the worker that ran the tool dies; the state is the thread's, in Temporal
            worker = WorkerProcess(address, ["tests.agents.ai_sdk:planner"], queue, tmp_path / "worker2.log").start()
            # the page reconnects (Last-Event-ID): the state comes whole first
            _, again, _ = await sse(http, f"{url}/agui/planner", body(thread_id, user("add milk")),
                                    headers={"Last-Event-ID": ids[-1]})
            assert [e["type"] for e in again][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
            assert again[1]["snapshot"] == {"todos": ["milk"]} and again[1]["metadata"]["rein"]["stateVersion"] == 1
            # the new worker's tool reads the state the dead one left, and changes it
            _, events, _ = await sse(http, f"{url}/agui/planner", body(thread_id, user("add eggs")))
            assert deltas_applied(events) == {"todos": ["milk", "eggs"]}
        state = await runs.state(thread_id)
        assert (state.value, state.version) == ({"todos": ["milk", "eggs"]}, 2)
        await runs.cancel(thread_id)
    finally:
        worker.stop()
        server.should_exit = True
        await task


async def test_the_stored_history_of_a_thread_with_state_and_a_stop_replays() -> None:
    """tests/histories/make_histories.py thread_state: a tool's change to the state, a page's write, a turn stopped
    while it waited for approval (the patch rein-stop-turn marks it), a last turn. This build replays it."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from rein.temporal.converter import rein_data_converter
    from rein.workflows import AgentWorkflow
    from tests.support.processes import ROOT

    path = ROOT / "tests" / "histories" / "agent_thread_state_v1.json"
    history = WorkflowHistory.from_json("agent-thread-state", path.read_text())
    markers = [e.marker_recorded_event_attributes for e in history.events
               if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    patches = [p.data for m in markers if m.marker_name == "core_patch" for p in m.details["patch-data"].payloads]
    assert any(b"rein-stop-turn" in data for data in patches)
    updates = [e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
               for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
    assert {"rein.set_state", "rein.stop_turn"} <= set(updates)
    await Replayer(workflows=[AgentWorkflow], data_converter=rein_data_converter()).replay_workflow(history)


async def test_the_state_goes_on_through_continue_as_new(site: Site) -> None:
    """A thread started (by stock tools' update-with-start) to continue as new past 20 history events: its state
    crosses each new run whole, and its tools go on from it."""
    from temporalio.client import WithStartWorkflowOperation
    from temporalio.common import WorkflowIDConflictPolicy

    from rein.core.contract import WORKFLOW_TYPE
    from rein.core.threads import SEND_UPDATE, SendReceipt

    thread_id = f"state-can-{uuid.uuid4().hex[:8]}"
    start = WithStartWorkflowOperation(
        WORKFLOW_TYPE, {"agent": "planner", "thread": True, "continue_as_new_after": 20, "state": {"todos": ["a"]}},
        id=thread_id, task_queue=site.runs.task_queue, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
    receipt = await site.runs.client.execute_update_with_start_workflow(
        SEND_UPDATE, {"text": "add b"}, start_workflow_operation=start, result_type=SendReceipt)
    await site.runs.reply(receipt)
    first_run = (await site.runs.handle(thread_id).describe()).run_id
    for item in ("c", "d"):
        await site.runs.reply(await site.runs.send(thread_id, f"add {item}", agent="planner"))
    assert (await site.runs.handle(thread_id).describe()).run_id != first_run  # it continued as new
    state = await site.runs.state(thread_id)
    assert state.value == {"todos": ["a", "b", "c", "d"]} and state.version == 4
    await site.runs.cancel(thread_id)

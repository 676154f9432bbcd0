"""AgentWorkflow on a real Temporal dev server (rein.testing.start_local()).

What the time-skipping test server cannot show: search attributes and
visibility queries, and a run surviving the loss of the worker that ran it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import WorkflowHandle
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.worker import Replayer

import rein
from rein import Agent, LoopConfig, MockProvider, ToolCall
from rein.testing import full_result
from rein.workflows import AgentWorkflow
from tests.support.history import assert_no_task_failures, tool_attempts
from tests.support.results import tool_messages
from tests.support.runs import forget_sticky_worker, start
from tests.support.tools import add, tc
from tests.support.waiting import poll, wait_status

ROOT = Path(__file__).resolve().parent.parent

REIN_AGENT = SearchAttributeKey.for_keyword("ReinAgent")
REIN_STATUS = SearchAttributeKey.for_keyword("ReinStatus")
REIN_ITERATIONS = SearchAttributeKey.for_int("ReinIterations")
REIN_TOKENS = SearchAttributeKey.for_int("ReinTokens")


# --------------------------------------------------------------------------- agent served by a separate worker process


CRASH_TOOL_TIMEOUT_S = 60
"""The tool's timeout: far longer than the heartbeat timeout, so only a missed heartbeat can move the call."""
CRASH_CONFIG = LoopConfig(heartbeat_timeout_s=2)
"""How long after worker A's death the server gives the call to worker B (A beats every 0.5 s while
the tool runs): the knob for a lost call to move sooner than the default 20 s."""


async def block_forever(x: str) -> str:
    """Never returns: its worker is killed while it runs."""
    await asyncio.sleep(3600)
    return "unreachable"


crash_agent = Agent(
    provider=MockProvider([[ToolCall(id="k1", name="block", arguments={"x": "1"})], "A final"]),
    tools=[rein.Tool.from_function(block_forever, name="block", timeout_s=CRASH_TOOL_TIMEOUT_S)],
    name="crash",
    config=CRASH_CONFIG,
)
"""Loaded by `worker.py --agent test_workflow_devserver:crash_agent` in a subprocess."""


# --------------------------------------------------------------------------- fixtures and helpers


async def assert_replays(handle: WorkflowHandle) -> None:
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


# --------------------------------------------------------------------------- search attributes


async def test_search_attributes_find_waiting_runs(dev, ids):
    tq, wf_id = ids
    agent = Agent(
        provider=MockProvider([[tc("add", "c1", a=1, b=2)], "three"]),
        tools=[add],
        name="visible",
        config=LoopConfig(permission="ask"),
    )
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await start(dev, "visible", "add", wf_id, tq)
        await wait_status(handle, "waiting_approval")

        async def listed(status: str) -> list[str]:
            query = f'WorkflowId = "{wf_id}" AND ReinStatus = "{status}"'
            return [w.id async for w in dev.client.list_workflows(query)]

        assert await poll(lambda: listed("waiting_approval"), "visibility of waiting_approval", 10, ignore=(RPCError,)) == [wf_id]
        # the ops query from the design, unfiltered
        waiting = [w.id async for w in dev.client.list_workflows('ReinStatus="waiting_approval"')]
        assert wf_id in waiting

        attrs = (await handle.describe()).typed_search_attributes
        assert attrs.get(REIN_AGENT) == "visible"
        assert attrs.get(REIN_STATUS) == "waiting_approval"
        assert attrs.get(REIN_ITERATIONS) == 1
        assert attrs.get(REIN_TOKENS) == 2

        await handle.signal("approve", {"approver": "ops"})
        result = await full_result(handle)

    assert result["output"] == "three"
    assert await poll(lambda: listed("done"), "visibility of done", 10, ignore=(RPCError,)) == [wf_id]
    attrs = (await handle.describe()).typed_search_attributes
    assert attrs.get(REIN_STATUS) == "done"
    assert attrs.get(REIN_ITERATIONS) == 2
    assert attrs.get(REIN_TOKENS) == 4
    assert (await listed("waiting_approval")) == []


async def test_long_run_publishes_its_final_counters_with_its_status(dev, ids):
    """Ten quick iterations: the run's last counters are right whatever the timing. The run is on the
    timed rule (refresh when COUNTER_SECONDS have passed) and publishes its last counters with its final
    status, one upsert; the old every-5th-iteration rule published them apart in the same workflow task."""
    tq, wf_id = ids
    rounds = [[tc("add", f"c{i}", a=i, b=1)] for i in range(9)]
    agent = Agent(provider=MockProvider([*rounds, "ten"]), tools=[add], name="counting")
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await start(dev, "counting", "count", wf_id, tq)
        result = await full_result(handle)
        await assert_replays(handle)
    assert result["output"] == "ten" and result["session"]["iteration"] == 10
    attrs = (await handle.describe()).typed_search_attributes
    assert (attrs.get(REIN_STATUS), attrs.get(REIN_ITERATIONS), attrs.get(REIN_TOKENS)) == ("done", 10, 20)
    events = (await handle.fetch_history()).events
    upserts = [i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES]
    # The counter rule is the only one (rein-timed-counters retired): the one patch is the run's recorded start.
    assert [e.marker_recorded_event_attributes.marker_name for e in events
            if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED] == ["core_patch"]
    fields = [events[i].upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
              for i in upserts]
    assert [json.loads(f["TemporalChangeVersion"].data) for f in fields if "TemporalChangeVersion" in f] == [
        ["rein-recorded-start"]]
    assert [json.loads(fields[-1][k].data) for k in ("ReinStatus", "ReinIterations")] == ["done", 10]
    # No two upserts in one workflow task (nothing but commands between them).
    for a, b in zip(upserts, upserts[1:], strict=False):
        assert any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in events[a:b]), (a, b)


async def test_a_short_run_records_no_counter_patch(dev, ids):
    """A run records no patch marker and no TemporalChangeVersion upsert for the counter rule (the only
    one). Cancelled while waiting, the run publishes `cancelled` with its last counters in one upsert, not
    `running` and then `cancelled`."""
    tq, wf_id = ids
    agent = Agent(provider=MockProvider([[tc("add", "c1", a=1, b=2)], "three"]), tools=[add], name="cancelled-wait",
                  config=LoopConfig(permission="ask"))
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await start(dev, "cancelled-wait", "add", wf_id, tq)
        await wait_status(handle, "waiting_approval")
        await handle.signal("cancel", {"reason": "not today"})
        result = await full_result(handle)  # closed CANCELED: its outcome through rein's client
        await assert_replays(handle)
    assert result["stop_reason"] == "cancelled"
    events = (await handle.fetch_history()).events
    upserts = [e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
               for e in events if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES]
    statuses = [json.loads(u["ReinStatus"].data) for u in upserts if "ReinStatus" in u]
    assert statuses == ["waiting_approval", "cancelled"]  # a plain client's lean run publishes first when it waits
    # The only patches are the recorded start's, then the inbox's and the waiting timer's, asked at the first wait
    # (markers, Temporal's upserts).
    assert [e.marker_recorded_event_attributes.marker_name for e in events
            if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED] == [
        "core_patch", "core_patch", "core_patch", "core_local_activity"]
    assert [sorted(json.loads(u["TemporalChangeVersion"].data)) for u in upserts if "TemporalChangeVersion" in u] == [
        ["rein-recorded-start"], ["rein-inbox", "rein-recorded-start"],
        ["rein-inbox", "rein-recorded-start", "rein-waiting-timer"]]
    attrs = (await handle.describe()).typed_search_attributes
    assert (attrs.get(REIN_STATUS), attrs.get(REIN_ITERATIONS)) == ("cancelled", 1)


# --------------------------------------------------------------------------- losing a worker


async def test_worker_shut_down_mid_tool_another_finishes(dev, ids):
    """Worker A shuts down while its tool runs; worker B (same queue) retries the tool and finishes."""
    tq, wf_id = ids
    entered = asyncio.Event()
    a_cancelled = asyncio.Event()

    @rein.tool(name="block")
    async def block_a(x: str) -> str:
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            a_cancelled.set()
            raise
        return "from A"

    @rein.tool(name="block")
    async def block_b(x: str) -> str:
        return f"from B ({x})"

    agent_a = Agent(provider=MockProvider([[tc("block", "k1", x="1")], "A final"]), tools=[block_a], name="handover")
    agent_b = Agent(provider=MockProvider(["B final"]), tools=[block_b], name="handover")

    async with rein.create_worker(dev.client, agents=[agent_a], task_queue=tq):
        handle = await start(dev, "handover", "go", wf_id, tq)
        await asyncio.wait_for(entered.wait(), 15)
    assert a_cancelled.is_set()

    async with rein.create_worker(dev.client, agents=[agent_b], task_queue=tq):
        result = await asyncio.wait_for(full_result(handle), 40)
        events = list((await handle.fetch_history()).events)

    assert result["output"] == "B final"
    assert tool_messages(result) == {"k1": "from B (1)"}
    assert [s["is_error"] for s in result["steps"] if s["kind"] == "tool"] == [False]
    assert tool_attempts(events) == [2]
    assert_no_task_failures(events)
    await assert_replays(handle)


async def test_worker_killed_mid_tool_another_finishes(dev, ids, tmp_path):
    """Worker A (a separate process) is SIGKILLed while its tool runs: the heartbeat
    timeout (the agent's heartbeat_timeout_s, well below the tool's timeout) lets worker B retry the tool."""
    tq, wf_id = ids
    address = dev.client.service_client.config.target_host
    log = open(tmp_path / "worker-a.log", "wb")
    process = subprocess.Popen(
        [
            sys.executable, str(ROOT / "worker.py"),
            "--agent", "test_workflow_devserver:crash_agent",
            "--task-queue", tq, "--address", address,
        ],
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
             "REIN_DEPLOYMENT": "none"},  # unversioned like worker B, which takes the run over
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        handle = await start(dev, "crash", "go", wf_id, tq)

        async def tool_running() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"worker A exited early: {(tmp_path / 'worker-a.log').read_text()[-2000:]}")
            desc = await handle.describe()
            return any(
                p.activity_type.name == "rein.run_tool"
                and p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                for p in desc.raw_description.pending_activities
            )

        await poll(tool_running, "worker A to start the tool", 20, ignore=(RPCError,))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        log.close()
    await forget_sticky_worker(dev.client, wf_id)

    @rein.tool(name="block", timeout_s=CRASH_TOOL_TIMEOUT_S)  # the same tool as A's, else the call is refused
    async def block_b(x: str) -> str:
        """Never returns: its worker is killed while it runs."""  # A's docstring: the spec's description
        return f"from B ({x})"

    agent_b = Agent(provider=MockProvider(["B final"]), tools=[block_b], name="crash", config=CRASH_CONFIG)
    async with rein.create_worker(dev.client, agents=[agent_b], task_queue=tq):
        result = await asyncio.wait_for(full_result(handle), 40)
        events = list((await handle.fetch_history()).events)

    assert result["output"] == "B final"
    assert tool_messages(result) == {"k1": "from B (1)"}
    assert tool_attempts(events) == [2]
    assert_no_task_failures(events)
    await assert_replays(handle)


# --------------------------------------------------------------------------- a stored history still replays


async def test_fresh_approval_history_matches_stored_shape(dev, ids):
    """The stored replay history (tests/histories, the newest approval generation) has the same event types
    as a fresh run of its scenario, so a change of the command sequence is noticed here too, not only by
    the replayer."""
    sys.path.insert(0, str(ROOT / "tests" / "histories"))
    try:
        import make_histories
    finally:
        sys.path.pop(0)
    tq, wf_id = ids
    async with rein.create_worker(dev.client, agents=[make_histories.approval_agent()], task_queue=tq):
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": "history-agent", "prompt": "What is 1 + 2?"}, id=wf_id, task_queue=tq
        )
        await wait_status(handle, "waiting_approval")
        await handle.signal("approve", {"approver": "alice", "reason": "read-only"})
        await wait_status(handle, "waiting_input")
        await handle.signal("answer", {"text": "No rounding.", "approver": "alice"})
        result = await full_result(handle)
        fresh = list((await handle.fetch_history()).events)

    assert result["output"] == "The sum is 3."
    stored = json.loads((ROOT / "tests" / "histories" / make_histories.CURRENT).read_text())["events"]

    def commands(types: list[str]) -> list[str]:
        # Workflow-task bookkeeping varies with timing; the commands the workflow issues do not.
        keep = (
            "ACTIVITY_TASK_SCHEDULED", "MARKER_RECORDED", "SIGNALED", "EXECUTION_COMPLETED", "TIMER_STARTED",
            "UPSERT_WORKFLOW_SEARCH_ATTRIBUTES",
        )
        return [t for t in types if t.endswith(keep)]

    fresh_types = [EventType.Name(e.event_type) for e in fresh]
    stored_types = [e["eventType"] for e in stored]
    assert commands(fresh_types) == commands(stored_types)


async def test_a_client_with_a_worker_in_its_process_starts_runs_eagerly(dev):
    """ReinClient asks for eager workflow start, and the embedded server (rein.durable.embedded_server's tuning) grants
    it: with a worker for the queue in this process, the run's first workflow task comes back in the
    start response instead of a round trip through the task queue."""
    from rein.client import ReinClient

    agent = Agent(provider=MockProvider(["hi"]), name="eager-start")
    tq = f"eager-{os.getpid()}-{id(agent)}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await ReinClient(dev.client, tq).start(agent.name, "hello")
        # temporalio notes on the handle whether the start response carried the first workflow task.
        assert vars(handle)["__temporal_eagerly_started"] is True
        assert (await handle.result()).output == "hi"

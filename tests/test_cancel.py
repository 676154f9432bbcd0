"""`cancel` (the signal, or Temporal's own workflow cancellation) ends a run at once, even mid-activity."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory
from temporalio.common import SearchAttributeKey
from temporalio.worker import Replayer

import rein
from rein import Agent, LoopConfig, MockProvider, ToolCall
from rein.client import ReinClient
from rein.temporal import ReinPlugin
from rein.testing import full_result
from tests.support.history import assert_no_task_failures, scheduled
from tests.support.providers import StreamsItsCompletion
from tests.support.tools import add
from tests.support.waiting import poll, rein_status_is

HISTORIES = Path(__file__).parent / "histories"
REIN_STATUS = SearchAttributeKey.for_keyword("ReinStatus")

started = asyncio.Event()


async def slow_tool(x: int) -> str:
    """Takes a long time."""
    started.set()
    await asyncio.sleep(60)
    return "finished"


async def test_cancel_interrupts_a_running_tool(env):
    started.clear()
    agent = Agent(
        provider=MockProvider([[ToolCall(id="t1", name="slow_tool", arguments={"x": 1})], "never reached"]),
        tools=[slow_tool],
        name="slow",
    )
    tq = f"cancel-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "slow", "prompt": "go"}, id=f"cancel-{uuid.uuid4().hex[:8]}", task_queue=tq
        )
        await asyncio.wait_for(started.wait(), 10)
        await handle.signal("cancel", {"reason": "operator stopped it"})
        result = await full_result(handle)
        history = await handle.fetch_history()
    assert result["stop_reason"] == "cancelled"
    assert result["status"] == "done"
    # The in-flight tool call stays pending in the Session, and its activity got a cancel request.
    assert [c["id"] for c in result["session"]["pending_tool_calls"]] == ["t1"]
    types = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in types
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in types
    # It ended without waiting for the tool: one activity completed (the first model call), not two.
    assert types.count(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) == 1
    # It closed with Temporal's own status: it asked for its cancellation (a local activity, as a marker).
    assert types[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED in types


# --------------------------------------------------------------------------- Temporal's own cancellation


async def test_workflow_cancellation_interrupts_a_running_tool_like_the_signal(env):
    """`handle.cancel()` (UI, CLI) ends the run as cancelled, like the signal: it closes CANCELED,
    its result readable through rein's client."""
    started.clear()
    agent = Agent(
        provider=MockProvider([[ToolCall(id="t1", name="slow_tool", arguments={"x": 1})], "never reached"]),
        tools=[slow_tool],
        name="slow-native",
    )
    tq = f"cancel-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "slow-native", "prompt": "go"}, id=f"cancel-{uuid.uuid4().hex[:8]}",
            task_queue=tq,
        )
        await asyncio.wait_for(started.wait(), 10)
        await handle.cancel()
        result = await full_result(handle)
        status = await handle.query("status")
        history = await handle.fetch_history()
    assert result["stop_reason"] == "cancelled"
    assert status["status"] == "cancelled" and status["stop_reason"] == "cancelled"
    assert [c["id"] for c in result["session"]["pending_tool_calls"]] == ["t1"]
    types = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED in types
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in types
    assert types[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in types


@pytest.mark.parametrize("name", ["agent_cancel_v5", "agent_cancel_signal_v2"])
async def test_cancelled_histories_replay_and_close_canceled(name):
    """Cancelled the Temporal way (v5) and by the `cancel` signal (signal_v2, which asks for its own
    cancellation): both close CANCELED and replay. Older generations drain (tests/histories/drained)."""
    data = json.loads((HISTORIES / f"{name}.json").read_text())
    history = WorkflowHistory.from_json("agent-cancel", data)
    types = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED in types
    assert types[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
    replayer = Replayer(workflows=[], plugins=[ReinPlugin(agents=[])])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


# --------------------------------------------------------------------------- on a real dev server: visibility


class AddsOnce(StreamsItsCompletion, MockProvider):
    """Stateless, so one agent serves many runs: a tool call first, then the result as text."""

    def __init__(self) -> None:
        super().__init__([])

    async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        done = [m.content for m in messages if m.role == "tool"]
        self._responses, self._index = [done[-1] if done else [ToolCall(id="a1", name="add", arguments={"a": 1, "b": 2})]], 0
        return await super().complete(messages, tools, **kwargs)


def approval_agent(name: str) -> Agent:
    return Agent(provider=AddsOnce(), tools=[add], name=name, config=LoopConfig(permission="ask"))


async def test_cancelled_waiting_run_leaves_the_waiting_list(dev):
    tq = f"cancel-dev-{uuid.uuid4().hex[:6]}"
    ops = ReinClient(dev.client, task_queue=tq)
    async with rein.create_worker(dev.client, agents=[approval_agent("cancel-dev")], task_queue=tq):
        cancelled = await ops.start("cancel-dev", "1+2?")
        terminated = await ops.start("cancel-dev", "1+2?")
        for handle in (cancelled, terminated):
            await poll(lambda h=handle: rein_status_is(ops, h.id, "waiting_approval"), "waiting")

        async def both_listed() -> bool:
            return {cancelled.id, terminated.id} <= set(await ops.waiting("waiting_approval"))

        await poll(both_listed, "listed as waiting")

        await cancelled.cancel()  # what the UI's "Request Cancellation" and `temporal workflow cancel` do
        result = await ops.result(cancelled.id)
        await terminated.terminate("gone")  # keeps its last ReinStatus, but is not running
        assert (await cancelled.describe()).status == WorkflowExecutionStatus.CANCELED

        assert result.stop_reason == "cancelled"
        assert (await ops.status(cancelled.id)).status == "cancelled"
        assert (await cancelled.describe()).typed_search_attributes.get(REIN_STATUS) == "cancelled"

        async def neither_listed() -> bool:
            return not {cancelled.id, terminated.id} & set(await ops.waiting("waiting_approval"))

        await poll(neither_listed, "dropped from the waiting list")
        assert cancelled.id in [wf.id async for wf in dev.client.list_workflows('ReinStatus="cancelled"')]
        # the terminated run still carries waiting_approval: only the ExecutionStatus filter drops it
        assert (await terminated.describe()).typed_search_attributes.get(REIN_STATUS) == "waiting_approval"


# --------------------------------------------------------------------------- a model call in flight


class BlockingModel:
    """A model that answers only when released; it records that it was called and whether its
    call was cancelled (the activity's cancellation reaches it as CancelledError)."""

    def __init__(self) -> None:
        self.called = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        self.called.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return rein.Completion(message=rein.Message(role="assistant", content="answered anyway"), finish_reason="stop")


async def unchanged(ctx, call_next):  # noqa: ANN001, ANN201
    """A middleware that changes nothing: the model call then runs as a middleware step activity."""
    return await call_next(ctx)


@pytest.mark.parametrize("how", ["signal", "workflow-cancel", "signal-middleware"])
async def test_cancel_interrupts_a_model_call_in_flight(env, how):
    """The run ends `cancelled` while its model call is still running (never released), and the
    model activity itself is cancelled: a cancel request in history, and the provider saw it."""
    model = BlockingModel()
    # A heartbeat timeout of 2 s: the call beats every 0.5 s (not every 5 s), and its cancellation
    # comes back on the next beat.
    agent = Agent(provider=model, name=f"thinking-{how}", config=LoopConfig(heartbeat_timeout_s=2))
    if how.endswith("middleware"):
        agent.middleware(unchanged)
    tq = f"cancel-{uuid.uuid4().hex[:6]}"
    # Heartbeats go to the server at once (not throttled), so the cancellation comes back on the next one.
    fast = timedelta(milliseconds=100)
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq, max_heartbeat_throttle_interval=fast,
                                  default_heartbeat_throttle_interval=fast):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "go"}, id=f"cancel-{uuid.uuid4().hex[:8]}", task_queue=tq
        )
        await asyncio.wait_for(model.called.wait(), 30)
        if how.startswith("signal"):
            await handle.signal("cancel", {"reason": "operator stopped it"})
        else:
            await handle.cancel()
        try:
            # Never released: without cancellation reaching the model call the run would hang here.
            result = await asyncio.wait_for(full_result(handle), 30)
            # The activity learns of its cancellation on its next heartbeat.
            await asyncio.wait_for(model.cancelled.wait(), 30)
        finally:
            model.release.set()
        history = await handle.fetch_history()
    assert result["stop_reason"] == "cancelled"
    assert result["output"] is None and result["steps"] == []
    assert_no_task_failures(history)
    # A heartbeat timeout of the agent's own: the lean first call described the agent only, the run made the call.
    described, model_call = scheduled(history.events, "rein.call_model")
    cancel_requests = [e.activity_task_cancel_requested_event_attributes.scheduled_event_id for e in history.events
                       if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED]
    completions = [e.activity_task_completed_event_attributes.scheduled_event_id for e in history.events
                   if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    assert cancel_requests == [model_call.event_id]
    assert model_call.event_id not in completions and described.event_id in completions

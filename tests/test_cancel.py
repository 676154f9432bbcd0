"""`cancel` ends a run at once, even while a model call or tool is in flight."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.enums.v1 import EventType

import rein
from rein import Agent, MockProvider, ToolCall
from rein.testing import full_result, start_time_skipping

started = asyncio.Event()


async def slow_tool(x: int) -> str:
    """Takes a long time."""
    started.set()
    await asyncio.sleep(60)
    return "finished"


@pytest.fixture(scope="module")
async def env():
    async with await start_time_skipping() as env:
        yield env


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

"""`ToolContext.heartbeat()` in a durable run reaches Temporal, from a sync tool (worker thread)
and from an async tool alike: the engine shows each tool's own heartbeat details while it runs.

Nothing is injected: the worker builds the ToolContext exactly as in production, and the test
reads the heartbeat back from the server (`describe()` → pending activities, decoded).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from datetime import timedelta

import pytest

import rein
from rein import Agent, MockProvider, ToolCall, ToolContext
from rein.testing import full_result
from tests.support.history import history_events, scheduled, tool_attempts

SYNC_RELEASE = threading.Event()
PASTED_KEY = "sk-proj-" + "Q" * 30
"""A credential a careless tool puts in its progress details: heartbeat details reach the server."""
ASYNC_RELEASE: dict[str, asyncio.Event] = {}


def sync_progress(ctx: ToolContext) -> str:
    """A sync tool (it runs in a worker thread) that reports progress, then waits to be released."""
    ctx.heartbeat("sync at 50%", f"using {PASTED_KEY}")
    if not SYNC_RELEASE.wait(60):
        return "sync never released"
    return "sync done"


async def async_progress(ctx: ToolContext) -> str:
    """An async tool that reports progress, then waits to be released."""
    ctx.heartbeat("async at 50%")
    try:
        await asyncio.wait_for(ASYNC_RELEASE["event"].wait(), 60)
    except TimeoutError:
        return "async never released"
    return "async done"


async def heartbeat_details(handle, converter) -> dict[str, list]:  # noqa: ANN001
    """Each pending activity's last heartbeat details as the server holds them, decoded, by tool call."""
    description = await handle.describe()
    out = {}
    for pending in description.raw_description.pending_activities:
        if pending.heartbeat_details.payloads:
            out[pending.activity_id] = await converter.decode(pending.heartbeat_details.payloads)
    return out


@contextlib.asynccontextmanager
async def unthrottled_run(client, agent):  # noqa: ANN001, ANN201
    """A worker that passes every heartbeat straight to the server (no throttling, so the details are
    there while the tools wait), and a started run of `agent` on it."""
    tq = f"heartbeat-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(client, agents=[agent], task_queue=tq,
                                  max_heartbeat_throttle_interval=timedelta(milliseconds=50),
                                  default_heartbeat_throttle_interval=timedelta(milliseconds=50)):
        yield await client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "go"}, id=f"heartbeat-{uuid.uuid4().hex[:8]}",
            task_queue=tq,
        )


BOTH = [("async at 50%",), ("sync at 50%", "using [redacted]")]


async def unchanged(ctx, call_next):  # noqa: ANN001, ANN201
    """A middleware that changes nothing: tools then run inside a middleware step activity."""
    return await call_next(ctx)


@pytest.mark.parametrize("middleware", [False, True], ids=["plain", "middleware"])
async def test_sync_and_async_tools_heartbeat_through_to_temporal(dev, middleware):
    """On a real dev server: it keeps each pending activity's heartbeat details for `describe()`."""
    env = dev
    SYNC_RELEASE.clear()
    ASYNC_RELEASE["event"] = asyncio.Event()
    batch = [ToolCall(id="s1", name="sync_progress", arguments={}),
             ToolCall(id="a1", name="async_progress", arguments={})]
    agent = Agent(provider=MockProvider([batch, "both reported"]), tools=[sync_progress, async_progress],
                  name=f"heartbeats-{middleware}")
    if middleware:
        agent.middleware(unchanged)
    async with unthrottled_run(env.client, agent) as handle:
        try:
            details: dict[str, list] = {}
            for _ in range(400):  # both tools are running, each waiting to be released
                details = await heartbeat_details(handle, env.client.data_converter)
                reported = sorted(map(tuple, details.values()))
                # Each tool activity shows its tool's details; a middleware step runs both tools in one
                # activity, which shows the details reported last.
                if (reported == BOTH) if not middleware else (len(reported) == 1 and reported[0] in BOTH):
                    break
                await asyncio.sleep(0.05)
            else:
                pending = (await handle.describe()).raw_description.pending_activities
                raise AssertionError(f"the tools' heartbeats never reached the server: {details}; pending: {pending}")
        finally:
            SYNC_RELEASE.set()
            ASYNC_RELEASE["event"].set()
        result = await full_result(handle)

    assert PASTED_KEY not in str(details)  # scrubbed before it left the worker
    assert result["output"] == "both reported"
    contents = {m["tool_call_id"]: m["content"] for m in result["session"]["messages"] if m["role"] == "tool"}
    assert contents == {"s1": "sync done", "a1": "async done"}


@rein.tool(local=True)
def local_progress(ctx: ToolContext) -> str:
    """A local-activity tool: its heartbeat has no server to go to, and must not fail the tool."""
    ctx.heartbeat("local at 50%")
    return "local done"


async def test_a_local_tool_may_heartbeat(env):
    agent = Agent(provider=MockProvider([[ToolCall(id="l1", name="local_progress", arguments={})], "fine"]),
                  tools=[local_progress], name="local-heartbeats")
    tq = f"heartbeat-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "go"}, id=f"heartbeat-{uuid.uuid4().hex[:8]}",
            task_queue=tq,
        )
        result = await full_result(handle)
    contents = {m["tool_call_id"]: m["content"] for m in result["session"]["messages"] if m["role"] == "tool"}
    assert contents == {"l1": "local done"} and result["output"] == "fine"


QUIET_RELEASE: dict[str, asyncio.Event] = {}


async def reports_once(ctx: ToolContext) -> str:
    """Reports progress once, then works quietly: the worker's own beats must keep the details."""
    ctx.heartbeat("quiet at 10%")
    await asyncio.wait_for(QUIET_RELEASE["event"].wait(), 60)
    return "quiet done"


async def test_the_worker_keeps_beating_with_the_tools_latest_details(dev, monkeypatch):
    """Between a tool's own heartbeats the worker beats for it (so a long call outlives its heartbeat
    timeout), repeating the tool's latest details: the server's last heartbeat time moves on while
    the details stay the tool's."""
    monkeypatch.setattr("rein.activities.calls.HEARTBEAT_EVERY_S", 0.2)
    QUIET_RELEASE["event"] = asyncio.Event()
    agent = Agent(provider=MockProvider([[ToolCall(id="q1", name="reports_once", arguments={})], "ok"]),
                  tools=[reports_once], name="quiet-heartbeats")
    async with unthrottled_run(dev.client, agent) as handle:
        beats: list[tuple[float, list]] = []
        try:
            for _ in range(400):
                for pending in (await handle.describe()).raw_description.pending_activities:
                    if pending.heartbeat_details.payloads:
                        at = pending.last_heartbeat_time.ToNanoseconds()
                        if not beats or beats[-1][0] != at:
                            beats.append((at, await dev.client.data_converter.decode(pending.heartbeat_details.payloads)))
                if len(beats) >= 4:
                    break
                await asyncio.sleep(0.05)
        finally:
            QUIET_RELEASE["event"].set()
        result = await full_result(handle)
    assert len(beats) >= 4, f"the worker stopped beating: {beats}"
    assert all(details == ["quiet at 10%"] for _, details in beats), beats
    assert result["output"] == "ok"



async def quiet_for_a_while(ctx: ToolContext) -> str:
    """Works for 2.5 s without a heartbeat of its own: longer than its run's heartbeat timeout."""
    await asyncio.sleep(2.5)
    return "quiet done"


@rein.tool(timeout_s=0.5)
async def quick() -> str:
    """A tool whose own timeout is shorter than the run's heartbeat timeout."""
    return "quick done"


async def test_a_shorter_heartbeat_timeout_is_what_calls_are_scheduled_with_and_beaten_within(dev):
    """`LoopConfig.heartbeat_timeout_s` is the model and tool calls' heartbeat timeout (a tool's own
    shorter `timeout_s` caps it), and the worker beats often enough: a call longer than it is not retried."""
    agent = Agent(provider=MockProvider([[ToolCall(id="q1", name="quiet_for_a_while", arguments={})],
                                         [ToolCall(id="k1", name="quick", arguments={})], "ok"]),
                  tools=[quiet_for_a_while, quick], name="short-heartbeats", config=rein.LoopConfig(heartbeat_timeout_s=1))
    tq = f"heartbeat-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "go"}, id=f"heartbeat-{uuid.uuid4().hex[:8]}",
            task_queue=tq)
        result = await full_result(handle)
    assert result["output"] == "ok"
    events = await history_events(handle)
    timeouts = [(a.activity_type.name, a.heartbeat_timeout.ToTimedelta())
                for a in (e.activity_task_scheduled_event_attributes for e in scheduled(events))
                if a.activity_type.name in ("rein.call_model", "rein.run_tool")]
    second, half = timedelta(seconds=1), timedelta(seconds=0.5)
    # The lean first call is scheduled with LoopConfig's default before the run knows its agent: its worker
    # described the agent only (the heartbeat timeout is its own), and every call after has the agent's.
    default = timedelta(seconds=rein.LoopConfig().heartbeat_timeout_s)
    assert timeouts == [("rein.call_model", default), ("rein.call_model", second), ("rein.run_tool", second),
                        ("rein.call_model", second), ("rein.run_tool", half), ("rein.call_model", second)], timeouts
    assert tool_attempts(events) == [1, 1]  # 2.5 s past a 1 s heartbeat timeout: the worker's beats kept it

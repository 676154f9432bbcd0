"""`Step.duration_s` and `RunResult.elapsed_s` hold real values, on every driver.

Durations are checked for plausibility against sleeps the model and the tool really perform
(a lower bound: a step takes at least as long as the sleep inside it), and the run's active time
against the test server's controlled clock (two skipped days of waiting are not active time).
No wall-clock upper bound anywhere.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest

import rein
from rein import Agent, LoopConfig, MockProvider, RunResult
from rein.testing import full_result
from tests.support.runs import start
from tests.support.tools import tc
from tests.support.waiting import wait_status

MODEL_SLEEP_S = 0.2
TOOL_SLEEP_S = 0.3
CLOCK_RESOLUTION_S = 0.002
"""A durable run's elapsed time comes from workflow time, which the time-skipping server keeps in whole
milliseconds (one run measured 0.760 s around steps the worker timed at 0.7602 s); steps are timed on the
worker's own clock. Two readings of the coarser clock: up to 2 ms apart."""


class SlowModel(MockProvider):
    """The scripted model, thinking for MODEL_SLEEP_S before each answer."""

    async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        await asyncio.sleep(MODEL_SLEEP_S)
        return await super().complete(messages, tools, **kwargs)


async def nap(seconds: float) -> str:
    """Sleeps, then says so."""
    await asyncio.sleep(seconds)
    return "rested"


async def passthrough(ctx, call_next):  # noqa: ANN001, ANN201
    """A middleware that changes nothing: steps then run inside the worker's activity."""
    return await call_next(ctx)


def agent(name: str, middleware: bool = False, engine: str | None = None, **config: Any) -> Agent:
    made = Agent(provider=SlowModel([[tc("nap", "n1", seconds=TOOL_SLEEP_S)], "awake"]), tools=[nap], name=name,
                 config=LoopConfig(**config), engine=engine)
    if middleware:
        made.middleware(passthrough)
    return made


def check_plausible(steps: list[dict], elapsed_s: float) -> None:
    assert [s["kind"] for s in steps] == ["model", "tool", "model"]
    model_1, tool, model_2 = (s["duration_s"] for s in steps)
    assert model_1 >= MODEL_SLEEP_S and model_2 >= MODEL_SLEEP_S, steps
    assert tool >= TOOL_SLEEP_S, steps
    assert elapsed_s >= model_1 + tool + model_2 - CLOCK_RESOLUTION_S, (elapsed_s, steps)


@pytest.mark.parametrize("middleware", [False, True], ids=["plain", "middleware"])
async def test_durations_in_process(middleware):
    result: RunResult = await agent("timed-local", middleware, engine="local").arun("rest")
    assert result.output == "awake"
    check_plausible([s.model_dump() for s in result.steps], result.elapsed_s)


@pytest.mark.parametrize("middleware", [False, True], ids=["plain", "middleware"])
async def test_durations_in_a_durable_run(env, middleware):
    name = f"timed-{uuid.uuid4().hex[:6]}"
    tq = f"tq-{name}"
    async with rein.create_worker(env.client, agents=[agent(name, middleware)], task_queue=tq):
        handle = await start(env, name, "rest", f"wf-{name}", tq)
        result = await full_result(handle)
    assert result["output"] == "awake"
    check_plausible(result["steps"], result["elapsed_s"])


async def test_waiting_two_skipped_days_is_not_active_time(env):
    """On the test server's clock: the run spans more than two days, its active time is that span
    minus the two days it waited for approval (and still at least what its steps took)."""
    name = f"timed-wait-{uuid.uuid4().hex[:6]}"
    tq = f"tq-{name}"
    async with rein.create_worker(env.client, agents=[agent(name, permission="ask")], task_queue=tq):
        began = await env.get_current_time()
        handle = await start(env, name, "rest", f"wf-{name}", tq)
        await wait_status(handle, "waiting_approval")
        await env.sleep(timedelta(days=2))
        await handle.signal("approve", {"approver": "late"})
        result = await full_result(handle)
        span = (await env.get_current_time() - began).total_seconds()
    assert span >= timedelta(days=2).total_seconds()
    check_plausible(result["steps"], result["elapsed_s"])
    assert result["elapsed_s"] <= span - timedelta(days=2).total_seconds(), (result["elapsed_s"], span)

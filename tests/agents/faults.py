"""Agents served by `python worker.py` subprocesses in the fault and encryption tests.

    python worker.py --agent tests.agents.faults:effects --agent tests.agents.faults:leaky

Side effects are appended as lines to files under $FAULTS_DIR (one file per run), so the
test process can count how many times a tool really ran across worker kills and restarts.
A tool can be held at a point by the test: it waits while `$FAULTS_DIR/<run>.hold` exists.
The model records each call in `$FAULTS_DIR/<prompt>.model` and waits while
`$FAULTS_DIR/<prompt>.model-hold` exists (tests use the run id as the prompt).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from rein import Agent, Completion, LoopConfig, Message, ToolContext, tool
from tests.support.providers import CallThenReport


def _dir() -> Path:
    return Path(os.environ["FAULTS_DIR"])


def run_of(ctx: ToolContext) -> str:
    return ctx.idempotency_key.split("/", 1)[0]


@tool(retries=0, timeout_s=8)
async def charge(amount: int, ctx: ToolContext) -> str:
    """Charge a card (here: append one line per real execution, then maybe wait to be released)."""
    run = run_of(ctx)
    with open(_dir() / f"{run}.effects", "a") as out:
        out.write(f"{ctx.idempotency_key} attempt={ctx.attempt}\n")
    hold = _dir() / f"{run}.hold"
    while hold.exists():
        ctx.heartbeat("held")
        await asyncio.sleep(0.1)
    return f"charged {amount}"


def leak(ctx: ToolContext) -> str:
    """Returns text full of credentials, as careless tools do."""
    return (
        f"TOOL-MARKER-{run_of(ctx)} db={os.environ.get('DATABASE_URL')} "
        f"env-key={os.environ.get('FAULTS_API_KEY')} pasted=sk-proj-{'Q' * 30} "
        "header=Authorization: Bearer abcdefghijklmnopqrstuvwx "
        "aws=AKIAIOSFODNN7EXAMPLE"
    )


class WatchedModel(CallThenReport):
    """Calls the tool once, then reports its result; each call is counted in `$FAULTS_DIR/<prompt>.model`
    and waits while `$FAULTS_DIR/<prompt>.model-hold` exists."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        if "FAULTS_DIR" in os.environ:
            prompt = next(m.content for m in messages if m.role == "user")
            with open(_dir() / f"{prompt}.model", "a") as out:
                out.write("call\n")
            while (_dir() / f"{prompt}.model-hold").exists():
                await asyncio.sleep(0.1)
        return await super().complete(messages, tools, **kwargs)


effects = Agent(provider=WatchedModel("charge", {"amount": 5}), tools=[charge], name="effects",
                config=LoopConfig(heartbeat_timeout_s=2))
"""Its tests kill workers mid-call: a lost model or tool call moves to a new worker after 2 s, not 20.
Not much lower: the worker sends beats at most every 0.8 x the timeout, so a live call keeps 0.4 s to spare."""
approved_effects = Agent(
    provider=WatchedModel("charge", {"amount": 7}), tools=[charge], name="approved-effects",
    config=LoopConfig(permission="ask"),
)
leaky = Agent(provider=WatchedModel("leak", {}), tools=[leak], name="leaky")

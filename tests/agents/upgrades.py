"""Agents for in-place upgrades from earlier builds (tests/test_upgrades.py, tests/support/build_scenarios.py).

Served by `python worker.py` processes of every build in the support window, so they import only names
each build's `rein` exports at its top level. Each run's prompt is `<run id> <amount>`; the model asks
for `pay(amount)` and answers `Paid <amount> on <build>`; every real execution of the tool appends
`<build> <idempotency key>` to `$DEPLOY_DIR/<run id>.effects`.

`upgrade-held` holds its final model call (after the tool ran) until `$DEPLOY_DIR/<run id>.release`
exists, having written `<run id>.held`: a run in the middle of a model call when its worker stops.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from rein import Agent, LoopConfig, ToolContext
from tests.support.providers import CallThenReport

BUILD = os.environ.get("DEPLOY_BUILD", "unversioned")


def _dir() -> Path:
    return Path(os.environ["DEPLOY_DIR"])


def pay(amount: int, ctx: ToolContext) -> str:
    """Pay an amount (here: one line per real execution)."""
    run = ctx.idempotency_key.split("/", 1)[0]
    with open(_dir() / f"{run}.effects", "a") as out:
        out.write(f"{BUILD} {ctx.idempotency_key}\n")
    return f"{amount} on {BUILD}"


def _amount(prompt: str) -> dict[str, Any]:
    return {"amount": int(prompt.split()[1])}


class HeldReport(CallThenReport):
    """CallThenReport whose final call waits for the test's `<run id>.release` file."""

    async def complete(self, messages: Any, tools: Any = None, **kwargs: Any) -> Any:
        if any(m.role == "tool" for m in messages):
            run = next(m.content for m in messages if m.role == "user").split()[0]
            (_dir() / f"{run}.held").touch()
            while not (_dir() / f"{run}.release").exists():
                await asyncio.sleep(0.05)
        return await super().complete(messages, tools, **kwargs)


pay_ask = Agent(provider=CallThenReport("pay", _amount, report="Paid {}"), tools=[pay], name="upgrade-ask",
                config=LoopConfig(permission="ask"))
pay_held = Agent(provider=HeldReport("pay", _amount, report="Paid {}"), tools=[pay], name="upgrade-held")

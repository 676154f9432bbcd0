"""Agents for the deploy tests, served by `python worker.py` processes that play successive builds.

    DEPLOY_DIR=/tmp/x python worker.py --agent tests.agents.deploys:pay --agent tests.agents.deploys:pay_ask

Each run's prompt is `<run id> <amount>`; the model asks for `pay(amount)` and answers
`Paid <amount> on <build>`, so a wrong answer names the run's mix-up. Every real execution of
the tool appends `<build> <idempotency key>` to `$DEPLOY_DIR/<run id>.effects`.

`DEPLOY_BUG=KIND` plays a build with a bug in one part of rein, in this process only (rein.core.failures):
- `machine`: workflow-side, `rein.core.machine.next_action` raises once the run has a tool result (after the tool ran);
- `decide`: workflow-side, `rein.core.machine.decide` raises (applying an approval);
- `model`: the model activity's own code raises before the vendor is called (every model call);
- `model-answer`: the same inside the code that calls the provider (it picks the provider);
- `tool`: the tool activity's own code raises before the tool runs;
- `tool-after`: the tool activity's own code raises after the tool ran.

`DEPLOY_NEW_PATCH=1` plays a build with a new workflow change behind a patch, which the previous build
cannot replay: each wait for a person first asks `workflow.patched(NEW_PATCH)` (a marker in the history).
Every process of this build that imports this module (`DEPLOY_BUILD` is not `old`) replays such a marker.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from temporalio import workflow

import rein.core.machine as machine
from rein import Agent, LoopConfig, ToolContext, tool
from tests.support.providers import CallThenReport

BUILD = os.environ.get("REIN_BUILD_ID") or os.environ.get("DEPLOY_BUILD", "unversioned")


@tool(retries=0, timeout_s=30)
def pay(amount: int, ctx: ToolContext) -> str:
    """Pay an amount (here: one line per real execution)."""
    run = ctx.idempotency_key.split("/", 1)[0]
    with open(Path(os.environ["DEPLOY_DIR"]) / f"{run}.effects", "a") as out:
        out.write(f"{BUILD} {ctx.idempotency_key}\n")
    return f"{amount} on {BUILD}"


def _amount(prompt: str) -> dict[str, Any]:
    return {"amount": int(prompt.split()[1])}


def _install_bug(kind: str) -> None:
    """The deployed bug of `kind` (see the module's docstring)."""
    if kind == "machine":
        original = machine.next_action

        def next_action(session: Any, *args: Any, **kwargs: Any) -> Any:
            if any(m.role == "tool" for m in session.messages):
                raise RuntimeError("deployed bug: next_action cannot read tool results")
            return original(session, *args, **kwargs)

        machine.next_action = next_action  # type: ignore[assignment]
    elif kind == "decide":
        def decide(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("deployed bug: decide")

        machine.decide = decide  # type: ignore[assignment]
    elif kind == "model":
        from rein.activities.agents import Conversations

        async def messages_for(self: Any, request: Any) -> Any:
            raise RuntimeError("deployed bug: the model activity cannot read the conversation")

        Conversations.messages_for = messages_for  # type: ignore[method-assign]
    elif kind == "model-answer":
        import rein.activities.answers as answers

        def provider_for(*args: Any) -> Any:
            raise RuntimeError("deployed bug: the model activity cannot pick the provider")

        answers.provider_for = provider_for  # type: ignore[assignment]
    elif kind == "tool":
        import rein.activities.agents as activities

        async def run_call(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("deployed bug: the tool activity cannot find the call")

        activities.run_call = run_call  # type: ignore[assignment]
    elif kind == "tool-after":
        from rein.activities.agents import AgentActivities

        check_size = AgentActivities._check_size

        def _check_size(self: Any, result: Any, what: str) -> None:
            if what.startswith("The result of tool"):
                raise RuntimeError("deployed bug: the tool activity cannot measure the result")
            check_size(self, result, what)

        AgentActivities._check_size = _check_size  # type: ignore[method-assign]
    else:
        raise ValueError(f"unknown DEPLOY_BUG {kind!r}")


NEW_PATCH = "deploy-test-new-change"


def _install_new_patch() -> None:
    """This build's change behind a patch: asked live with DEPLOY_NEW_PATCH=1, and on replay (which finds
    the marker or not) in any of this build's processes, so each replays what the others recorded."""
    from rein.workflows.waiting import Waiting

    # This build's Waiting is a collaborator (`wait_for_human`); an older build's worker imports this module
    # too, with its own Waiting mixin (`_wait_for_human`).
    name = "wait_for_human" if hasattr(Waiting, "wait_for_human") else "_wait_for_human"
    original = getattr(Waiting, name)

    async def wait_for_human(self: Any, *args: Any, **kwargs: Any) -> None:
        if os.environ.get("DEPLOY_NEW_PATCH") or workflow.unsafe.is_replaying():
            workflow.patched(NEW_PATCH)
        await original(self, *args, **kwargs)

    setattr(Waiting, name, wait_for_human)


if os.environ.get("DEPLOY_BUG"):
    _install_bug(os.environ["DEPLOY_BUG"])
if os.environ.get("DEPLOY_BUILD") != "old":
    _install_new_patch()

# Calls lost to a stopping worker move after 2 s, not 20 (both builds read heartbeat_timeout_s).
pay_agent = Agent(provider=CallThenReport("pay", _amount, report="Paid {}"), tools=[pay], name="deploy-pay",
                  config=LoopConfig(heartbeat_timeout_s=2))
pay_ask = Agent(provider=CallThenReport("pay", _amount, report="Paid {}"), tools=[pay], name="deploy-pay-ask",
                config=LoopConfig(permission="ask", heartbeat_timeout_s=2))

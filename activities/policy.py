"""The worker's side of rules and notices: `rein.policy_check` (the rules' verdicts on a run's calls, before it
waits), `rein.rules_changed` (the policy workflow telling the waiting runs a rule was added) and
`rein.notify_waiting` (the webhook that tells people a run waits)."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from rein.activities.webhook import deliver
from rein.core.contract import NOTIFY_WAITING, WORKFLOW_TYPE, WaitingNotice
from rein.core.policy import (
    POLICY_CHECK,
    RULES_CHANGED,
    RULES_SIGNAL,
    PolicyCheck,
    RulesChanged,
    Target,
    Verdict,
    verdict,
)
from rein.durable.policy_store import read_rules

TELL_AT_ONCE = 16
"""Waiting runs signalled at the same time."""


@activity.defn(name=POLICY_CHECK)
async def policy_check(check: PolicyCheck) -> list[Verdict]:
    """Each call's verdict under the rules as they are now (the run applies what its agent lets a rule decide)."""
    state = await read_rules(activity.client())
    out = []
    for call in check.calls:
        target = Target(tool=str(call.get("name", "")), args=call.get("arguments") or {}, agent=check.agent,
                        tenant=check.tenant, run=check.run)
        out.append(verdict(state.rules, target).model_copy(update={"call_id": str(call.get("id", "")),
                                                                    "version": state.version}))
    return out


@activity.defn(name=RULES_CHANGED)
async def rules_changed(change: RulesChanged) -> int:
    """Tell each run that waits for approval and that the added rule may decide (its agent, tenant, run) that the
    rules changed: the run asks them again itself (rein.workflows.inbox). Twice: at once, and again
    `rules_recheck_s` later (REIN_RULES_RECHECK_S) for a run whose wait visibility showed late. Returns how many
    signals went out; a failure is retried by Temporal (a run told twice asks once: it knows the version)."""
    from rein import settings

    told = await _tell(change)
    await asyncio.sleep(settings.current().rules_recheck_s)
    return told + await _tell(change)


async def _tell(change: RulesChanged) -> int:
    client = activity.client()
    query = f'WorkflowType="{WORKFLOW_TYPE}" AND ExecutionStatus="Running" AND ReinStatus="waiting_approval"'
    for key, value in (("ReinAgent", change.agent), ("ReinTenant", change.tenant), ("WorkflowId", change.run)):
        if value is not None:
            query += f' AND {key}="{_quoted(value)}"'
    ids = [w.id async for w in client.list_workflows(query)]
    gate = asyncio.Semaphore(TELL_AT_ONCE)

    async def one(run_id: str) -> bool:
        async with gate:
            activity.heartbeat(run_id)
            try:
                await client.get_workflow_handle(run_id).signal(RULES_SIGNAL, {"version": change.version})
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:  # ended meanwhile: nothing to tell
                    raise
                return False
            return True

    return sum(await asyncio.gather(*(one(i) for i in ids)))


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


@activity.defn(name=NOTIFY_WAITING)
async def notify_waiting(notice: WaitingNotice) -> str:
    """Deliver the notice to the webhook for the run's agent and tenant; an error is retried by Temporal."""
    return await deliver(notice)


def definitions() -> list[Any]:
    return [policy_check, rules_changed, notify_waiting]

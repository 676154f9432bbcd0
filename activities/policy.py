"""The worker's side of rules and notices: `rein.policy_check` (the rules' verdicts on a run's calls, before it
waits) and `rein.notify_waiting` (the webhook that tells people a run waits)."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from rein.activities.webhook import deliver
from rein.core.contract import NOTIFY_WAITING, WaitingNotice
from rein.core.policy import POLICY_CHECK, PolicyCheck, Target, Verdict, verdict
from rein.durable.policy_store import read_rules


@activity.defn(name=POLICY_CHECK)
async def policy_check(check: PolicyCheck) -> list[Verdict]:
    """Each call's verdict under the rules as they are now (the run applies what its agent lets a rule decide)."""
    state = await read_rules(activity.client())
    out = []
    for call in check.calls:
        target = Target(tool=str(call.get("name", "")), args=call.get("arguments") or {}, agent=check.agent,
                        tenant=check.tenant, run=check.run)
        out.append(verdict(state.rules, target).model_copy(update={"call_id": str(call.get("id", ""))}))
    return out


@activity.defn(name=NOTIFY_WAITING)
async def notify_waiting(notice: WaitingNotice) -> str:
    """Deliver the notice to the webhook for the run's agent and tenant; an error is retried by Temporal."""
    return await deliver(notice)


def definitions() -> list[Any]:
    return [policy_check, notify_waiting]

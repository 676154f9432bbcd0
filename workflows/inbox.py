"""The run's side of the approvals inbox: before it waits for approval it asks the rules (which may decide the
calls at once); while it waits it shows what it waits for in its memo (one visibility query lists every wait)
and has a webhook tell people, from an activity that retries and never holds up the wait.

All behind the rein-inbox patch, asked as a wait begins (runs that never wait record no marker).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from rein.core import machine, threads
    from rein.core.contract import NOTIFY_WAITING, WaitingNotice
    from rein.core.inbox import WAITING_MEMO, waiting_memo
    from rein.core.policy import POLICY_CHECK, RULES_SIGNAL, PolicyCheck, Verdict, effective
    from rein.core.result import Interrupt

from rein.workflows.patches import PATCH_INBOX

if TYPE_CHECKING:
    from rein.workflows.state import RunState

POLICY_TIMEOUT = timedelta(seconds=10)
NOTIFY_TIMEOUT = timedelta(seconds=30)
NOTIFY_MAX_INTERVAL_S = 300.0


class Inbox:
    """Rules before a wait, the waiting memo, the webhook: a collaborator of the loop, on its state."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.notice: Any = None
        """The webhook's activity while the wait it tells of lasts (cancelled when the wait ends first)."""
        self.checked = 0
        """The rules' version this run's last check read (0: none yet in this run)."""
        self.told = 0
        """The newest rules' version the policy workflow told this run of (RULES_SIGNAL)."""

    def take_news(self, args: Any) -> None:
        """RULES_SIGNAL: the rules changed. A run waiting for approval asks them again (`due`), itself."""
        version = args[0].get("version") if len(args) == 1 and isinstance(args[0], dict) else None
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            self.run.ignore(RULES_SIGNAL, 'expected {"version": N}')
            return
        self.told = max(self.told, version)

    def due(self, interrupt: Interrupt) -> bool:
        """Told of rules newer than the last check, while waiting for approval."""
        return interrupt.type == "need_approval" and self.told > self.checked

    async def recheck(self) -> bool:
        """Ask the rules again during an approval wait (told they changed); True when they decided a call (the wait
        is over: the run goes on, or waits again for what is left)."""
        before = len(self.run.session.decisions)
        self.checked = self.told
        if self.on():
            await self.rules_decide()
        return len(self.run.session.decisions) > before

    @staticmethod
    def on() -> bool:
        return workflow.patched(PATCH_INBOX)

    async def rules_decide(self) -> bool:
        """Ask the rules about the calls that would wait; apply what they allow or deny (a rule never loosens
        what the agent's definition asks for). True when no call is left for a person. Rules that cannot be
        read leave every call to a person."""
        run = self.run
        assert run.agent is not None
        decided = machine.decisions_for_pending(run.session)
        calls = [c for c in run.session.pending_tool_calls if c.name not in run.answered_outside() and c.id not in decided]
        if not calls:
            return False
        check = PolicyCheck(calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
                            agent=run.agent.name, tenant=workflow.info().priority.fairness_key or None,
                            run=workflow.info().workflow_id)
        try:  # an activity, not a local one: what follows it (patches, upserts) replays in the same order always
            verdicts = await workflow.execute_activity(
                POLICY_CHECK, check, result_type=list[Verdict], start_to_close_timeout=POLICY_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=3), summary=f"rules for {len(calls)} call(s)")
        except ActivityError as err:
            workflow.logger.warning("the rules could not be read; a person decides: %s", err)
            return False
        except asyncio.CancelledError:
            if not run.cancelled_natively():
                raise
            return False  # the wait sees the cancellation at once
        approvers = run.config.approvers if run.config is not None else None
        names = {c.id: c.name for c in calls}
        now = workflow.now().isoformat()
        meanwhile = machine.decisions_for_pending(run.session)  # a person decides during a wait's check
        for raw in verdicts:
            self.checked = max(self.checked, raw.version)
            if raw.call_id not in names or raw.call_id in meanwhile:
                continue
            v = effective(raw, always_asks=names[raw.call_id] in run.approval_tools, approvers=approvers)
            if v.effect in ("allow", "deny"):
                machine.decide(run.session, v.effect == "allow", v.call_id, approver=v.via, reason=v.reason or v.line,
                               input_tools=run.answered_outside(), via=v.via, at=now)
        left = machine.decisions_for_pending(run.session)
        return all(c.id in left for c in calls)

    def show(self, interrupt: Interrupt, since: datetime) -> None:
        """The waiting memo, and the webhook's activity when the worker has one configured."""
        run = self.run
        deadline = run.carry.wait_deadline
        until = datetime.fromtimestamp(deadline, UTC) if deadline is not None else None
        thread = run.carry.thread
        said = run.session.messages if thread is None else threads.turn_messages(run.session, thread)  # this turn's
        waiting = machine.waiting_on(run.session, interrupt.type, run.answered_outside())  # not the calls decided
        memo = waiting_memo(interrupt, waiting, said, run.answered_outside(), since, until, thread is not None)
        workflow.upsert_memo({WAITING_MEMO: memo})
        retry_s = run.agent.notify_retry_s if run.agent is not None else 0.0
        if retry_s > 0:
            info = workflow.info()
            notice = WaitingNotice(run_id=info.workflow_id, agent=run.agent.name if run.agent else "",
                                   tenant=info.priority.fairness_key or None, namespace=info.namespace, waiting=memo)
            self.notice = workflow.start_activity(
                NOTIFY_WAITING, notice, start_to_close_timeout=NOTIFY_TIMEOUT,
                retry_policy=RetryPolicy(initial_interval=timedelta(seconds=retry_s), backoff_coefficient=2.0,
                                         maximum_interval=timedelta(seconds=min(NOTIFY_MAX_INTERVAL_S, retry_s * 60))),
                summary=f"tell people: {memo['kind']} waits")
            self.notice.add_done_callback(_retrieved)

    def clear(self) -> None:
        """The wait ended: the memo goes, and a webhook not yet delivered is no longer news (cancelled)."""
        if WAITING_MEMO in workflow.memo():
            workflow.upsert_memo({WAITING_MEMO: None})
        notice, self.notice = self.notice, None
        if notice is not None and not notice.done():
            notice.cancel()


def _retrieved(task: Any) -> None:
    """Nobody awaits the webhook's activity: take its outcome so a failure is not reported as unretrieved."""
    if not task.cancelled():
        task.exception()

"""Decisions from people and ops tooling: approve, deny, answer, retry and cancel.

Each decision is one typed update with a validator: a decision that does not fit the run is refused
to the caller, with the reason. A decision names what it decides (the wait the sender saw, the calls): one for a
wait that is over, or a call the run no longer waits on, is refused in one line naming what it waits on now; and
it decides only the batch it was made for (call ids repeat across turns: `bind_batch`). A client's `rule` and
`via` say nothing (a rule's decision is the run's own check, rein.workflows.inbox).
While the run's agent-as-tool child waits, an approval or an answer is
the child's: the update passes it on and awaits the child's own update, so the caller hears it applied,
refused or failed. The signals of the same names are thin adapters for stock tools
(`temporal workflow signal`): they run the same validator (a misfit is recorded and ignored, since a
signal has nobody to answer) and the same handler; one for a waiting child is passed on as a signal,
and a child that cannot take it is recorded as ignored. A bug while applying a decision is not caught:
it fails the workflow task, the decision stays in history (a signal) or with the server (an update),
and a fixed build applies it (docs/deploys.md, "Failure policy").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from rein.core import machine
    from rein.core.contract import (
        ANSWER_UPDATE,
        APPROVE_UPDATE,
        DENY_UPDATE,
        PASS_DECISION,
        AnswerSignal,
        CancelSignal,
        DecisionSignal,
        PassDecisionInput,
        RetrySignal,
        ToolResults,
        ToolResultsTaken,
    )
    from rein.core.errors import validation_text
    from rein.core.waits import waiting_line

from rein.workflows.options import DESCRIBE_TIMEOUT
from rein.workflows.patches import PATCH_BOUND_DECISIONS, PATCH_CLIENT_PROVENANCE

SIGNALS = ("approve", "deny", "answer", "retry", "cancel")
P = TypeVar("P", bound=BaseModel)


class Misfit(ValueError):
    """A decision that does not fit the run's state or the expected shape (refused, never a bug)."""


if TYPE_CHECKING:
    from rein.workflows.state import RunState


class Decisions:
    """approve, deny, answer, retry and cancel: validated updates, and signals adapted to them."""

    def __init__(self, run: RunState) -> None:
        self.run = run

    # ---------------------------------------------------------------- the signal adapter

    def adapt(self, name: str, args: Sequence[Any], model: type[P], validate: Callable[[P], None],
               apply: Callable[[P], Any]) -> None:
        """A decision signal: the update's own validator and handler. A misfit is recorded and
        ignored; anything the handler raises fails the workflow task (a bug: the fixed build applies it)."""
        self.count(args)
        try:
            payload = self.from_client(self._payload(model, args))
            validate(payload)
        except (Misfit, ApplicationError) as misfit:
            self.run.ignore(name, misfit.message if isinstance(misfit, ApplicationError) else str(misfit))
            return
        apply(payload)

    def count(self, args: Sequence[Any]) -> None:
        """Signals and decision updates grow the history; a waiting run continues as new on many."""
        self.run.signals_in_run += 1
        try:
            self.run.signal_bytes_in_run += len(json.dumps(list(args), default=str))
        except (TypeError, ValueError):
            pass

    def _payload(self, model: type[P], args: Sequence[Any]) -> P:
        if len(args) > 1:
            raise Misfit(f"expected one JSON object, got {len(args)} arguments")
        payload = args[0] if args else None
        try:
            return model.model_validate({} if payload is None else payload)
        except (ValidationError, ValueError, TypeError) as exc:
            raise Misfit(f"malformed payload: {validation_text(exc, 'payload')}") from None

    # ---------------------------------------------------------------- what fits

    @staticmethod
    def from_sender(payload: P) -> P:
        """A decision as a new update's validator takes it: a client's `rule` and `via` say nothing (the run records
        "decided by a rule" only from its own rule check: rein.workflows.inbox)."""
        fields = {k: "" for k in ("rule", "via") if getattr(payload, k, "")}
        return payload.model_copy(update=fields) if fields else payload

    def from_client(self, payload: P) -> P:
        """`from_sender` where the run applies a decision (a handler): runs recorded before rein-client-provenance
        took `rule` and `via` as sent, and replay so."""
        if (getattr(payload, "rule", "") or getattr(payload, "via", "")) and workflow.patched(PATCH_CLIENT_PROVENANCE):
            return self.from_sender(payload)
        return payload

    def _check_approver(self, approver: str) -> None:
        allowed = self.run.config.approvers if self.run.config is not None else None
        if allowed is not None and approver not in allowed:
            raise Misfit(f"approver {approver[:80]!r} is not among this run's approvers")

    def _child_waits(self, status: str) -> str | None:
        """The workflow id of this run's agent-as-tool child when it waits with `status`."""
        run = self.run
        if run.child_wait is not None and run.child_wait[1].status == status:
            return run.child_wait[0]
        return None

    def _check_tenant(self, tenant: str | None) -> None:
        """A decision the sender scoped to a tenant (rein serve's sign-in) fits only a run of that tenant."""
        own = workflow.info().priority.fairness_key or None
        if tenant is not None and tenant != own:
            raise Misfit(f"the run is not of tenant {tenant[:80]!r}: a decision scoped to it cannot decide this run")

    def waits_on(self) -> str:
        """What the run waits on now, as a refusal names it: the wait id and each call, `tool(args) [id]`."""
        run = self.run
        interrupt = run.interrupt
        calls = machine.waiting_on(run.session, interrupt.type, run.answered_outside()) if interrupt is not None else []
        return waiting_line(interrupt, calls, run.status)

    def _check_wait(self, wait: str | None, status: str | None = None, what: str = "") -> None:
        """A decision that names a wait fits that wait only (the person saw something the run no longer waits on);
        with `status`, only a run in it (`what` says it in words)."""
        run = self.run
        current = run.interrupt.wait if run.interrupt is not None else None
        if wait is not None and wait != current:
            raise Misfit(f"stale: wait {wait[:80]} is over; the run now waits on {self.waits_on()}")
        if status is not None and run.status != status:
            raise Misfit(f"the run is {run.status}, not {what}")

    def check_decision(self, decision: DecisionSignal) -> None:
        """An approval or a denial fits the wait it names and exactly the calls it names, each one the run waits on;
        its approver must be among the agent's approvers, when it names them. Naming neither (a raw signal): one
        pending call (`tool_call_id`), or every undecided one."""
        run = self.run
        if self._child_waits("waiting_approval") is not None:
            return  # for the child run, which validates it as its own
        self._check_tenant(decision.tenant)
        self._check_wait(decision.wait, "waiting_approval", "waiting for approval")
        if not decision.rule:  # a rule's decision: runs recorded before rein-client-provenance only
            self._check_approver(decision.approver)
        pending = {c.id for c in run.session.pending_tool_calls if c.name not in run.answered_outside()}
        undecided = [c.id for c in machine.waiting_on(run.session, "need_approval", run.answered_outside())]
        if decision.tool_call_ids is not None:
            if not decision.tool_call_ids:
                raise Misfit("tool_call_ids is empty: name the calls to decide")
            missing = next((i for i in decision.tool_call_ids if i not in undecided), None)
            if missing is not None and missing not in pending:
                raise Misfit(f"no pending tool call with id {missing[:80]!r}; the run now waits on {self.waits_on()}")
            if missing is not None:
                raise Misfit(f"stale: call {missing[:80]} is decided already; the run now waits on {self.waits_on()}")
        if decision.tool_call_id is not None and decision.tool_call_id not in pending:
            raise Misfit(f"no pending tool call with id {decision.tool_call_id!r}; the run now waits on {self.waits_on()}")
        if decision.tool_call_id is None and decision.tool_call_ids is None and not undecided:
            raise Misfit("every pending tool call is already decided")

    def check_approval(self, decision: DecisionSignal) -> None:
        """An approval fits as a decision does. A decision naming a rule (runs recorded before
        rein-client-provenance) approved only where the agent let a rule approve (rein.core.policy.effective)."""
        self.check_decision(decision)
        run = self.run
        if not decision.rule or self._child_waits("waiting_approval") is not None:
            return
        decided = machine.decisions_for_pending(run.session)
        for call in run.session.pending_tool_calls:
            aimed = call.id == decision.tool_call_id if decision.tool_call_id is not None else call.id not in decided
            if not aimed or call.name in run.answered_outside():
                continue
            if call.name in run.approval_tools:
                raise Misfit(f"rule {decision.rule} cannot approve {call.name}: the agent asks a person for every call of it")
            if run.config is not None and run.config.approvers is not None:
                raise Misfit(f"rule {decision.rule} cannot approve {call.name}: only the run's named approvers may")

    def check_answer(self, answer: AnswerSignal) -> None:
        if self._child_waits("waiting_input") is not None:
            return
        self._check_tenant(answer.tenant)
        self._check_wait(answer.wait, "waiting_input", "waiting for input")
        self._check_approver(answer.approver)

    def check_tool_results(self, request: ToolResults) -> None:
        """Client tool results fit when the run waits for each call's result and none is answered yet."""
        run = self.run
        self._check_wait(request.wait)
        why = machine.unanswerable(run.session, [r.tool_call_id for r in request.results], run.client_tools())
        if why is None and run.status != "waiting_input":
            why = f"the run is {run.status}, not waiting for a tool result"
        if why is not None:
            raise Misfit(why)

    def tool_results(self, request: ToolResults, offset: int) -> ToolResultsTaken:
        run = self.run
        taken = machine.answer_calls(run.session, {r.tool_call_id: r.content for r in request.results}, request.approver)
        run.woken = True
        return ToolResultsTaken(answered=taken, offset=offset)

    def check_retry(self, retry: RetrySignal) -> None:
        self._check_tenant(retry.tenant)
        self._check_wait(retry.wait, "waiting_retry", "waiting after an error")

    def check_cancel(self, _: CancelSignal) -> None:
        run = self.run
        if run.status in ("done", "cancelled", "failed") or run.ended:
            raise Misfit(f"the run is already {run.status}")

    def bind_batch(self) -> None:
        """A new batch of tool calls is pending: a decision made for an earlier batch whose call id it repeats
        does not decide it (rein-bound-decisions); a run recorded before that patch keeps the earlier rule."""
        session = self.run.session
        if machine.stale_decisions(session) and not workflow.patched(PATCH_BOUND_DECISIONS):
            machine.reopen_stale(session)

    # ---------------------------------------------------------------- applying (a bug raises)

    def decide(self, decision: DecisionSignal, approved: bool) -> list[str]:
        run = self.run
        child = self._child_waits("waiting_approval")
        if child is not None:
            return self._pass_to_child(child, "approve" if approved else "deny", decision)
        decision = self.from_client(decision)
        decided = machine.decide(
            run.session, approved, decision.tool_call_id, decision.approver, decision.reason, run.answered_outside(),
            via=decision.via or (f"rule {decision.rule}" if decision.rule else ""), at=workflow.now().isoformat(),
            tool_call_ids=decision.tool_call_ids,
        )
        run.woken = True
        return decided

    def answer(self, answer: AnswerSignal) -> str:
        run = self.run
        child = self._child_waits("waiting_input")
        if child is not None:
            self._pass_to_child(child, "answer", answer)
            return "forwarded"
        answer = self.from_client(answer)
        used = machine.answer(run.session, answer.text, answer.approver, run.answered_outside(), via=answer.via,
                              at=workflow.now().isoformat())
        run.woken = True
        return used

    def retry(self, _: RetrySignal) -> None:
        self.run.woken = True

    def cancel(self, cancel: CancelSignal) -> None:
        self.run.cancel_reason = cancel.reason or "cancelled"

    def _pass_to_child(self, child: str, name: str, payload: BaseModel) -> list[str]:
        """A decision signal sent to this run while its child waits: passed on to the child, unchanged
        (the child validates it as its own signal)."""
        assert self.run.child_wait is not None
        asyncio.ensure_future(self._signal_child(child, name, payload))
        return [c.id for c in self.run.child_wait[1].pending_tool_calls]

    async def _signal_child(self, child: str, name: str, payload: BaseModel) -> None:
        try:
            await workflow.get_external_workflow_handle(child).signal(name, payload.model_dump(mode="json"))
        except (ApplicationError, FailureError) as err:  # the child has ended meanwhile
            self.run.ignore(name, f"not passed on to the agent-as-tool run {child}: {err}")

    async def update_for_child(self, decision: DecisionSignal | AnswerSignal, approved: bool | None = None) -> Any:
        """A decision update while the run's child waits for it: the child's own update, sent by this run's
        worker (PASS_DECISION); its answer is this update's, its refusal or failure raised to the caller.
        None when no child waits for this decision (the run decides itself)."""
        waits = "waiting_input" if approved is None else "waiting_approval"
        child = self._child_waits(waits)
        if child is None:
            return None
        update = ANSWER_UPDATE if approved is None else APPROVE_UPDATE if approved else DENY_UPDATE
        try:
            return await workflow.execute_local_activity(
                PASS_DECISION, PassDecisionInput(run_id=child, update=update, payload=decision.model_dump(mode="json")),
                start_to_close_timeout=DESCRIBE_TIMEOUT, retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"{update.removeprefix('rein.')} for the agent-as-tool run {child}")
        except FailureError as err:  # a local activity's failure may come unwrapped (no ActivityError)
            cause = err.cause if isinstance(err, ActivityError) else err
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            kind = cause.type if isinstance(cause, ApplicationError) else None
            raise ApplicationError(f"the agent-as-tool run {child}: {message}", type=kind or "DecisionFailed") from None

    # ---------------------------------------------------------------- the updates

"""Decisions from people and ops tooling: approve, deny, answer, retry and cancel.

Each decision is one typed update with a validator: a decision that does not fit the run is refused
to the caller, with the reason. The signals of the same names are thin adapters for stock tools
(`temporal workflow signal`): they run the same validator (a misfit is recorded and ignored, since a
signal has nobody to answer) and the same handler. A bug while applying a decision is not caught:
it fails the workflow task, the decision stays in history (a signal) or with the server (an update),
and a fixed build applies it (docs/deploys.md, "Failure policy").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from rein.core import machine
    from rein.core.contract import (
        ANSWER_UPDATE,
        APPROVE_UPDATE,
        CANCEL_UPDATE,
        DECISION_FOR_CHILD,
        DENY_UPDATE,
        READERS_QUERY,
        RETRY_UPDATE,
        STREAM_SIGNAL,
        AnswerSignal,
        CancelSignal,
        DecisionSignal,
        RetrySignal,
    )
    from rein.core.errors import validation_text


from rein.workflows.state import RunState

SIGNALS = ("approve", "deny", "answer", "retry", "cancel")
P = TypeVar("P", bound=BaseModel)


class Misfit(ValueError):
    """A decision that does not fit the run's state or the expected shape (refused, never a bug)."""


class Decisions(RunState):
    """approve, deny, answer, retry and cancel: validated updates, and signals adapted to them."""

    # ---------------------------------------------------------------- the signal adapter

    def _adapt(self, name: str, args: Sequence[Any], model: type[P], validate: Callable[[P], None],
               apply: Callable[[P], Any]) -> None:
        """A decision signal: the update's own validator and handler. A misfit is recorded and
        ignored; anything the handler raises fails the workflow task (a bug: the fixed build applies it)."""
        self._count(args)
        try:
            payload = self._payload(model, args)
            validate(payload)
        except (Misfit, ApplicationError) as misfit:
            self.ignore(name, misfit.message if isinstance(misfit, ApplicationError) else str(misfit))
            return
        apply(payload)

    def _count(self, args: Sequence[Any]) -> None:
        """Signals and decision updates grow the history; a waiting run continues as new on many."""
        self.signals_in_run += 1
        try:
            self.signal_bytes_in_run += len(json.dumps(list(args), default=str))
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

    def _check_approver(self, approver: str) -> None:
        allowed = self.config.approvers if self.config is not None else None
        if allowed is not None and approver not in allowed:
            raise Misfit(f"approver {approver[:80]!r} is not among this run's approvers")

    def _child_waits(self, status: str) -> str | None:
        """The workflow id of this run's agent-as-tool child when it waits with `status`."""
        if self.child_wait is not None and self.child_wait[1].status == status:
            return self.child_wait[0]
        return None

    def _check_decision(self, decision: DecisionSignal) -> None:
        if self._child_waits("waiting_approval") is not None:
            return  # for the child run: the signal passes it on, the update refuses it (see _for_child_update)
        if self.status != "waiting_approval":
            raise Misfit(f"the run is {self.status}, not waiting for approval")
        self._check_approver(decision.approver)
        pending = {c.id for c in self.session.pending_tool_calls if c.name not in self.input_tools}
        undecided = pending - set(machine.decisions_for_pending(self.session))
        if decision.tool_call_id is not None and decision.tool_call_id not in pending:
            raise Misfit(f"no pending tool call with id {decision.tool_call_id!r}")
        if decision.tool_call_id is None and not undecided:
            raise Misfit("every pending tool call is already decided")

    def _check_answer(self, answer: AnswerSignal) -> None:
        if self._child_waits("waiting_input") is not None:
            return
        if self.status != "waiting_input":
            raise Misfit(f"the run is {self.status}, not waiting for input")
        self._check_approver(answer.approver)

    def _check_retry(self, _: RetrySignal) -> None:
        if self.status != "waiting_retry":
            raise Misfit(f"the run is {self.status}, not waiting after an error")

    def _check_cancel(self, _: CancelSignal) -> None:
        if self.status in ("done", "cancelled", "failed") or self.ended:
            raise Misfit(f"the run is already {self.status}")

    def _for_child_update(self, status: str) -> None:
        """An update cannot be passed on from workflow code with its answer: refuse it naming the child
        run, where rein's client sends it, so the caller hears the child's own answer."""
        child = self._child_waits(status)
        if child is not None:
            raise ApplicationError(f"the decision is for the agent-as-tool run {child} that waits; send it there",
                                   child, type=DECISION_FOR_CHILD)

    # ---------------------------------------------------------------- applying (a bug raises)

    def _decide(self, decision: DecisionSignal, approved: bool) -> list[str]:
        child = self._child_waits("waiting_approval")
        if child is not None:
            return self._pass_to_child(child, "approve" if approved else "deny", decision)
        decided = machine.decide(
            self.session, approved, decision.tool_call_id, decision.approver, decision.reason, self.input_tools
        )
        self.woken = True
        return decided

    def _answer(self, answer: AnswerSignal) -> str:
        child = self._child_waits("waiting_input")
        if child is not None:
            self._pass_to_child(child, "answer", answer)
            return "forwarded"
        used = machine.answer(self.session, answer.text, answer.approver, self.input_tools)
        self.woken = True
        return used

    def _retry(self, _: RetrySignal) -> None:
        self.woken = True

    def _cancel(self, cancel: CancelSignal) -> None:
        self.cancel_reason = cancel.reason or "cancelled"

    def _pass_to_child(self, child: str, name: str, payload: BaseModel) -> list[str]:
        """A decision signal sent to this run while its child waits: passed on to the child, unchanged
        (the child validates it as its own signal)."""
        assert self.child_wait is not None
        handle = workflow.get_external_workflow_handle(child)
        asyncio.ensure_future(handle.signal(name, payload.model_dump(mode="json")))
        return [c.id for c in self.child_wait[1].pending_tool_calls]

    # ---------------------------------------------------------------- the updates

    @workflow.update(name=APPROVE_UPDATE, description='Approve pending tool calls; refused when nothing fits: {"tool_call_id", "approver", "reason"}')  # noqa: E501  (one string, read whole)
    def approve_update(self, decision: DecisionSignal) -> list[str]:
        return self._decide(decision, True)

    @approve_update.validator
    def _validate_approve(self, decision: DecisionSignal) -> None:
        self._for_child_update("waiting_approval")
        self._check_decision(decision)

    @workflow.update(name=DENY_UPDATE, description='Deny pending tool calls; refused when nothing fits: {"tool_call_id", "approver", "reason"}')  # noqa: E501  (one string, read whole)
    def deny_update(self, decision: DecisionSignal) -> list[str]:
        return self._decide(decision, False)

    @deny_update.validator
    def _validate_deny(self, decision: DecisionSignal) -> None:
        self._for_child_update("waiting_approval")
        self._check_decision(decision)

    @workflow.update(name=ANSWER_UPDATE, description='Answer a need_input interrupt; refused when none is pending: {"text", "approver"}')
    def answer_update(self, answer: AnswerSignal) -> str:
        return self._answer(answer)

    @answer_update.validator
    def _validate_answer(self, answer: AnswerSignal) -> None:
        self._for_child_update("waiting_input")
        self._check_answer(answer)

    @workflow.update(name=RETRY_UPDATE, description="Retry the model call after an error interrupt; refused otherwise")
    def retry_update(self, request: RetrySignal | None = None) -> None:
        self._retry(request or RetrySignal())

    @retry_update.validator
    def _validate_retry(self, request: RetrySignal | None = None) -> None:
        self._check_retry(request or RetrySignal())

    @workflow.update(name=CANCEL_UPDATE, description='End the run with stop_reason cancelled; refused once it ended: {"reason"}')
    def cancel_update(self, cancel: CancelSignal | None = None) -> None:
        self._cancel(cancel or CancelSignal())

    @cancel_update.validator
    def _validate_cancel(self, cancel: CancelSignal | None = None) -> None:
        self._check_cancel(cancel or CancelSignal())

    # ---------------------------------------------------------------- the signals (stock tools)

    @workflow.signal(name="approve", description='Approve pending tool calls: {"tool_call_id": id or null for all, "approver", "reason"}')
    def approve(self, *args: Any) -> None:
        self._adapt("approve", args, DecisionSignal, self._check_decision, lambda d: self._decide(d, True))

    @workflow.signal(name="deny", description='Deny pending tool calls; the model sees the reason: {"tool_call_id", "approver", "reason"}')
    def deny(self, *args: Any) -> None:
        self._adapt("deny", args, DecisionSignal, self._check_decision, lambda d: self._decide(d, False))

    @workflow.signal(name="answer", description='Answer a need_input interrupt: {"text", "approver"}')
    def answer(self, *args: Any) -> None:
        self._adapt("answer", args, AnswerSignal, self._check_answer, self._answer)

    @workflow.signal(name="retry", description="Retry the model call after an error interrupt")
    def retry(self, *args: Any) -> None:
        self._adapt("retry", args, RetrySignal, self._check_retry, self._retry)

    @workflow.signal(name="cancel", description='End the run with stop_reason cancelled: {"reason"}')
    def cancel(self, *args: Any) -> None:
        self._adapt("cancel", args, CancelSignal, self._check_cancel, self._cancel)

    @workflow.signal(name=STREAM_SIGNAL, description="Model calls publish their text live from now on")
    def stream_on(self, *args: Any) -> None:
        self.streaming = True

    @workflow.query(name=READERS_QUERY, description="rein's model calls: how many stream readers are attached")
    def reader_count(self) -> int:
        return self.readers.polls

    @workflow.signal(dynamic=True, description="Any other signal name: recorded and ignored")
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self.signals_in_run += 1
        self.signal_bytes_in_run += sum(len(a.payload.data) for a in args if hasattr(a, "payload"))
        self.ignore(name[:100], f"unknown signal; rein accepts {', '.join(SIGNALS)}")

"""Decisions from people and ops tooling: signals (a misfit is recorded and ignored) and validated
updates (a misfit is rejected to the caller).

Each decision exists twice. Both take any number of raw arguments so that no payload shape can fail
a workflow task; `_check_*` says what fits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from rein import machine
    from rein.contract import (
        ANSWER_UPDATE,
        APPROVE_UPDATE,
        CANCEL_UPDATE,
        DENY_UPDATE,
        READERS_QUERY,
        RETRY_UPDATE,
        STREAM_SIGNAL,
        AnswerSignal,
        CancelSignal,
        DecisionSignal,
    )
    from rein.errors import validation_text

from rein.workflows.children import Children

SIGNALS = ("approve", "deny", "answer", "retry", "cancel")


class Misfit(ValueError):
    """A signal or update that does not fit the run's state or the expected shape."""

class Decisions(Children):
    """approve, deny, answer, retry and cancel, as signals and as validated updates."""

    def _count(self, args: Sequence[Any]) -> None:
        """Signals and decision updates grow the history; a waiting run continues as new on many."""
        self.signals_in_run += 1
        try:
            self.signal_bytes_in_run += len(json.dumps(list(args), default=str))
        except (TypeError, ValueError):
            pass

    def _signal(self, name: str, check: Any, apply: Any, args: Sequence[Any]) -> None:
        self._count(args)
        try:
            apply(check(args))
        except Misfit as misfit:
            self._ignore(name, str(misfit))
        except Exception as exc:  # a bug of ours must not fail the workflow task either
            self._ignore(name, f"could not be applied: {type(exc).__name__}: {str(exc)[:200]}")

    def _payload(self, model: type[BaseModel], args: Sequence[Any]) -> Any:
        if len(args) > 1:
            raise Misfit(f"expected one JSON object, got {len(args)} arguments")
        payload = args[0] if args else None
        try:
            return model.model_validate({} if payload is None else payload)
        except (ValidationError, ValueError, TypeError) as exc:
            raise Misfit(f"malformed payload: {validation_text(exc, 'payload')}") from None

    def _check_approver(self, approver: str) -> None:
        allowed = self.config.approvers if self.config is not None else None
        if allowed is not None and approver not in allowed:
            raise Misfit(f"approver {approver[:80]!r} is not among this run's approvers")

    def _check_decision(self, args: Sequence[Any]) -> DecisionSignal:
        decision = self._payload(DecisionSignal, args)
        if self.child_wait is not None and self.child_wait[1].status == "waiting_approval":
            return decision  # for the child run (see _for_child); the child checks it
        if self.status != "waiting_approval":
            raise Misfit(f"the run is {self.status}, not waiting for approval")
        self._check_approver(decision.approver)
        pending = {c.id for c in self.session.pending_tool_calls if c.name not in self.input_tools}
        undecided = pending - set(machine.decisions_for_pending(self.session))
        if decision.tool_call_id is not None and decision.tool_call_id not in pending:
            raise Misfit(f"no pending tool call with id {decision.tool_call_id!r}")
        if decision.tool_call_id is None and not undecided:
            raise Misfit("every pending tool call is already decided")
        return decision

    def _decide(self, decision: DecisionSignal, approved: bool) -> list[str]:
        if self.child_wait is not None and self.child_wait[1].status == "waiting_approval":
            return self._for_child("approve" if approved else "deny", decision)
        decided = machine.decide(
            self.session, approved, decision.tool_call_id, decision.approver, decision.reason, self.input_tools
        )
        if not decided:
            raise Misfit(f"no pending tool call with id {decision.tool_call_id!r}")
        self.woken = True
        return decided

    def _check_answer(self, args: Sequence[Any]) -> AnswerSignal:
        answer = self._payload(AnswerSignal, args)
        if self.child_wait is not None and self.child_wait[1].status == "waiting_input":
            return answer
        if self.status != "waiting_input":
            raise Misfit(f"the run is {self.status}, not waiting for input")
        self._check_approver(answer.approver)
        return answer

    def _answer(self, answer: AnswerSignal) -> str:
        if self.child_wait is not None and self.child_wait[1].status == "waiting_input":
            self._for_child("answer", answer)
            return "forwarded"
        used = machine.answer(self.session, answer.text, answer.approver, self.input_tools)
        self.woken = True
        return used

    def _check_retry(self, args: Sequence[Any]) -> None:
        if len(args) > 1:
            raise Misfit(f"expected at most one argument, got {len(args)}")
        if self.status != "waiting_retry":
            raise Misfit(f"the run is {self.status}, not waiting after an error")

    def _retry(self, _: None) -> None:
        self.woken = True

    def _check_cancel(self, args: Sequence[Any]) -> CancelSignal:
        cancel = self._payload(CancelSignal, args)
        if self.status in ("done", "cancelled", "failed") or self.ended:
            raise Misfit(f"the run is already {self.status}")
        return cancel

    def _cancel(self, cancel: CancelSignal) -> None:
        self.cancel_reason = cancel.reason or "cancelled"

    @workflow.signal(name="approve", description='Approve pending tool calls: {"tool_call_id": id or null for all, "approver", "reason"}')
    def approve(self, *args: Any) -> None:
        self._signal("approve", self._check_decision, lambda d: self._decide(d, True), args)

    @workflow.signal(name="deny", description='Deny pending tool calls; the model sees the reason: {"tool_call_id", "approver", "reason"}')
    def deny(self, *args: Any) -> None:
        self._signal("deny", self._check_decision, lambda d: self._decide(d, False), args)

    @workflow.signal(name="answer", description='Answer a need_input interrupt: {"text", "approver"}')
    def answer(self, *args: Any) -> None:
        self._signal("answer", self._check_answer, self._answer, args)

    @workflow.signal(name="retry", description="Retry the model call after an error interrupt")
    def retry(self, *args: Any) -> None:
        self._signal("retry", self._check_retry, self._retry, args)

    @workflow.signal(name=STREAM_SIGNAL, description="Model calls publish their text live from now on")
    def stream_on(self, *args: Any) -> None:
        self.streaming = True

    @workflow.query(name=READERS_QUERY, description="rein's model calls: how many stream readers are attached")
    def reader_count(self) -> int:
        return self.readers.polls

    @workflow.signal(name="cancel", description='End the run with stop_reason cancelled: {"reason"}')
    def cancel(self, *args: Any) -> None:
        self._signal("cancel", self._check_cancel, self._cancel, args)

    @workflow.signal(dynamic=True, description="Any other signal name: recorded and ignored")
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self.signals_in_run += 1
        self.signal_bytes_in_run += sum(len(a.payload.data) for a in args if hasattr(a, "payload"))
        self._ignore(name[:100], f"unknown signal; rein accepts {', '.join(SIGNALS)}")

    @workflow.update(name=APPROVE_UPDATE, description='Approve pending tool calls; rejected when nothing fits: {"tool_call_id", "approver", "reason"}')  # noqa: E501  (one string, read whole)
    def approve_update(self, *args: Any) -> list[str]:
        return self._decide(self._check_decision(args), True)

    @approve_update.validator
    def _validate_approve(self, *args: Any) -> None:
        self._check_decision(args)

    @workflow.update(name=DENY_UPDATE, description='Deny pending tool calls; rejected when nothing fits: {"tool_call_id", "approver", "reason"}')  # noqa: E501  (one string, read whole)
    def deny_update(self, *args: Any) -> list[str]:
        return self._decide(self._check_decision(args), False)

    @deny_update.validator
    def _validate_deny(self, *args: Any) -> None:
        self._check_decision(args)

    @workflow.update(name=ANSWER_UPDATE, description='Answer a need_input interrupt; rejected when none is pending: {"text", "approver"}')
    def answer_update(self, *args: Any) -> str:
        return self._answer(self._check_answer(args))

    @answer_update.validator
    def _validate_answer(self, *args: Any) -> None:
        self._check_answer(args)

    @workflow.update(name=RETRY_UPDATE, description="Retry the model call after an error interrupt; rejected otherwise")
    def retry_update(self, *args: Any) -> None:
        self._check_retry(args)
        self._retry(None)

    @retry_update.validator
    def _validate_retry(self, *args: Any) -> None:
        self._check_retry(args)

    @workflow.update(name=CANCEL_UPDATE, description='End the run with stop_reason cancelled; rejected once it ended: {"reason"}')
    def cancel_update(self, *args: Any) -> None:
        self._cancel(self._check_cancel(args))

    @cancel_update.validator
    def _validate_cancel(self, *args: Any) -> None:
        self._check_cancel(args)

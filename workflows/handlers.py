"""AgentWorkflow's message handlers: every signal, update and query a client, a parent run or a stock tool
(`temporal workflow signal/update/query`) may send, each a few lines that call the run's collaborators.

The names are permanent data (rein.core.contract). A decision is a typed update with a validator; its signal
of the same name is a thin adapter over the same validator and code (Decisions.adapt): a misfit is recorded
and ignored, a bug fails the workflow task so that a fixed build applies it (docs/deploys.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.workflow import HandlerUnfinishedPolicy

with workflow.unsafe.imports_passed_through():
    from rein.core.contract import (
        ANSWER_UPDATE,
        APPROVE_UPDATE,
        BUDGET_SIGNAL,
        CANCEL_UPDATE,
        CHILD_SIGNAL,
        DENY_UPDATE,
        READERS_QUERY,
        RECORD_QUERY,
        RETRY_UPDATE,
        STREAM_SIGNAL,
        TOOL_RESULTS_UPDATE,
        WAIT_UPDATE,
        AnswerSignal,
        CancelSignal,
        DecisionSignal,
        RetrySignal,
        RunOutcome,
        ToolResults,
        ToolResultsTaken,
        WaitRequest,
    )
    from rein.core.policy import RULES_SIGNAL
    from rein.core.shared_state import STATE_QUERY, STATE_UPDATE, SetState
    from rein.core.threads import SEND_UPDATE, STOP_UPDATE, THREAD_QUERY, SendReceipt, SendRequest, StopRequest

from rein.workflows.decisions import SIGNALS
from rein.workflows.parts import RunParts


class AgentHandlers(RunParts):
    """The run's state and collaborators with its handlers; AgentLoop adds the loop that drives it."""

    # ---------------------------------------------------------------- queries (rein.workflows.publishing)

    @workflow.query(name="status", description="status, stage, iteration, usage, interrupt, pending_tool_calls, stop_reason")
    def status_query(self) -> dict[str, Any]:
        return self.publisher.status_view().model_dump(mode="json")

    @workflow.query(name="session", description="The run's Session (conversation and loop state)")
    def session_query(self) -> dict[str, Any]:
        return self.session.model_dump(mode="json")

    @workflow.query(
        name="steps",
        description="The Step records this run made, from index `start` (earlier runs of a "
        "continue-as-new chain hold earlier steps; see status.first_step and status.continued_from)",
    )
    def steps_query(self, start: int = 0) -> list[dict[str, Any]]:
        return [s.model_dump(mode="json") for s in self.steps if s.index >= start]

    @workflow.query(name=RECORD_QUERY, description="rein's client: the session, status and steps queries' answers in one")
    def record_query(self, start: int = 0) -> dict[str, Any]:
        return {"session": self.session_query(), "status": self.status_query(), "steps": self.steps_query(start)}

    @workflow.query(name="outcome", description="The ended run's result (a run closed as CANCELED returns none)")
    def outcome_query(self) -> dict[str, Any] | None:
        return self.final.model_dump(mode="json") if self.final is not None else None

    @workflow.query(name=READERS_QUERY, description="rein's model calls: how many stream readers are attached")
    def reader_count(self) -> int:
        return self.readers.polls

    # ---------------------------------------------------------------- decisions (rein.workflows.decisions)

    @workflow.update(name=APPROVE_UPDATE, description='Approve pending tool calls; refused when nothing fits: {"wait", "tool_call_ids", "approver", "reason"}')  # noqa: E501  (one string, read whole)
    async def approve_update(self, decision: DecisionSignal) -> list[str]:
        passed = await self.decisions.update_for_child(decision, True)
        return self.decisions.decide(decision, True) if passed is None else passed

    @approve_update.validator
    def _validate_approve(self, decision: DecisionSignal) -> None:
        self.decisions.check_approval(self.decisions.from_sender(decision))

    @workflow.update(name=DENY_UPDATE, description='Deny pending tool calls; refused when nothing fits: {"wait", "tool_call_ids", "approver", "reason"}')  # noqa: E501  (one string, read whole)
    async def deny_update(self, decision: DecisionSignal) -> list[str]:
        passed = await self.decisions.update_for_child(decision, False)
        return self.decisions.decide(decision, False) if passed is None else passed

    @deny_update.validator
    def _validate_deny(self, decision: DecisionSignal) -> None:
        self.decisions.check_decision(self.decisions.from_sender(decision))

    @workflow.update(name=ANSWER_UPDATE, description='Answer a need_input interrupt; refused when none is pending: {"text", "wait", "approver"}')  # noqa: E501  (one string, read whole)
    async def answer_update(self, answer: AnswerSignal) -> str:
        passed = await self.decisions.update_for_child(answer)
        return self.decisions.answer(answer) if passed is None else passed

    @answer_update.validator
    def _validate_answer(self, answer: AnswerSignal) -> None:
        self.decisions.check_answer(answer)

    @workflow.update(name=RETRY_UPDATE, description="Retry the model call after an error interrupt; refused otherwise")
    def retry_update(self, request: RetrySignal | None = None) -> None:
        self.decisions.retry(request or RetrySignal())

    @retry_update.validator
    def _validate_retry(self, request: RetrySignal | None = None) -> None:
        self.decisions.check_retry(request or RetrySignal())

    @workflow.update(name=CANCEL_UPDATE, description='End the run with stop_reason cancelled; refused once it ended: {"reason"}')
    def cancel_update(self, cancel: CancelSignal | None = None) -> None:
        self.decisions.cancel(cancel or CancelSignal())

    @cancel_update.validator
    def _validate_cancel(self, cancel: CancelSignal | None = None) -> None:
        self.decisions.check_cancel(cancel or CancelSignal())

    # ---------------------------------------------------------------- the decisions' signals (stock tools)

    @workflow.signal(name="approve", description='Approve pending tool calls: {"wait", "tool_call_ids"} or {"tool_call_id": id or null for all}, "approver", "reason"')  # noqa: E501  (one string, read whole)
    def approve(self, *args: Any) -> None:
        d = self.decisions
        d.adapt("approve", args, DecisionSignal, d.check_approval, lambda decision: d.decide(decision, True))

    @workflow.signal(name="deny", description='Deny pending tool calls; the model sees the reason: {"wait", "tool_call_ids" or "tool_call_id", "approver", "reason"}')  # noqa: E501
    def deny(self, *args: Any) -> None:
        d = self.decisions
        d.adapt("deny", args, DecisionSignal, d.check_decision, lambda decision: d.decide(decision, False))

    @workflow.signal(name="answer", description='Answer a need_input interrupt: {"text", "wait", "approver"}')
    def answer(self, *args: Any) -> None:
        self.decisions.adapt("answer", args, AnswerSignal, self.decisions.check_answer, self.decisions.answer)

    @workflow.signal(name="retry", description='Retry the model call after an error interrupt: {"wait"} or nothing')
    def retry(self, *args: Any) -> None:
        self.decisions.adapt("retry", args, RetrySignal, self.decisions.check_retry, self.decisions.retry)

    @workflow.signal(name="cancel", description='End the run with stop_reason cancelled: {"reason"}')
    def cancel(self, *args: Any) -> None:
        self.decisions.adapt("cancel", args, CancelSignal, self.decisions.check_cancel, self.decisions.cancel)

    @workflow.signal(name=RULES_SIGNAL, description='The rules changed: {"version"}; a run waiting for approval asks '
                                                   'them again (from the policy workflow)')
    def rules_changed(self, *args: Any) -> None:
        self.decisions.count(args)
        self.inbox.take_news(args)

    @workflow.signal(name=STREAM_SIGNAL, description="Model calls publish their text live from now on")
    def stream_on(self, *args: Any) -> None:
        self.streaming = True

    @workflow.signal(dynamic=True, description="Any other signal name: recorded and ignored")
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self.signals_in_run += 1
        self.signal_bytes_in_run += sum(len(a.payload.data) for a in args if hasattr(a, "payload"))
        self.ignore(name[:100], f"unknown signal; rein accepts {', '.join(SIGNALS)}")

    # ---------------------------------------------------------------- a client's wait (rein.workflows.waiting)

    @workflow.update(
        name=WAIT_UPDATE,
        unfinished_policy=HandlerUnfinishedPolicy.ABANDON,
        description="rein's client: wait until the run pauses or ends",
    )
    async def wait(self, request: WaitRequest) -> RunOutcome:
        return await self.waiting.wait(request)

    # ---------------------------------------------------------------- a thread's messages (rein.workflows.threads)

    @workflow.update(name=SEND_UPDATE, description='A message for this thread: {"text", "mode": queue|steer|interrupt|reject, '
                                                   '"message_id", "sender"}; answers where it went')
    def send(self, request: SendRequest) -> SendReceipt:
        self.decisions.count([request.model_dump(mode="json")])
        return self.threads.take_message(request)

    @send.validator
    def _validate_send(self, request: SendRequest) -> None:
        self.threads.validate_send(request)

    @workflow.signal(name=SEND_UPDATE, description='A message for this thread, for tools that only signal (a schedule): '
                                                   'the update\'s JSON; a misfit is recorded and ignored')
    def send_signal(self, *args: object) -> None:
        self.decisions.adapt("rein.send", args, SendRequest, self.threads.validate_send, self.threads.take_message)

    @workflow.update(name=TOOL_RESULTS_UPDATE, description='Results of client tool calls the turn waits for, all or none: '
                                                          '{"results": [{"tool_call_id", "content"}], "approver"}')
    def tool_results_update(self, request: ToolResults) -> ToolResultsTaken:
        self.decisions.count([request.model_dump(mode="json")])
        return self.decisions.tool_results(request, self.readers.offset())

    @tool_results_update.validator
    def _validate_tool_results(self, request: ToolResults) -> None:
        self.decisions.check_tool_results(request)

    @workflow.update(name=STOP_UPDATE, description='Stop the thread\'s turn under way (the thread stays): {"by"}; '
                                                   'answers the turn\'s number')
    def stop_turn_update(self, request: StopRequest) -> int:
        self.decisions.count([request.model_dump(mode="json")])
        return self.threads.stop_turn(request)

    @stop_turn_update.validator
    def _validate_stop_turn(self, request: StopRequest) -> None:
        self.threads.validate_stop(request)

    @workflow.update(name=STATE_UPDATE, description='Set the thread\'s shared state: {"value", "version" (the one '
                                                    'read: a stale write is refused), "by"}; answers the new version')
    def set_state_update(self, request: SetState) -> int:
        self.decisions.count([request.model_dump(mode="json")])
        return self.threads.set_state(request)

    @set_state_update.validator
    def _validate_set_state(self, request: SetState) -> None:
        self.threads.validate_set_state(request)

    @workflow.query(name=STATE_QUERY, description="The thread's shared state: {\"value\", \"version\"}")
    def state_query(self) -> dict[str, object]:
        return self.threads.shared().model_dump(mode="json")

    @workflow.query(name=THREAD_QUERY, description="The thread: status, turns, queued and steering messages, usage")
    def thread_query(self) -> dict[str, object]:
        return self.threads.view().model_dump(mode="json")

    # ---------------------------------------------------------------- a child run's link (rein.workflows.children)

    @workflow.signal(name=CHILD_SIGNAL, description='From an agent-as-tool child run: {"call_id", "status"}')
    def child_status(self, payload: Any = None) -> None:
        self.child_runs.on_status(payload)

    @workflow.signal(name=BUDGET_SIGNAL, description="From the parent run: the family's budget is spent; stop")
    def budget_spent(self, payload: Any = None) -> None:
        self.child_runs.on_budget_spent(payload)

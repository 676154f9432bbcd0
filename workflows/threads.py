"""A thread's turns (rein.core.threads): the `rein.send` update that takes a message at any moment, the
wait between turns, steering joined before a model call, and the `rein.thread` query."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from rein.core import machine, threads
    from rein.core.ir import StreamChunk
    from rein.core.threads import (
        SEND_UPDATE,
        THREAD_QUERY,
        TURN_TRACE,
        SendReceipt,
        SendRequest,
        ThreadState,
        ThreadView,
    )

from rein.workflows.decisions import Decisions
from rein.workflows.waiting import Waiting


class Threads(Waiting, Decisions):
    """Messages in, turns out: what makes an AgentWorkflow run a conversation."""

    @property
    def thread(self) -> ThreadState | None:
        return self.carry.thread

    # ---------------------------------------------------------------- intake

    @workflow.update(name=SEND_UPDATE, description='A message for this thread: {"text", "mode": queue|steer|interrupt|reject, '
                                                   '"message_id", "sender"}; answers where it went')
    def send(self, request: SendRequest) -> SendReceipt:
        self._count([request.model_dump(mode="json")])
        return self._take_message(request)

    def _take_message(self, request: SendRequest) -> SendReceipt:
        thread = self.thread
        assert thread is not None  # the validator refused otherwise
        message_id = request.message_id or str(workflow.uuid4())
        known = message_id in thread.receipts
        receipt = threads.take(thread, request, message_id, workflow.info().workflow_id, self.carry.pause)
        if not known and request.mode == "interrupt" and thread.open:
            self._interrupt_turn(request)
        return receipt

    @send.validator
    def _validate_send(self, request: SendRequest) -> None:
        if self.thread is None:
            raise ApplicationError("this run is not a thread: start one with rein.send (update-with-start, "
                                   "input {\"agent\": ..., \"thread\": true})", type="NotAThread")
        if self.ended or self.cancel_reason is not None:
            raise ApplicationError(f"the thread has ended ({self.status})", type="ThreadEnded")
        budget = threads.spent(self.thread, self.session.usage, self.config)
        try:
            threads.check(self.thread, request, budget)
        except threads.Busy as busy:
            raise ApplicationError(str(busy), type="BudgetSpent" if budget else "Busy") from None

    @workflow.signal(name=SEND_UPDATE, description='A message for this thread, for tools that only signal (a schedule): '
                                                   'the update\'s JSON; a misfit is recorded and ignored')
    def send_signal(self, *args: object) -> None:
        self._adapt("rein.send", args, SendRequest, self._validate_send, self._take_message)

    def _interrupt_turn(self, request: SendRequest) -> None:
        """`interrupt` while a turn is under way: a model call in flight is cut; a wait for a person ends."""
        thread = self.thread
        assert thread is not None
        who = request.sender or "thread"
        if self.status == "waiting_approval":
            machine.decide(self.session, False, None, who, threads.INTERRUPTED, self.input_tools)
            self.woken = True
        elif self.status == "waiting_input":
            machine.answer(self.session, request.text, who, self.input_tools)
            thread.steering.pop()  # it is the answer, not a message of its own
            self.woken = True
        elif self.status == "waiting_retry":
            self.woken = True  # the retried call takes the message in
        elif self.model_call_under_way:
            self.cut = True

    # ---------------------------------------------------------------- turns

    async def _open_turn(self) -> bool:
        """Wait (at no cost) for the next message and open its turn; False when the thread was cancelled."""
        thread = self.thread
        assert thread is not None
        while not thread.queued:
            if self.status != "idle":
                self.status = "idle"
                self.publisher.publish()
            try:
                await workflow.wait_condition(
                    lambda: bool(thread.queued) or self.cancel_reason is not None or self.continuation.signals_piled_up())
            except asyncio.CancelledError:
                if not self.cancelled_natively():
                    raise
            if self.cancel_reason is not None:
                self.session.done, self.session.stop_reason = True, "cancelled"
                return False
            if not thread.queued:
                await self.continuation.continue_as_new()  # many messages refused or duplicated: a fresh history
        message = threads.next_turn(thread)
        assert message is not None
        thread.turn_first_step = self.first_step + len(self.steps)
        machine.prepare_turn(self.session, message.text)
        self.carry.active_s = 0.0
        self.streaming = message.stream or bool(self.request and self.request.stream)  # asked per turn (astream)
        self.status = "running"
        self.prompt = message.text
        self.publisher.progressed = True
        self.publisher.publish()
        self.emit(StreamChunk(type="event", name="turn", data={"turn": thread.turns, "message_id": message.message_id}))
        self._trace_turn("start", {"rein.turn": thread.turns, "rein.message_id": message.message_id})
        return True

    def _trace_turn(self, event: str, attributes: dict[str, object]) -> None:
        """Tell rein's tracing (when the worker traces) that a turn opens or ends: each turn is a trace of its own.
        A workflow extern function: no command, nothing recorded; the spans come from a replay-safe tracer."""
        trace = workflow.extern_functions().get(TURN_TRACE)
        if trace is not None:
            trace(event, attributes)

    def _stop_if_thread_spent(self) -> None:
        """The thread's own budget (LoopConfig.thread_max_*) is spent: the turn under way stops with `budget`."""
        thread = self.thread
        if thread is not None and thread.open and not self.session.done and threads.spent(thread, self.session.usage, self.config):
            self.session.done, self.session.stop_reason = True, "budget"

    def _take_steering(self, finished: str | None) -> bool:
        """Steering messages join the turn before its next model call; True when they did. `finished`: the
        turn's stop reason when it just ended (only an answered turn goes on with them)."""
        thread = self.thread
        if thread is None or not thread.steering or self.interrupt is not None:
            return False
        if finished is not None and finished != "done":
            return False
        if finished is None and self.session.stage.value != "call_model":
            return False  # tool calls under way finish first
        threads.join(self.session, thread.steering)
        thread.steering = []
        return True

    def _end_turn(self) -> None:
        """The turn ended: the thread is idle, a waiting client hears it (a pause), readers see it."""
        thread = self.thread
        assert thread is not None
        threads.end_turn(thread, self.session.usage, machine.run_output(self.session))
        threads.keep_outcome(thread, self.publisher.outcome().model_dump(mode="json"))
        self.turns_in_run += 1
        self.status = "idle"
        self.carry.pause += 1
        self.publisher.publish()
        self.emit(StreamChunk(type="event", name="turn_end", finish_reason=self.session.stop_reason,
                               usage=self.session.usage, data={"turn": thread.turns}))
        self._trace_turn("end", {"rein.stop_reason": self.session.stop_reason or "done",
                                 "gen_ai.usage.input_tokens": self.session.usage.input_tokens,
                                 "gen_ai.usage.output_tokens": self.session.usage.output_tokens})

    @workflow.query(name=THREAD_QUERY, description="The thread: status, turns, queued and steering messages, usage")
    def thread_query(self) -> dict[str, object]:
        thread = self.thread or ThreadState()
        view = ThreadView(
            thread_id=workflow.info().workflow_id, agent=self.agent_key or (self.input.agent if self.input else ""),
            status=self.publisher.status_view().status, turns=thread.turns, open=thread.open, queued=thread.queued,
            steering=thread.steering, usage=thread.usage + (self.session.usage if thread.open else type(thread.usage)()),
            last_output=thread.last_output, turn_first_step=thread.turn_first_step,
        )
        return view.model_dump(mode="json")

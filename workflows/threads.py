"""A thread's turns (rein.core.threads): the `rein.send` update that takes a message at any moment, the
wait between turns, steering joined before a model call, and the `rein.thread` query."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from rein.workflows.patches import PATCH_CLIENT_TOOLS, PATCH_STOP_TURN, PATCH_THREAD_MEMO

with workflow.unsafe.imports_passed_through():
    from rein.core import machine, shared_state, threads
    from rein.core.contract import ToolCallInput
    from rein.core.ir import StreamChunk, ToolCall, ToolResult, ToolSpec
    from rein.core.shared_state import STATE_EVENT, SetState, SharedState, StateError
    from rein.core.threads import (
        STOPPED,
        THREAD_MEMO,
        TURN_TRACE,
        SendReceipt,
        SendRequest,
        StopRequest,
        ThreadState,
        ThreadView,
    )



if TYPE_CHECKING:
    from rein.workflows.continuation import Continuation
    from rein.workflows.publishing import Publisher
    from rein.workflows.state import RunState


class Threads:
    """Messages in, turns out: what makes an AgentWorkflow run a conversation. A collaborator of the loop, on
    its state; the `rein.send` update and signal and the `rein.thread` query (workflows/handlers.py) call it."""

    def __init__(self, run: RunState, publisher: Publisher, continuation: Continuation) -> None:
        self.run = run
        self.publisher = publisher
        self.continuation = continuation

    def take_message(self, request: SendRequest) -> SendReceipt:
        thread = self.run.thread
        assert thread is not None  # the validator refused otherwise
        message_id = request.message_id or str(workflow.uuid4())
        known = message_id in thread.receipts
        waits = self.run.interrupt.type if self.run.interrupt is not None else ""
        receipt = threads.take(thread, request, message_id, workflow.info().workflow_id, self.run.carry.pause,
                               self.run.readers.offset(), waits)
        if not known and request.mode == "interrupt" and thread.open:
            self._interrupt_turn(request)
        return receipt

    def validate_send(self, request: SendRequest) -> None:
        run = self.run
        if run.thread is None:
            raise ApplicationError("this run is not a thread: start one with rein.send (update-with-start, "
                                   "input {\"agent\": ..., \"thread\": true})", type="NotAThread")
        if run.ended or run.cancel_reason is not None:
            raise ApplicationError(f"the thread has ended ({run.status})", type="ThreadEnded")
        if self.continuation.cannot_continue_as_new and request.message_id not in run.thread.receipts:
            raise ApplicationError(
                "the thread's conversation is too large to continue as new, so its history would only grow: "
                "start another thread id, or give the agent compaction (LoopConfig.compaction) for its next "
                "threads", type="ThreadFull")
        budget = threads.spent(run.thread, run.session.usage, run.config)
        try:
            threads.check(run.thread, request, budget)
        except threads.Busy as busy:
            raise ApplicationError(str(busy), type="BudgetSpent" if budget else "Busy") from None

    def _interrupt_turn(self, request: SendRequest) -> None:
        """`interrupt` while a turn is under way: a model call in flight is cut; a wait for a person ends."""
        run = self.run
        thread = run.thread
        assert thread is not None
        who = request.sender or "thread"
        if run.status == "waiting_approval":
            machine.decide(run.session, False, None, who, threads.INTERRUPTED, run.answered_outside())
            run.woken = True
        elif run.status == "waiting_input":
            machine.answer(run.session, request.text, who, run.answered_outside())
            thread.steering.pop()  # it is the answer, not a message of its own
            run.woken = True
        elif run.status == "waiting_retry":
            run.woken = True  # the retried call takes the message in
        elif run.model_call_under_way:
            run.cut = True

    # ---------------------------------------------------------------- stopping a turn (rein.stop_turn)

    def validate_stop(self, _: StopRequest) -> None:
        thread = self.run.thread
        if thread is None:
            raise ApplicationError("this run is not a thread: only a thread's turn can be stopped", type="NotAThread")
        if not thread.open or self.run.ended:
            raise ApplicationError("no turn is under way: there is nothing to stop", type="Idle")

    def stop_turn(self, request: StopRequest) -> int:
        """Stop the turn under way: a model call is cut, a wait for a person settled; it ends before its next model
        call (`stops`). Returns the turn's number."""
        run = self.run
        thread = run.thread
        assert thread is not None
        thread.stopping = request.by or "a client"
        if run.status in ("waiting_approval", "waiting_input", "waiting_retry"):
            self._settle_wait()
            run.woken = True
        elif run.model_call_under_way:
            run.cut = True
        return thread.turns

    def stops(self, action: object) -> bool:
        """The turn was asked to stop: before a model call it ends (stop reason `stopped`); a wait nobody will
        answer now is settled first. True when the loop goes on without `action`."""
        run = self.run
        thread = run.thread
        if thread is None or not thread.stopping or not thread.open or run.session.done:
            return False
        if not isinstance(action, (machine.CallModel, machine.Wait)) or not workflow.patched(PATCH_STOP_TURN):
            return False
        if isinstance(action, machine.Wait) and action.interrupt.type != "error":
            self._settle_wait()
        else:
            run.session.done, run.session.stop_reason = True, STOPPED
        return True

    def _settle_wait(self) -> None:
        """Nobody answers the stopped turn's wait: its approvals are denied, its questions and client tools answered."""
        run = self.run
        thread = run.thread
        assert thread is not None
        why = f"the turn was stopped by {thread.stopping}"
        outside = run.answered_outside()
        machine.decide(run.session, False, None, thread.stopping, why, outside)
        waiting = machine.waiting_on(run.session, "need_input", outside)
        if waiting:
            machine.answer_calls(run.session, {c.id: f"No answer: {why}." for c in waiting}, thread.stopping)

    # ---------------------------------------------------------------- shared state (rein.core.shared_state)

    def shared(self) -> SharedState:
        """The `rein.state` query's answer (a run that is no thread has none: `{}` at version 0)."""
        thread = self.run.thread
        if thread is None or thread.state is None:
            return SharedState(version=thread.state_version if thread is not None else 0)
        return SharedState(value=thread.state, version=thread.state_version)

    def with_state(self, request: ToolCallInput, local: bool) -> ToolCallInput:
        """A thread's tool call says the state's version (a local one carries the state itself)."""
        thread = self.run.thread
        if thread is None:
            return request
        value = thread.state if local and thread.state is not None else None
        return request.model_copy(update={"state_version": thread.state_version, "state": value})

    def apply_tool_changes(self, calls: list[ToolCall], results: list[ToolResult]) -> None:
        """The batch's changes to the state, in the order the calls were made. A change that no longer applies (a
        page wrote the state while the tool ran) is left out and the stream says so: the tool's result stands."""
        thread = self.run.thread
        for call, result in zip(calls, results, strict=False):
            if thread is None or not result.state_patch:
                continue
            current = thread.state if thread.state is not None else {}
            try:
                value = shared_state.apply(current, result.state_patch)
                shared_state.check(value)
            except StateError as refused:
                self.run.emit(StreamChunk(type="event", name="state_refused",
                                          data={"tool_call_id": call.id, "reason": str(refused)}))
                continue
            self._changed(value, result.state_patch)

    def validate_set_state(self, request: SetState) -> None:
        thread = self.run.thread
        if thread is None:
            raise ApplicationError("this run is not a thread: only a thread holds shared state", type="NotAThread")
        if self.run.ended:
            raise ApplicationError(f"the thread has ended ({self.run.status})", type="ThreadEnded")
        if request.version != thread.state_version:
            raise ApplicationError(f"stale: the state is at version {thread.state_version}, this write was made on "
                                   f"version {request.version} (it changed meanwhile: read it again)", type="StaleState")
        try:
            shared_state.check(request.value)
        except StateError as refused:
            raise ApplicationError(str(refused), type="BadState") from None

    def set_state(self, request: SetState) -> int:
        """A page's (or a client's) write of the whole state; its new version."""
        thread = self.run.thread
        assert thread is not None
        current = thread.state if thread.state is not None else {}
        self._changed(request.value, shared_state.diff(current, request.value))
        return thread.state_version

    def _changed(self, value: object, patch: list[dict[str, object]]) -> None:
        thread = self.run.thread
        assert thread is not None
        thread.state, thread.state_version = value, thread.state_version + 1
        self.run.emit(StreamChunk(type="event", name=STATE_EVENT, data=shared_state.event(value, thread.state_version, patch)))

    # ---------------------------------------------------------------- turns

    async def open_turn(self) -> bool:
        """Wait (at no cost) for the next message and open its turn; False when the thread was cancelled."""
        run = self.run
        thread = run.thread
        assert thread is not None
        while not thread.queued:
            if run.status != "idle":
                run.status = "idle"
                self.publisher.publish()
            try:
                await workflow.wait_condition(
                    lambda: bool(thread.queued) or run.cancel_reason is not None or self.continuation.signals_piled_up())
            except asyncio.CancelledError:
                if not run.cancelled_natively():
                    raise
            if run.cancel_reason is not None:
                run.session.done, run.session.stop_reason = True, "cancelled"
                return False
            if not thread.queued:
                await self.continuation.continue_as_new()  # many messages refused or duplicated: a fresh history
        message = threads.next_turn(thread)
        assert message is not None
        if thread.turns == 1 and workflow.memo_value(THREAD_MEMO, None) is None and workflow.patched(PATCH_THREAD_MEMO):
            workflow.upsert_memo({THREAD_MEMO: workflow.now().isoformat()})  # started by a stock tool: say it is one
        thread.turn_first_step = run.first_step + len(run.steps)
        thread.turn_offset = run.readers.offset()
        thread.turn_first_message = len(run.session.messages)  # prepare_turn appends the message there
        if message.tools and workflow.patched(PATCH_CLIENT_TOOLS):
            self.add_client_tools(message.tools)
        machine.prepare_turn(run.session, message.text)
        run.carry.active_s = 0.0
        run.streaming = message.stream or bool(run.request and run.request.stream)  # asked per turn (astream)
        run.status = "running"
        run.prompt = message.text
        self.publisher.progressed = True
        self.publisher.publish()
        run.emit(StreamChunk(type="event", name="turn", data={  # `at`: the turn's user message in the conversation
            "turn": thread.turns, "message_id": message.message_id, "at": len(run.session.messages) - 1}))
        self._trace_turn("start", {"rein.turn": thread.turns, "rein.message_id": message.message_id})
        return True

    def _trace_turn(self, event: str, attributes: dict[str, object]) -> None:
        """Tell rein's tracing (when the worker traces) that a turn opens or ends: each turn is a trace of its own.
        A workflow extern function: no command, nothing recorded; the spans come from a replay-safe tracer."""
        trace = workflow.extern_functions().get(TURN_TRACE)
        if trace is not None:
            trace(event, attributes)

    def add_client_tools(self, tools: list[ToolSpec]) -> None:
        """A message's client tools join its turn's (the agent's own tool of a name wins)."""
        run = self.run
        thread = run.thread
        assert thread is not None
        own = {t.spec.name for t in run.agent.tools} if run.agent is not None else set()
        threads.add_client_tools(thread, tools, own)

    def stop_if_thread_spent(self) -> None:
        """The thread's own budget (LoopConfig.thread_max_*) is spent: the turn under way stops with `budget`."""
        run = self.run
        thread = run.thread
        if thread is not None and thread.open and not run.session.done and threads.spent(thread, run.session.usage, run.config):
            run.session.done, run.session.stop_reason = True, "budget"

    def take_steering(self, finished: str | None) -> bool:
        """Steering messages join the turn before its next model call; True when they did. `finished`: the
        turn's stop reason when it just ended (only an answered turn goes on with them)."""
        run = self.run
        thread = run.thread
        if thread is None or not thread.steering or run.interrupt is not None:
            return False
        if finished is not None and finished != "done":
            return False
        if finished is None and run.session.stage.value != "call_model":
            return False  # tool calls under way finish first
        for waiting in thread.steering:
            if waiting.tools and workflow.patched(PATCH_CLIENT_TOOLS):
                self.add_client_tools(waiting.tools)
        threads.join(run.session, thread.steering)
        thread.steering = []
        return True

    def end_turn(self) -> None:
        """The turn ended: the thread is idle, a waiting client hears it (a pause), readers see it."""
        run = self.run
        thread = run.thread
        assert thread is not None
        threads.end_turn(thread, run.session.usage, threads.turn_output(run.session, thread))
        threads.keep_outcome(thread, self.publisher.outcome().model_dump(mode="json"))
        run.turns_in_run += 1
        run.status = "idle"
        run.carry.pause += 1
        self.publisher.publish()
        run.emit(StreamChunk(type="event", name="turn_end", finish_reason=run.session.stop_reason,
                               usage=run.session.usage, data={"turn": thread.turns}))
        self._trace_turn("end", {"rein.stop_reason": run.session.stop_reason or "done",
                                 "gen_ai.usage.input_tokens": run.session.usage.input_tokens,
                                 "gen_ai.usage.output_tokens": run.session.usage.output_tokens})

    def view(self) -> ThreadView:
        """The `rein.thread` query's answer."""
        run = self.run
        thread = run.thread or ThreadState()
        return ThreadView(
            thread_id=run.workflow_id, agent=run.agent_key or (run.input.agent if run.input else ""),
            status=self.publisher.status_view().status, turns=thread.turns, open=thread.open, queued=thread.queued,
            steering=thread.steering, usage=thread.usage + (run.session.usage if thread.open else type(thread.usage)()),
            last_output=thread.last_output, turn_first_step=thread.turn_first_step,
            client_tools=[t.name for t in thread.client_tools], turn_offset=thread.turn_offset, offset=run.readers.offset(),
            state=thread.state if thread.state is not None else {}, state_version=thread.state_version,
        )

"""Waiting for people: an interrupt pauses the run until a fitting decision, the approval timeout
(a denial), cancellation, or a pile of signals (the run continues as new, still waiting).
Also rein's own `rein.wait` update, with which clients wait until a run pauses or ends."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ApplicationError
from temporalio.workflow import HandlerUnfinishedPolicy

with workflow.unsafe.imports_passed_through():
    from rein.core import machine
    from rein.core.config import LoopConfig
    from rein.core.contract import WAIT_UPDATE, WAITING_STATUS, RunOutcome, WaitRequest
    from rein.core.ir import StreamChunk
    from rein.core.result import Interrupt
    from rein.core.summaries import waiting_summary

from rein.workflows.options import seconds
from rein.workflows.patches import PATCH_WAITING_TIMER
from rein.workflows.state import RunState

WAITING_TIMER_S = 30 * 24 * 3600.0
"""A run waits for a person on a timer whose summary says for what, since when, and the commands that
answer: the UI's timeline, the first thing a run's page shows. Without an approval timeout the timer is
this long and starts again when it fires."""
MAX_PARKED_WAITS = 6
"""`rein.wait` updates parked at once; older ones are released so the server's in-flight limit
(10 per run) always leaves room for new waits and for the decision updates."""

class Waiting(RunState):
    """The wait for a person, its timeout, and the client's wait update."""

    async def _wait_for_human(self, interrupt: Interrupt, config: LoopConfig, resumed: bool = False) -> None:
        """Pause until a fitting signal arrives (or the approval timeout, which denies).

        `resumed`: the predecessor run already paused here (same pause number); a fitting
        decision may even have arrived before this run got here. While waiting, a pile of
        signals continues the run as new (still waiting).
        """
        self.interrupt = interrupt
        self.status = WAITING_STATUS[interrupt.type]
        self.session.stop_reason = "interrupted"
        if not resumed:
            self.carry.pause += 1
        self.publisher.publish()
        if not resumed:  # the predecessor already published it to the stream it handed over
            self.emit(StreamChunk(
                type="interrupt", name=interrupt.type, data=interrupt.model_dump(mode="json"),
                finish_reason="interrupted", usage=self.session.usage,
            ))
        await self.child_runs.tell_parent()
        timeout = seconds(config.approval_timeout_s) if interrupt.type != "error" and config.approval_timeout_s else None
        if timeout is not None and self.carry.wait_deadline is None:
            self.carry.wait_deadline = workflow.time() + timeout.total_seconds()
        shown = self._waiting_summary(interrupt) if workflow.patched(PATCH_WAITING_TIMER) else None
        while True:
            remaining = None if self.carry.wait_deadline is None else self.carry.wait_deadline - workflow.time()
            timer, summary = None, None
            if shown is not None:
                timer, summary = seconds(remaining if remaining is not None else WAITING_TIMER_S), shown
            elif remaining is not None:
                timer, summary = seconds(remaining), f"{interrupt.type} timeout"
            try:
                if remaining is not None and remaining <= 0:
                    raise TimeoutError
                await workflow.wait_condition(
                    lambda: self.woken or self.cancel_reason is not None or self.continuation.signals_piled_up(),
                    timeout=timer, timeout_summary=summary,
                )
            except TimeoutError:
                if remaining is None:
                    continue  # only the timer that shows the wait: it waits on
                self._time_out(interrupt, timeout.total_seconds() if timeout else 0)
                break
            except asyncio.CancelledError:
                if not self.cancelled_natively():
                    raise
                break
            if self.woken or self.cancel_reason is not None:
                break
            await self.continuation.continue_as_new(waiting=interrupt)
        self._stop_waiting()
        await self.child_runs.tell_parent()

    def _waiting_summary(self, interrupt: Interrupt) -> str:
        since = self.waiting_since or workflow.now()
        self.waiting_since = since
        return waiting_summary(interrupt, self.session.pending_tool_calls, workflow.info().workflow_id, since)

    def _stop_waiting(self) -> None:
        self.waiting_since = None
        self.woken = False
        self.carry.wait_deadline = None
        self.session.stop_reason = None
        self.interrupt = None
        self.status = "running"

    def _time_out(self, interrupt: Interrupt, timeout_s: float) -> None:
        reason = f"no decision within {timeout_s:g} seconds"
        if interrupt.type == "need_approval":
            machine.decide(self.session, False, approver="timeout", reason=reason, input_tools=self.input_tools)
        elif interrupt.type == "need_input":
            machine.answer(self.session, f"No answer: {reason}.", approver="timeout", input_tools=self.input_tools)

    @workflow.update(
        name=WAIT_UPDATE,
        unfinished_policy=HandlerUnfinishedPolicy.ABANDON,
        description="rein's client: wait until the run pauses or ends",
    )
    async def wait(self, request: WaitRequest) -> RunOutcome:
        ticket = self.tickets
        self.tickets += 1
        self.parked.append(ticket)
        while len(self.parked) > MAX_PARKED_WAITS:
            self.released.add(self.parked.pop(0))
        try:
            await workflow.wait_condition(
                lambda: self._waited(request) or self.ended or ticket in self.released or self.continuation.rolling)
        finally:
            if ticket in self.parked:
                self.parked.remove(ticket)
        if ticket in self.released:
            self.released.discard(ticket)
            raise ApplicationError("newer waits replaced this one; wait again", type="WaitReleased")
        if self.status == "failed":
            raise ApplicationError("the run failed; its result carries the error", type="RunFailed")
        if not self._waited(request) and not self.ended:
            raise ApplicationError("the run continues as new; wait on its latest run", type="ContinuedAsNew")
        ended = self.carry.thread.ended.get(request.turn) if self.carry.thread is not None else None
        return RunOutcome.model_validate(ended) if ended is not None else self.publisher.outcome()

    def _waited(self, request: WaitRequest) -> bool:
        """What the client waits for has happened: the run paused past `after_pause`; for a thread's `turn`,
        that turn ended or waits for a person (a later turn may be under way by then)."""
        thread = self.carry.thread
        if not request.turn or thread is None:
            return self.carry.pause > request.after_pause
        if request.turn in thread.ended or thread.turns > request.turn:
            return True
        return thread.turns == request.turn and (not thread.open or self.interrupt is not None)

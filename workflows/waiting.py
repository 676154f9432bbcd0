"""Waiting for people: an interrupt pauses the run until a fitting decision, the approval timeout
(a denial), cancellation, or a pile of signals (the run continues as new, still waiting).
Also rein's own `rein.wait` update, with which clients wait until a run pauses or ends."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from rein.core import machine
    from rein.core.config import LoopConfig
    from rein.core.contract import WAITING_STATUS, RunOutcome, WaitRequest
    from rein.core.ir import StreamChunk
    from rein.core.result import Interrupt
    from rein.core.summaries import waiting_summary
    from rein.core.waits import wait_id

from rein.workflows.options import seconds
from rein.workflows.patches import PATCH_TURN_WAIT, PATCH_WAITING_TIMER

WAITING_TIMER_S = 30 * 24 * 3600.0
"""A run waits for a person on a timer whose summary says for what, since when, and the commands that
answer: the UI's timeline, the first thing a run's page shows. Without an approval timeout the timer is
this long and starts again when it fires."""
MAX_PARKED_WAITS = 6
"""`rein.wait` updates parked at once; older ones are released so the server's in-flight limit
(10 per run) always leaves room for new waits and for the decision updates."""

if TYPE_CHECKING:
    from rein.workflows.children import ChildRuns
    from rein.workflows.continuation import Continuation
    from rein.workflows.inbox import Inbox
    from rein.workflows.publishing import Publisher
    from rein.workflows.state import RunState


class Waiting:
    """The wait for a person, its timeout, and the client's wait update (its handler: workflows/handlers.py).
    A collaborator of the loop, on its state."""

    def __init__(self, run: RunState, publisher: Publisher, child_runs: ChildRuns, continuation: Continuation, inbox: Inbox) -> None:
        self.run = run
        self.publisher = publisher
        self.child_runs = child_runs
        self.continuation = continuation
        self.inbox = inbox

    async def wait_for_human(self, interrupt: Interrupt, config: LoopConfig, resumed: bool = False) -> None:
        """Pause until a fitting signal arrives (or the approval timeout, which denies).

        `resumed`: the predecessor run already paused here (same pause number); a fitting
        decision may even have arrived before this run got here. While waiting, a pile of
        signals continues the run as new (still waiting).
        """
        run = self.run
        inbox = not resumed and self.inbox.on()
        if inbox and interrupt.type == "need_approval" and await self.inbox.rules_decide():
            return  # the rules decided every call: nobody waits
        interrupt = self._announce(interrupt, resumed)
        await self.child_runs.tell_parent()
        timeout = seconds(config.approval_timeout_s) if interrupt.type != "error" and config.approval_timeout_s else None
        if timeout is not None and run.carry.wait_deadline is None:
            run.carry.wait_deadline = workflow.time() + timeout.total_seconds()
        shown = self._waiting_summary(interrupt) if workflow.patched(PATCH_WAITING_TIMER) else None
        if inbox:
            self.inbox.show(interrupt, run.waiting_since or workflow.now())
        while True:
            remaining = None if run.carry.wait_deadline is None else run.carry.wait_deadline - workflow.time()
            timer, summary = None, None
            if shown is not None:
                timer, summary = seconds(remaining if remaining is not None else WAITING_TIMER_S), shown
            elif remaining is not None:
                timer, summary = seconds(remaining), f"{interrupt.type} timeout"
            try:
                if remaining is not None and remaining <= 0:
                    raise TimeoutError
                await workflow.wait_condition(
                    lambda: run.woken or run.cancel_reason is not None or self.continuation.signals_piled_up()
                    or self.inbox.due(interrupt),
                    timeout=timer, timeout_summary=summary,
                )
            except TimeoutError:
                if remaining is None:
                    continue  # only the timer that shows the wait: it waits on
                self._time_out(interrupt, timeout.total_seconds() if timeout else 0)
                break
            except asyncio.CancelledError:
                if not run.cancelled_natively():
                    raise
                break
            if run.woken or run.cancel_reason is not None:
                break
            if self.inbox.due(interrupt):  # a rule was added: the run's own check may decide its calls
                run.woken = await self.inbox.recheck() or run.woken
                if run.woken or run.cancel_reason is not None:
                    break
                continue
            await self.continuation.continue_as_new(waiting=interrupt)
        self.stop_waiting()
        await self.child_runs.tell_parent()

    def _announce(self, interrupt: Interrupt, resumed: bool) -> Interrupt:
        """The wait begins: its id (a new pause, or the predecessor's when `resumed`), the run's status, and the
        stream's `interrupt` chunk (the predecessor already published it to the stream it handed over)."""
        run = self.run
        if not resumed:
            run.carry.pause += 1
        if interrupt.wait is None:  # a continuation keeps its predecessor's wait id
            interrupt = interrupt.model_copy(update={"wait": wait_id(workflow.info().run_id, run.carry.pause)})
        run.interrupt = interrupt
        run.status = WAITING_STATUS[interrupt.type]
        run.session.stop_reason = "interrupted"
        self.publisher.publish()
        if not resumed:
            calls = machine.waiting_on(run.session, interrupt.type, run.answered_outside())
            run.emit(StreamChunk(  # `calls`: every call this wait is for (the Interrupt names the first and the wait)
                type="interrupt", name=interrupt.type, finish_reason="interrupted", usage=run.session.usage,
                data={**interrupt.model_dump(mode="json"), "calls": [c.model_dump(mode="json") for c in calls],
                      "client_tools": sorted(run.client_tools())},
            ))
        return interrupt

    def _waiting_summary(self, interrupt: Interrupt) -> str:
        run = self.run
        since = run.waiting_since or workflow.now()
        run.waiting_since = since
        return waiting_summary(interrupt, run.session.pending_tool_calls, workflow.info().workflow_id, since)

    def stop_waiting(self) -> None:
        run = self.run
        self.inbox.clear()
        run.waiting_since = None
        run.woken = False
        run.carry.wait_deadline = None
        run.session.stop_reason = None
        run.interrupt = None
        run.status = "running"

    def _time_out(self, interrupt: Interrupt, timeout_s: float) -> None:
        run = self.run
        reason = f"no decision within {timeout_s:g} seconds"
        if interrupt.type == "need_approval":
            machine.decide(run.session, False, approver="timeout", reason=reason, input_tools=run.answered_outside(),
                           via="timeout", at=workflow.now().isoformat())
        elif interrupt.type == "need_input":
            machine.answer(run.session, f"No answer: {reason}.", approver="timeout", input_tools=run.answered_outside(),
                           via="timeout", at=workflow.now().isoformat())

    def _waited(self, request: WaitRequest, exact: bool) -> bool:
        """What the client waits for has happened: the run paused past `after_pause`; for a thread's `turn`,
        that turn ended or waits for a person (a later turn may be under way by then). `exact`: a wait for a person
        counts only past `after_pause` (the one a steer joined is not its outcome)."""
        run = self.run
        thread = run.carry.thread
        if not request.turn or thread is None:
            return run.carry.pause > request.after_pause
        if request.turn in thread.ended or thread.turns > request.turn:
            return True
        if thread.turns != request.turn:
            return False
        waits = run.interrupt is not None and (not exact or run.carry.pause > request.after_pause)
        return not thread.open or waits

    async def wait(self, request: WaitRequest) -> RunOutcome:
        """The `rein.wait` update: until the run paused past `request.after_pause` (or a thread's turn ended)."""
        run = self.run
        exact = bool(request.turn) and run.carry.thread is not None and workflow.patched(PATCH_TURN_WAIT)
        ticket = run.tickets
        run.tickets += 1
        run.parked.append(ticket)
        while len(run.parked) > MAX_PARKED_WAITS:
            run.released.add(run.parked.pop(0))
        try:
            await workflow.wait_condition(
                lambda: self._waited(request, exact) or run.ended or ticket in run.released or self.continuation.rolling)
        finally:
            if ticket in run.parked:
                run.parked.remove(ticket)
        if ticket in run.released:
            run.released.discard(ticket)
            raise ApplicationError("newer waits replaced this one; wait again", type="WaitReleased")
        if run.status == "failed":
            raise ApplicationError("the run failed; its result carries the error", type="RunFailed")
        if not self._waited(request, exact) and not run.ended:
            raise ApplicationError("the run continues as new; wait on its latest run", type="ContinuedAsNew")
        ended = run.carry.thread.ended.get(request.turn) if run.carry.thread is not None else None
        return RunOutcome.model_validate(ended) if ended is not None else self.publisher.outcome()

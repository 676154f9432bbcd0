"""Continue-as-new: a long run (or a waiting run with many signals) starts a fresh history with
the same Session; the successor takes over before any of its handlers runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from rein.core.contract import WAITING_STATUS, AgentInput
    from rein.core.digest import EMPTY
    from rein.core.result import Interrupt
    from rein.core.threads import TURNS_PER_RUN

if TYPE_CHECKING:
    from rein.workflows.publishing import Publisher
    from rein.workflows.state import RunState

CONTINUE_AS_NEW_MAX_BYTES = 1_500_000
"""Without external storage: below Temporal's 2 MB payload limit, with room for encoding overhead."""
STREAM_KEEP_ON_CONTINUE = 100
"""Stream items handed to the next run on continue-as-new; older ones are truncated."""
SIGNALS_BEFORE_CONTINUE_AS_NEW = 1000
SIGNAL_BYTES_BEFORE_CONTINUE_AS_NEW = 4_000_000
"""A waiting run continues as new after this many signals and updates (or bytes of them) in one history."""

class Continuation:
    """When and how a run continues as new, and how its successor restores the state (or a reset run, its
    clock): a collaborator of the loop, on its state."""

    def __init__(self, run: RunState, publisher: Publisher) -> None:
        self.run = run
        self.publisher = publisher
        self.cannot_continue_as_new = False
        """The Session is too large for a continuation's input: the run keeps its history."""
        self.rolling = False
        """Set once the run has decided to continue as new (waiting handlers let go)."""
        self.action_at = workflow.time()
        """Workflow time the loop's current action started (each iteration publishes its progress first)."""
        self.was_reset = False
        workflow.register_random_seed_callback(self._reseeded)

    def action_starts(self) -> None:
        """A loop action starts: its progress is published and its start noted (for a reset run's clock)."""
        self.action_at = workflow.time()
        self.publisher.publish_progress()

    def _reseeded(self, _seed: int) -> None:
        """Temporal reset this run (`rein rewind`, `temporal workflow reset`): the SDK reseeds the workflow's
        random in the first task after the reset point, and again wherever that history is replayed. Called
        while the task's jobs are applied, before workflow code resumes (no workflow clock yet)."""
        self.was_reset = True

    def _discount_reset(self) -> None:
        """The time from the start of the action under way at the reset point (whose result the reset run
        reuses) to the first task after the reset is not active time: without this, a run rewound an hour
        after that step stops at once for `timeout_s`. The loop adds the time since its own `started`, so the
        gap comes off `active_s` (below zero for a moment, if need be)."""
        if self.was_reset:
            self.was_reset = False
            self.run.carry.active_s -= max(0.0, workflow.time() - self.action_at)

    def restore(self, request: AgentInput) -> None:
        """Take over from the predecessor: `run.carry` is already its RunCarry; what it holds only as a
        hand-over (the step count, the wait it was in, what the worker was sent) becomes this run's."""
        run = self.run
        assert request.session is not None
        carry = run.carry
        run.session = request.session
        run.first_step = carry.step_count
        run.input_tools = frozenset(carry.input_tools)
        if carry.sent_digest is not None and carry.sent_messages <= len(run.session.messages):
            run.sent_conversation = carry.conversation
            run.produced = set(carry.produced)
        else:  # send the whole conversation again
            carry.sent_messages, carry.sent_digest = 0, EMPTY
        if carry.interrupt is not None:
            run.resuming = run.interrupt = carry.interrupt
            run.status = WAITING_STATUS[carry.interrupt.type]
            run.session.stop_reason = "interrupted"
        else:
            carry.wait_deadline = None

    def signals_piled_up(self) -> bool:
        """While a run waits only signals and updates grow its history; counted here, not read from
        the history length, so replay decides the same wherever a local activity resolves."""
        run = self.run
        if self.cannot_continue_as_new or run.request is None:
            return False
        limit = run.request.continue_as_new_after or SIGNALS_BEFORE_CONTINUE_AS_NEW
        return run.signals_in_run >= limit or run.signal_bytes_in_run >= SIGNAL_BYTES_BEFORE_CONTINUE_AS_NEW

    def is_due(self) -> bool:
        run = self.run
        self._discount_reset()  # asked first in every iteration of the loop, before it reads the time
        if self.cannot_continue_as_new or run.request is None or run.held_results:
            return False
        if self._turns_piled_up():
            return True
        info = workflow.info()
        if run.request.continue_as_new_after is not None:
            return info.get_current_history_length() >= run.request.continue_as_new_after
        return info.is_continue_as_new_suggested()

    def _turns_piled_up(self) -> bool:
        """A thread between turns that took TURNS_PER_RUN turns in this history: continue as new now."""
        thread = self.run.carry.thread
        return thread is not None and not thread.open and self.run.turns_in_run >= TURNS_PER_RUN

    async def continue_as_new(self, waiting: Interrupt | None = None) -> None:
        """Start a fresh history with the same Session, once handlers finish; clients re-attach.

        While waiting for a person, the successor waits again at the same pause number (see
        `restore`, which runs before any of its handlers).
        """
        limit = self.run.agent.max_payload_bytes if self.run.agent else CONTINUE_AS_NEW_MAX_BYTES
        if len(self._successor(waiting).model_dump_json()) > limit:
            # Temporal (or the payload store) would refuse a larger input: keep this history.
            workflow.logger.warning("Session too large to continue as new; the run keeps its history")
            self.cannot_continue_as_new = True
            return
        self.rolling = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        # Built after the handlers finished, so nothing they changed is left behind.
        workflow.continue_as_new(self._successor(waiting))  # the converter writes its JSON: no dict copy

    def _successor(self, waiting: Interrupt | None) -> AgentInput:
        run = self.run
        assert run.request is not None
        carry = run.carry.model_copy(update={
            "step_count": run.first_step + len(run.steps),
            "sent_digest": run.carry.sent_digest if run.sent_conversation == run.carry.conversation else None,
            "produced": sorted(run.produced),
            "input_tools": sorted(run.input_tools),
            "interrupt": waiting,
            "wait_deadline": run.carry.wait_deadline if waiting is not None else None,
            "agent_version": run.agent.version if run.agent else "",
            "approval_tools": sorted(run.approval_tools),
            "permission": run.config.permission if run.config and run.agent and run.agent.version else "",
        })
        session = run.session
        if waiting is not None:
            session = session.model_copy(update={"stop_reason": None})
        stream_state = run.stream.get_state()
        stream_state.base_offset += max(0, len(stream_state.log) - STREAM_KEEP_ON_CONTINUE)
        stream_state.log = stream_state.log[-STREAM_KEEP_ON_CONTINUE:]
        return run.request.model_copy(update={
            "prompt": None, "session": session, "carry": carry, "stream": run.streaming, "stream_state": stream_state,
        })

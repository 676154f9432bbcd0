"""Continue-as-new: a long run (or a waiting run with many signals) starts a fresh history with
the same Session; the successor takes over before any of its handlers runs."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from rein.core.contract import WAITING_STATUS, AgentInput
    from rein.core.digest import EMPTY
    from rein.core.result import Interrupt
    from rein.core.threads import TURNS_PER_RUN

from rein.workflows.state import RunState

CONTINUE_AS_NEW_MAX_BYTES = 1_500_000
"""Without external storage: below Temporal's 2 MB payload limit, with room for encoding overhead."""
STREAM_KEEP_ON_CONTINUE = 100
"""Stream items handed to the next run on continue-as-new; older ones are truncated."""
SIGNALS_BEFORE_CONTINUE_AS_NEW = 1000
SIGNAL_BYTES_BEFORE_CONTINUE_AS_NEW = 4_000_000
"""A waiting run continues as new after this many signals and updates (or bytes of them) in one history."""

class Continuation(RunState):
    """When and how a run continues as new, and how its successor restores the state (or a reset run, its clock)."""

    def __init__(self, request: AgentInput | None) -> None:
        super().__init__(request)
        self.action_at = workflow.time()
        """Workflow time the loop's current action started (each iteration publishes its progress first)."""
        self.was_reset = False
        workflow.register_random_seed_callback(self._reseeded)

    def _publish_progress(self) -> None:
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
            self.carry.active_s -= max(0.0, workflow.time() - self.action_at)

    def _restore(self, request: AgentInput) -> None:
        """Take over from the predecessor: `self.carry` is already its RunCarry; what it holds only as a
        hand-over (the step count, the wait it was in, what the worker was sent) becomes this run's."""
        assert request.session is not None
        carry = self.carry
        self.session = request.session
        self.first_step = carry.step_count
        self.input_tools = frozenset(carry.input_tools)
        if carry.sent_digest is not None and carry.sent_messages <= len(self.session.messages):
            self.sent_conversation = carry.conversation
            self.produced = set(carry.produced)
        else:  # send the whole conversation again
            carry.sent_messages, carry.sent_digest = 0, EMPTY
        if carry.interrupt is not None:
            self.resuming = self.interrupt = carry.interrupt
            self.status = WAITING_STATUS[carry.interrupt.type]
            self.session.stop_reason = "interrupted"
        else:
            carry.wait_deadline = None

    def _signals_piled_up(self) -> bool:
        """While a run waits only signals and updates grow its history; counted here, not read from
        the history length, so replay decides the same wherever a local activity resolves."""
        if self.cannot_continue_as_new or self.request is None:
            return False
        limit = self.request.continue_as_new_after or SIGNALS_BEFORE_CONTINUE_AS_NEW
        return self.signals_in_run >= limit or self.signal_bytes_in_run >= SIGNAL_BYTES_BEFORE_CONTINUE_AS_NEW

    def _history_is_long(self) -> bool:
        self._discount_reset()  # asked first in every iteration of the loop, before it reads the time
        if self.cannot_continue_as_new or self.request is None or self.held_results:
            return False
        if self._turns_piled_up():
            return True
        info = workflow.info()
        if self.request.continue_as_new_after is not None:
            return info.get_current_history_length() >= self.request.continue_as_new_after
        return info.is_continue_as_new_suggested()

    def _turns_piled_up(self) -> bool:
        """A thread between turns that took TURNS_PER_RUN turns in this history: continue as new now."""
        thread = self.carry.thread
        return thread is not None and not thread.open and self.turns_in_run >= TURNS_PER_RUN

    async def _continue_as_new(self, waiting: Interrupt | None = None) -> None:
        """Start a fresh history with the same Session, once handlers finish; clients re-attach.

        While waiting for a person, the successor waits again at the same pause number (see
        `_restore`, which runs before any of its handlers).
        """
        limit = self.agent.max_payload_bytes if self.agent else CONTINUE_AS_NEW_MAX_BYTES
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
        assert self.request is not None
        carry = self.carry.model_copy(update={
            "step_count": self.first_step + len(self.steps),
            "sent_digest": self.carry.sent_digest if self.sent_conversation == self.carry.conversation else None,
            "produced": sorted(self.produced),
            "input_tools": sorted(self.input_tools),
            "interrupt": waiting,
            "wait_deadline": self.carry.wait_deadline if waiting is not None else None,
            "agent_version": self.agent.version if self.agent else "",
            "approval_tools": sorted(self.approval_tools),
            "permission": self.config.permission if self.config and self.agent and self.agent.version else "",
        })
        session = self.session
        if waiting is not None:
            session = session.model_copy(update={"stop_reason": None})
        stream_state = self.stream.get_state()
        stream_state.base_offset += max(0, len(stream_state.log) - STREAM_KEEP_ON_CONTINUE)
        stream_state.log = stream_state.log[-STREAM_KEEP_ON_CONTINUE:]
        return self.request.model_copy(update={
            "prompt": None, "session": session, "carry": carry, "stream": self.streaming, "stream_state": stream_state,
        })

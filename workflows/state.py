"""RunState: what an AgentWorkflow run holds, and the few helpers every part of the loop uses.

The work is split by concern into collaborators that hold this state (`self.run`): publisher, stages, child_runs,
decisions, waiting, inbox, threads, lean_start, worker_steps, agent_changes, continuation. RunParts
(rein.workflows.parts) builds them on it, each given the others it calls, so this module imports none of them;
`rein.workflows.loop.AgentLoop` drives them. What outlives a history is one model, RunCarry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from rein.core.config import LoopConfig
    from rein.core.contract import AgentDescription, AgentInput, RunCarry, RunOutcome, RunStatus, RunStatusView
    from rein.core.digest import EMPTY
    from rein.core.events import TOPIC, StreamEvent
    from rein.core.ir import StreamChunk, ToolResult, Usage
    from rein.core.result import Interrupt, Step
    from rein.core.session import Session
    from rein.core.threads import ThreadState

from rein.workflows.readers import StreamReaders
from rein.workflows.window import Start

if TYPE_CHECKING:
    from datetime import datetime

    from rein.workflows.what_if import WhatIf

T = TypeVar("T")


class RunState:
    """The run's state; handlers and stages read and change it (workflow code: one thread, no locks)."""

    def __init__(self, request: AgentInput | None) -> None:
        # Long by design: one line per attribute, each with what it means.
        self.input = request
        """The input, validated once (a continuation's carries the whole conversation)."""
        handed = request.carry if request is not None and request.session is not None else None
        self.carry = handed.model_copy() if handed is not None else RunCarry(sent_digest=EMPTY)
        if request is not None and request.thread and self.carry.thread is None:
            self.carry.thread = ThreadState()  # before any handler: the first message comes with the start
        self.turns_in_run = 0
        """A thread's turns ended in this history (it continues as new after TURNS_PER_RUN)."""
        self.model_call_under_way = False
        self.cut = False
        """An `interrupt` message asked to cut the model call under way (rein.workflows.threads)."""
        """What of the run outlives its history: read and changed in place here (its pause, active time, the
        conversation the worker has been sent...), and handed on as it is as the continuation's input
        (rein.workflows.continuation). A new carried field is one field of RunCarry, nothing else."""
        # The run's stream (temporalio.contrib.workflow_streams): text, steps, interrupts, events.
        self.stream = WorkflowStream(self.input.stream_state if self.input is not None else None)
        self.stream_topic = self.stream.topic(TOPIC)
        self.readers = StreamReaders(self.stream)
        self.streaming = False
        """Model calls always publish text live (the input's `stream`, or an older client's STREAM_SIGNAL);
        otherwise only while someone reads the stream (`live_text`)."""
        self.model_calls = 0
        self.parent_call: str | None = None
        """This run is an agent-as-tool call of a parent run: the parent's tool call id."""
        self.children: dict[str, str] = {}
        """Agent-as-tool calls running as child runs: tool call id -> child workflow id."""
        self.child_spend: dict[str, Usage] = {}
        """What each running child run last reported it has spent (counted in this run's usage)."""
        self.family_usage: bool | None = None
        """workflow.patched(PATCH_FAMILY_USAGE), once asked."""
        self.stopped_children: set[str] = set()
        """Child runs told that the family's budget is spent (each is told once)."""
        self.family_spent = False
        """The parent run said the family's budget is spent: this child run stops (`budget`)."""
        self.child_wait: tuple[str, RunStatusView] | None = None
        """A child run waiting for a person: (its workflow id, its status). The parent shows it."""
        self.session = Session()
        self.steps: list[Step] = []
        """The steps this run recorded; earlier runs of a continue-as-new chain hold theirs."""
        self.first_step = 0
        self.status: RunStatus = "running"
        self.interrupt: Interrupt | None = None
        self.stuck = ""
        """What a bug in rein's activity code holds up, and why, while the run waits for a fixed build (rein.core.failures)."""
        self.woken = False
        self.cancel_reason: str | None = None
        self.agent: AgentDescription | None = None
        self.agent_key = ""
        """The name the worker knows the agent by (the input's `agent`)."""
        self.input_tools: frozenset[str] = frozenset()
        self.final: RunOutcome | None = None

        self.sent_conversation = ""
        """The conversation token they belong to (a compaction starts a new one)."""
        self.produced: set[str] = set()
        """Hashes of messages the worker produced since the last model call (sent as references)."""
        self.reply_calls: set[str] = set()
        """call_hash of each tool call in the last model reply this run received: run_tool names
        those by reference (the reply is in this run's history); any other call travels whole."""
        self.prompt = ""
        self.last_ignored = ""
        self.config: LoopConfig | None = None
        self.approval_tools: frozenset[str] = frozenset()
        self.reply_version = ""
        """The agent version the last model call was sent with (its reply's tool calls run under it)."""
        self.held_results: dict[str, ToolResult] = {}
        """Results of a batch the agent changed under (by call id), until the batch closes."""
        self.first = Start.LEAN
        """How the build that completed the run's first task started it (rein.workflows.window), read there."""
        self.lean = False
        """The run started lean (rein.workflows.start): it also publishes its first status lazily (visibility)."""
        self.start_interrupt: Interrupt | None = None
        """A lean start's first model call failed: the run waits for `retry` before its loop goes on."""
        self.ended = False
        self.parked: list[int] = []
        self.released: set[int] = set()
        self.tickets = 0
        self.request: AgentInput | None = None
        self.step_observer: Callable[[list[Step]], None] | None = None
        """Told each batch of steps as it is recorded: a client replaying a history watches it (rein.durable.fork)."""
        self.what_if: WhatIf | None = None
        """A what-if run's reuse of its recorded run (AgentInput.eval), once the agent is known."""
        self.resuming: Interrupt | None = None
        """The wait a predecessor run was in when it continued as new."""
        self.waiting_since: datetime | None = None  # when this wait began (a continuation restarts it)
        self.signals_in_run = 0
        self.signal_bytes_in_run = 0
        self.continued_from = workflow.info().continued_run_id
        self.workflow_id = workflow.info().workflow_id
        """Kept here: queries of a replayed history run outside the workflow's context."""

    def cancelled_natively(self) -> bool:
        """Temporal cancellation of the workflow (client `cancel()`, the UI, the CLI) arrived as
        asyncio.CancelledError: treat it as the `cancel` signal. False: re-raise (cache eviction)."""
        requested = workflow.cancellation_reason()  # None for cache eviction and inner cancels
        if requested is None:
            return False
        if self.cancel_reason is None:
            self.cancel_reason = requested or "workflow cancellation requested"
        return True

    async def unless_cancelled(self, work: Awaitable[T], cuttable: bool = False) -> T | None:
        """The result of `work`, or None as soon as the run is cancelled (its activities are cancelled too);
        `cuttable`: also once an `interrupt` message cuts it (rein.workflows.threads)."""
        task = asyncio.ensure_future(work)
        try:
            await workflow.wait_condition(lambda: task.done() or self.cancel_reason is not None or (cuttable and self.cut))
        except asyncio.CancelledError:
            if not self.cancelled_natively():
                raise
        if task.done():
            return task.result()
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, ActivityError):
            pass
        return None

    @property
    def thread(self) -> ThreadState | None:
        """A thread's turns and messages (rein.core.threads); None for a run."""
        return self.carry.thread

    def client_tools(self) -> frozenset[str]:
        """The names of the tools the thread's turn under way brought for its client to run (rein.core.threads)."""
        thread = self.carry.thread
        return frozenset(t.name for t in thread.client_tools) if thread is not None and thread.client_tools else frozenset()

    def answered_outside(self) -> frozenset[str]:
        """Tools whose calls take their result from outside the run: the agent's questions for a person
        (`input_tools`) and the turn's client tools."""
        client = self.client_tools()
        return self.input_tools | client if client else self.input_tools

    def ignore(self, name: str, why: str) -> None:
        """A signal that does not fit: counted and logged (a child's status, a decision's signal)."""
        self.carry.ignored_signals += 1
        self.last_ignored = f"`{name}`: {why}"[:500]
        workflow.logger.warning("Ignored signal %s: %s", name, why[:500])

    def record_steps(self, steps: list[Step], details: list[dict[str, object]] | None = None) -> None:
        """Keep the steps and put each on the stream; `details` (one per step) go beside the Step's fields on the
        stream only (a tool step's call id and result)."""
        for number, step in enumerate(steps):
            step.index = self.first_step + len(self.steps)
            self.steps.append(step)
            extra = details[number] if details is not None and number < len(details) else {}
            self.emit(StreamChunk(type="step", name=step.kind, data={**step.model_dump(mode="json"), **extra}))
        if self.step_observer is not None:
            self.step_observer(steps)

    def emit(self, chunk: StreamChunk, source: str = "") -> None:
        """Append to the run's stream (in memory: no command; in history only once a reader polls it)."""
        self.stream_topic.publish(StreamEvent(chunk=chunk, source=source).to_json())

    def live_text(self) -> bool:
        """Whether the next model call publishes its text as it comes: always when asked to, else
        while a reader is attached (a call started without one publishes once a reader asks)."""
        return self.streaming or self.readers.polls > 0

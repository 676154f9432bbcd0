"""AgentLoop: the durable driver of rein's pure state machine (AgentWorkflow's body).

Each model call and each tool call is an activity; each interrupt is a wait for
a signal (`approve`, `deny`, `answer`, `retry`, `cancel`). Inputs, signals and
queries are plain JSON validated here, so bad input from any client is a clear
error or an ignored signal, never a failing workflow task.

The workflow type itself is `rein.workflows.agent.AgentWorkflow`, a few lines: the sandbox
re-imports a workflow's module for every run, while this module (pure, like everything the
workflow imports) is passed through and imported once per worker.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from collections.abc import Awaitable
from collections.abc import Sequence
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.workflow import HandlerUnfinishedPolicy
from temporalio.common import RawValue, RetryPolicy, SearchAttributeKey
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, FailureError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from rein import machine
    from rein.config import LoopConfig
    from rein.contract import (
        ANSWER_UPDATE,
        APPROVE_UPDATE,
        CALL_MODEL,
        CANCEL_UPDATE,
        DENY_UPDATE,
        MAX_SECONDS,
        RETRY_UPDATE,
        DESCRIBE_AGENT,
        CHILD_SIGNAL,
        RUN_TOOL,
        STREAM_SIGNAL,
        WAIT_UPDATE,
        WAITING_STATUS,
        WORKFLOW_TYPE,
        AgentDescription,
        AgentInput,
        AnswerSignal,
        CancelSignal,
        DecisionSignal,
        DescribeInput,
        ModelCallInput,
        RunCarry,
        RunOutcome,
        RunStatus,
        RunStatusView,
        ToolCallInput,
        WaitRequest,
        apply_overrides,
    )
    from rein.digest import EMPTY, call_hash, extend, message_hash, ref
    from rein.events import TOPIC, StreamEvent
    from rein.ir import Completion, Message, StreamChunk, ToolCall, ToolResult
    from rein.result import Interrupt, Step
    from rein.session import Session
    from rein.summaries import details_for, model_summary, tool_summary

from rein.workflows import worker_steps

T = TypeVar("T")

MODEL_HEARTBEAT = timedelta(seconds=20)
COUNTER_EVERY = 5
"""Before rein-timed-counters: iterations between ReinIterations/ReinTokens refreshes."""
COUNTER_SECONDS = 10.0
"""Workflow seconds between ReinIterations/ReinTokens refreshes while the status stays the same."""
PATCH_TIMED_COUNTERS = "rein-timed-counters"
"""Since this patch the counters are refreshed every COUNTER_EVERY iterations only when COUNTER_SECONDS
have passed since the last refresh, and a run's last counters and its final status are one upsert.
Asked only where the old rule would send an upsert the new one does not: a run records the marker
(and its TemporalChangeVersion upsert) once it is that fast and long, which then saves an upsert
every COUNTER_EVERY iterations; slower or shorter runs never record it."""
CONTINUE_AS_NEW_MAX_BYTES = 1_500_000
"""Without external storage: below Temporal's 2 MB payload limit, with room for encoding overhead."""
PATCH_THROTTLED_COUNTERS = "rein-throttled-counters"
PATCH_PROMPT_CANCEL = "rein-prompt-cancel"
PATCH_NATIVE_CANCEL = "rein-native-cancel"
"""Retired patches: their behaviour is now the only one and new runs record no marker (nor its
TemporalChangeVersion upsert) for them. Histories that carry their markers still replay
(workflow.deprecate_patch while replaying); histories recorded before rein-throttled-counters
(tests/histories agent_approval_v1), or cancelled before rein-native-cancel (agent_cancel_v1),
no longer do. Since rein-native-cancel, Temporal cancellation of the workflow ends the run like
the `cancel` signal."""
PATCH_FAILED_STATUS = "rein-failed-status"
"""Since this patch, a run that fails before it knows its agent still learns the search attributes to
publish ReinStatus=failed (one extra local activity on that path only)."""
TOOL_TIMEOUT = timedelta(minutes=5)
STREAM_KEEP_ON_CONTINUE = 100
"""Stream items handed to the next run on continue-as-new; older ones are truncated."""
PAYLOAD_TOO_LARGE = "PayloadTooLarge"
SIGNALS_BEFORE_CONTINUE_AS_NEW = 1000
SIGNAL_BYTES_BEFORE_CONTINUE_AS_NEW = 4_000_000
"""A waiting run continues as new after this many signals and updates (or bytes of them) in one history."""
MAX_PARKED_WAITS = 6
"""`rein.wait` updates parked at once; older ones are released so the server's in-flight limit
(10 per run) always leaves room for new waits and for the decision updates."""
INT64_MAX = 2**63 - 1
SIGNALS = ("approve", "deny", "answer", "retry", "cancel")


class Misfit(ValueError):
    """A signal or update that does not fit the run's state or the expected shape."""


class AgentLoop:
    """Everything of AgentWorkflow but its `@workflow.defn`, `@workflow.init` and `@workflow.run`."""

    def __init__(self, *args: Any) -> None:
        self.input = _valid_input(args)
        """The input, validated once here (a continuation's carries the whole conversation)."""
        # The run's stream (temporalio.contrib.workflow_streams): text, steps, interrupts, events.
        self.stream = WorkflowStream(self.input.stream_state if self.input is not None else None)
        self.stream_topic = self.stream.topic(TOPIC)
        self.streaming = False
        """Model calls publish text live (the input's `stream`, or a reader's STREAM_SIGNAL)."""
        self.model_calls = 0
        self.parent_call: str | None = None
        """This run is an agent-as-tool call of a parent run: the parent's tool call id."""
        self.children: dict[str, str] = {}
        """Agent-as-tool calls running as child runs: tool call id -> child workflow id."""
        self.child_wait: tuple[str, RunStatusView] | None = None
        """A child run waiting for a person: (its workflow id, its status). The parent shows it."""
        self.session = Session()
        self.steps: list[Step] = []
        """The steps this run recorded; earlier runs of a continue-as-new chain hold theirs."""
        self.first_step = 0
        self.status: RunStatus = "running"
        self.interrupt: Interrupt | None = None
        self.pause = 0
        self.ignored_signals = 0
        self.woken = False
        self.cancel_reason: str | None = None
        self.agent: AgentDescription | None = None
        self.agent_key = ""
        """The name the worker knows the agent by (the input's `agent`)."""
        self.input_tools: frozenset[str] = frozenset()
        self.active_s = 0.0
        self.final: RunOutcome | None = None
        self.published: dict[str, Any] = {}
        self.counters_at = workflow.time()
        """Workflow time of the last ReinIterations/ReinTokens upsert (or of the run's start)."""
        self.progressed = False
        """An iteration ended and its counters (or a status change) are not published yet."""
        self.timed_counters: bool | None = None
        """workflow.patched(PATCH_TIMED_COUNTERS), once asked (None: not asked in this run)."""
        self.sent_messages = 0
        """How many conversation messages model-call activities have been given so far."""
        self.sent_digest = EMPTY
        """rein.digest chain digest of those messages."""
        self.sent_conversation = ""
        """The conversation token they belong to (a compaction starts a new one)."""
        self.produced: set[str] = set()
        """Hashes of messages the worker produced since the last model call (sent as references)."""
        self.reply_calls: set[str] = set()
        """call_hash of each tool call in the last model reply this run received: run_tool names
        those by reference (the reply is in this run's history); any other call travels whole."""
        self.details = ""
        self.prompt = ""
        self.last_ignored = ""
        self.cannot_continue_as_new = False
        self.conversation = ""
        """Changes when the conversation is rewritten (compaction, middleware); see ModelCallInput."""
        self.config: LoopConfig | None = None
        self.approval_tools: frozenset[str] = frozenset()
        self.ended = False
        self.parked: list[int] = []
        self.released: set[int] = set()
        self.tickets = 0
        self.request: AgentInput | None = None
        self.rolling = False
        """Set once the run has decided to continue as new (waiting handlers let go)."""
        self.resuming: Interrupt | None = None
        """The wait a predecessor run was in when it continued as new."""
        self.wait_deadline: float | None = None
        self.signals_in_run = 0
        self.signal_bytes_in_run = 0
        self.continued_from = workflow.info().continued_run_id
        """Kept here: queries of a replayed history run outside the workflow's context."""
        # A continuation takes over before any handler runs: signals and updates delivered with
        # its first task must find it as the predecessor left it (waiting, with its counters).
        if self.input is not None and self.input.carry is not None and self.input.session is not None:
            self._restore(self.input, self.input.carry)

    # ------------------------------------------------------------ main loop

    async def run(self, *args: Any) -> dict[str, Any]:
        """Guarded: whatever goes wrong in here fails the run (status `failed`), never a workflow task."""
        try:
            return await self._run(*args)
        except ApplicationError as err:
            await self._fail()
            if err.non_retryable:
                raise
            raise ApplicationError(err.message, *err.details, type=err.type, non_retryable=True) from None
        except FailureError as err:  # an activity (e.g. describe_agent) that failed for good
            await self._fail()
            cause = getattr(err, "cause", None)
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            kind = cause.type if isinstance(cause, ApplicationError) else type(err).__name__
            raise ApplicationError(message, type=kind or "RunFailed", non_retryable=True) from None
        except Exception as exc:
            await self._fail()
            workflow.logger.exception("rein workflow error")
            raise ApplicationError(
                f"rein could not continue this run: {type(exc).__name__}: {str(exc)[:500]}",
                type="ReinInternalError",
                non_retryable=True,
            ) from None

    async def _fail(self) -> None:
        """Mark the run failed where ops look (ReinStatus, `status` query) before it closes."""
        self.status = "failed"
        self.interrupt = None
        self.ended = True
        self.pause += 1
        try:
            if self.agent is None and workflow.patched(PATCH_FAILED_STATUS):
                self.agent = await workflow.execute_local_activity(
                    DESCRIBE_AGENT,
                    DescribeInput(agent=""),
                    result_type=AgentDescription,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RetryPolicy(maximum_attempts=3),
                    summary="search attributes for the failed status",
                )
            self._publish()
            self._emit(StreamChunk(type="done", finish_reason="failed", usage=self.session.usage))
        except Exception:
            workflow.logger.exception("could not publish the failed status")
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)

    async def _run(self, *args: Any) -> dict[str, Any]:
        if len(args) != 1:
            raise ApplicationError(
                f"AgentWorkflow takes exactly one input, got {len(args)}. Expected JSON like "
                '{"agent": "<registered agent name>", "prompt": "..."}',
                type="InvalidInput",
                non_retryable=True,
            )
        raw_input = args[0]
        if isinstance(raw_input, dict) and raw_input.get("carry") is not None and workflow.info().continued_run_id is None:
            raise ApplicationError(
                "Invalid AgentWorkflow input: 'carry' is rein's own continue-as-new state; a client may not send it",
                type="InvalidInput",
                non_retryable=True,
            )
        # Read the clock and patches before the local activity: a local activity may resolve in a
        # different workflow task on replay, so nothing that must replay identically follows it.
        started = workflow.time()
        if workflow.unsafe.is_replaying():
            # Histories recorded with these (retired) patches carry their markers and must see the
            # same calls; a new run records none (on replay without a marker the call adds nothing).
            workflow.deprecate_patch(PATCH_THROTTLED_COUNTERS)
            workflow.deprecate_patch(PATCH_PROMPT_CANCEL)
        self._published_at_start()
        if workflow.unsafe.is_replaying():
            workflow.deprecate_patch(PATCH_NATIVE_CANCEL)  # where it was `patched`: same command order
        request = self.input if self.input is not None else self._parse_input(raw_input)
        self.request = request
        self.streaming = self.streaming or request.stream
        self.parent_call = request.parent_call if workflow.info().parent is not None else None
        self.agent_key = request.agent
        self.agent = await self._describe(request.agent)
        config = self.config = self._config(request)
        self.input_tools = frozenset(t.spec.name for t in self.agent.tools if t.asks_human)
        self.approval_tools = frozenset(t.spec.name for t in self.agent.tools if t.requires_approval)
        if request.carry is None:
            self.session = self._initial_session(request)
        self.session.run_id = workflow.info().workflow_id  # so a resume from any process finds this run
        self.prompt = next((m.content for m in reversed(self.session.messages) if m.role == "user"), "")
        self._publish()

        while True:
            if self._history_is_long():
                self._publish_progress()
                self.active_s += workflow.time() - started
                started = workflow.time()
                await self._continue_as_new()
            elapsed = self.active_s + (workflow.time() - started)
            action = machine.next_action(self.session, config, elapsed, self.input_tools, self.approval_tools)
            if self.cancel_reason is not None and not isinstance(action, machine.Finish):
                self.session.done = True
                self.session.stop_reason = "cancelled"
                continue
            if isinstance(action, machine.Finish):
                if self.progressed and not self._fold_final_publish():
                    self._publish_progress(ending=True)
                break
            self._publish_progress()
            resumed, self.resuming = self.resuming, None
            if resumed is not None:
                if resumed.type == "error":
                    action = machine.Wait(interrupt=resumed)  # still waiting for `retry`
                if isinstance(action, machine.Wait):
                    await self._wait_for_human(action.interrupt, config, resumed=True)
                    started = workflow.time()
                    continue
                self._stop_waiting()  # a decision delivered as this run started settled the wait
            if isinstance(action, machine.CallModel) and self.agent.compaction is not None:
                await worker_steps.compact_if_due(self, action, config)
            if self.agent.middleware:
                interrupt = await worker_steps.step(self, action, config, elapsed)
                if interrupt is not None:
                    self.active_s = self.active_s + (workflow.time() - started)
                    await self._wait_for_human(interrupt, config)
                    started = workflow.time()
            elif isinstance(action, machine.Wait):
                self.active_s = elapsed
                await self._wait_for_human(action.interrupt, config)
                started = workflow.time()
            elif isinstance(action, machine.CallModel):
                interrupt = await self._call_model(action, config)
                if interrupt is not None:
                    self.active_s = self.active_s + (workflow.time() - started)
                    await self._wait_for_human(interrupt, config)
                    started = workflow.time()
            else:
                await self._run_tools(action.calls)
            self.progressed = True  # published as the next action starts (or with the final status)

        self.active_s += workflow.time() - started
        self.status = "cancelled" if self.session.stop_reason == "cancelled" else "done"
        self.interrupt = None
        self.final = self._outcome()
        self.pause += 1
        self.ended = True
        self._publish()
        self._emit(StreamChunk(type="done", finish_reason=self.final.stop_reason, usage=self.session.usage))
        self.stream.detach_pollers()  # stream readers drain the rest once the run has closed
        await self._settle()
        return self.final.model_dump(mode="json")

    def _restore(self, request: AgentInput, carry: RunCarry) -> None:
        assert request.session is not None
        self.session = request.session
        self.first_step = carry.step_count
        self.active_s = carry.active_s
        self.pause = carry.pause
        self.ignored_signals += carry.ignored_signals
        self.input_tools = frozenset(carry.input_tools)
        self.conversation = carry.conversation
        if carry.sent_digest is not None and carry.sent_messages <= len(self.session.messages):
            self.sent_messages, self.sent_digest = carry.sent_messages, carry.sent_digest
            self.sent_conversation = carry.conversation
            self.produced = set(carry.produced)
        if carry.interrupt is not None:
            self.resuming = self.interrupt = carry.interrupt
            self.status = WAITING_STATUS[carry.interrupt.type]
            self.session.stop_reason = "interrupted"
            self.wait_deadline = carry.wait_deadline

    def _signals_piled_up(self) -> bool:
        """While a run waits only signals and updates grow its history; counted here, not read from
        the history length, so replay decides the same wherever a local activity resolves."""
        if self.cannot_continue_as_new or self.request is None:
            return False
        limit = self.request.continue_as_new_after or SIGNALS_BEFORE_CONTINUE_AS_NEW
        return self.signals_in_run >= limit or self.signal_bytes_in_run >= SIGNAL_BYTES_BEFORE_CONTINUE_AS_NEW

    async def _describe(self, agent: str) -> AgentDescription:
        def describe() -> Awaitable[AgentDescription]:
            return workflow.execute_local_activity(
                DESCRIBE_AGENT,
                DescribeInput(agent=agent),
                result_type=AgentDescription,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=["UnknownAgent"]),
                summary=f"describe agent {agent}",
            )

        try:
            return await describe()
        except asyncio.CancelledError:
            if not self._cancelled_natively():
                raise
            return await describe()  # the loop then ends the run as cancelled, with the agent known

    def _cancelled_natively(self) -> bool:
        """Temporal cancellation of the workflow (client `cancel()`, the UI, the CLI) arrived as
        asyncio.CancelledError: treat it as the `cancel` signal. False: re-raise (cache eviction)."""
        requested = workflow.cancellation_reason()  # None for cache eviction and inner cancels
        if requested is None:
            return False
        if self.cancel_reason is None:
            self.cancel_reason = requested or "workflow cancellation requested"
        return True

    async def _settle(self) -> None:
        """Let signal and update handlers finish before the run returns."""
        try:
            await workflow.wait_condition(workflow.all_handlers_finished)
        except asyncio.CancelledError:
            if not self._cancelled_natively():
                raise
            await workflow.wait_condition(workflow.all_handlers_finished)

    def _history_is_long(self) -> bool:
        if self.cannot_continue_as_new or self.request is None:
            return False
        info = workflow.info()
        if self.request.continue_as_new_after is not None:
            return info.get_current_history_length() >= self.request.continue_as_new_after
        return info.is_continue_as_new_suggested()

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
        carry = RunCarry(
            step_count=self.first_step + len(self.steps),
            active_s=self.active_s,
            pause=self.pause,
            ignored_signals=self.ignored_signals,
            sent_messages=self.sent_messages,
            sent_digest=self.sent_digest if self.sent_conversation == self.conversation else None,
            produced=sorted(self.produced),
            input_tools=sorted(self.input_tools),
            interrupt=waiting,
            wait_deadline=self.wait_deadline if waiting is not None else None,
            conversation=self.conversation,
        )
        session = self.session
        if waiting is not None:
            session = session.model_copy(update={"stop_reason": None})
        stream_state = self.stream.get_state()
        stream_state.base_offset += max(0, len(stream_state.log) - STREAM_KEEP_ON_CONTINUE)
        stream_state.log = stream_state.log[-STREAM_KEEP_ON_CONTINUE:]
        return self.request.model_copy(update={
            "prompt": None, "session": session, "carry": carry, "stream": self.streaming, "stream_state": stream_state,
        })

    def _parse_input(self, raw: Any) -> AgentInput:
        try:
            if isinstance(raw, BaseModel):
                raw = raw.model_dump()
            return AgentInput.model_validate(raw)
        except (ValidationError, ValueError, TypeError) as exc:
            raise ApplicationError(
                f"Invalid AgentWorkflow input: {_short_error(exc)}. Expected JSON like "
                '{"agent": "<registered agent name>", "prompt": "..."}',
                type="InvalidInput",
                non_retryable=True,
            ) from None

    def _config(self, request: AgentInput) -> LoopConfig:
        assert self.agent is not None
        if not request.config:
            return self.agent.config
        try:
            return apply_overrides(self.agent.config, request.config, self.agent.client_overrides)
        except (ValidationError, ValueError) as exc:
            raise ApplicationError(
                f"Invalid config override: {_short_error(exc)}", type="InvalidInput", non_retryable=True
            ) from None

    def _initial_session(self, request: AgentInput) -> Session:
        assert self.agent is not None
        if request.session is None:
            return machine.new_session(request.prompt or "", self.agent.system)
        session = request.session
        if workflow.info().continued_run_id is None:
            # Only this run's own continuation may carry decisions; a client's Session may not.
            machine.forget_pending_decisions(session)
        if request.prompt is not None:
            machine.prepare_turn(session, request.prompt)
        return session

    # ------------------------------------------------------------ stages

    async def _call_model(self, action: machine.CallModel, config: LoopConfig) -> Interrupt | None:
        assert self.agent is not None
        began = workflow.time()
        self.model_calls += 1
        source = f"{workflow.info().run_id}/{self.model_calls}"
        live = self.streaming
        if self.sent_conversation != self.conversation:  # rewritten (compaction): send it whole again
            self.sent_messages, self.sent_digest, self.produced = 0, EMPTY, set()
            self.sent_conversation = self.conversation
        new = self.session.messages[self.sent_messages :]
        hashes = [message_hash(m) for m in new]
        digest = extend(self.sent_digest, hashes)
        # All produced by the worker (its reply, then the tool results): a count. Else each
        # produced one by reference, the rest whole. The digest verifies either way.
        produced = len(new) if new and all(h in self.produced for h in hashes) else 0
        entries: list[Message | str] = [] if produced else [ref(h) if h in self.produced else m for h, m in zip(hashes, new)]
        total = len(self.session.messages)
        try:
            completion = await self._unless_cancelled(workflow.execute_activity(
                CALL_MODEL,
                ModelCallInput(
                    agent=self.agent_key,
                    new_messages=entries,
                    produced=produced,
                    digest=digest,
                    stream=live,
                    stream_source=source if live else "",
                    conversation=self.conversation,
                ),
                result_type=Completion,
                start_to_close_timeout=_seconds(config.model_timeout_s),
                heartbeat_timeout=MODEL_HEARTBEAT,
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=config.model_attempts,
                ),
                summary=model_summary(self.agent.model, action.iteration),
            ))
        except ActivityError as err:
            return self._model_call_failed(err)
        if completion is None:  # cancelled while the model was answering
            return None
        if not live:  # the activity did not publish the answer as it came: publish it whole
            if completion.message.content:
                self._emit(StreamChunk(type="text", text=completion.message.content), source=source)
            if completion.message.tool_calls:
                self._emit(StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls))
        self.sent_messages, self.sent_digest = total, digest
        self.produced = {message_hash(completion.message)}
        self.reply_calls = {call_hash(c) for c in completion.message.tool_calls or ()}
        self._record([machine.apply_completion(self.session, completion, workflow.time() - began)])
        return None

    def _model_call_failed(self, err: ActivityError) -> Interrupt:
        """Retries exhausted: an `error` interrupt. A fatal error fails the run (see `run`)."""
        fail_if_final(err, "Model call", "ModelError")
        cause = err.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
        return machine.model_error_interrupt(reason)

    async def _run_tools(self, calls: list[ToolCall]) -> None:
        began = workflow.time()
        results = await self._unless_cancelled(asyncio.gather(*(self._run_tool(call) for call in calls)))
        if results is None:  # cancelled while tools ran; the batch stays pending in the Session
            return
        too_large = next((r for r in results if isinstance(r, ApplicationError)), None)
        if too_large is not None:
            raise too_large  # fails the run (see `run`): the result cannot be recorded anywhere
        self._record(machine.apply_tool_results(self.session, list(results), workflow.time() - began))

    async def _run_tool(self, call: ToolCall) -> ToolResult | ApplicationError:
        """The tool's result; an ApplicationError when its result is too large to record."""
        assert self.agent is not None
        info = next((t for t in self.agent.tools if t.spec.name == call.name), None)
        if info is not None and info.agent:
            return await self._run_child(call, info.agent)
        retries = info.retries if info else 0
        timeout = timedelta(seconds=info.timeout_s) if info and info.timeout_s else TOOL_TIMEOUT
        # The worker that produced the model's reply holds the call (else the run's history does):
        # the input names it. A call from elsewhere (a Session given as input, a renamed
        # duplicate id, a predecessor run) travels whole.
        key = call_hash(call)
        request = (
            ToolCallInput(agent=self.agent_key, ref=ref(key))
            if key in self.reply_calls
            else ToolCallInput(agent=self.agent_key, call=call)
        )
        # A raising tool is retried only `retries` times (the activity decides);
        # two more attempts cover a worker lost mid-call. A result too large to record is
        # final: the activity raises it non-retryable.
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=30),
            maximum_attempts=retries + 3,
        )
        try:
            if info is not None and info.local:
                result = await workflow.execute_local_activity(
                    RUN_TOOL, request, result_type=ToolResult | str, start_to_close_timeout=timeout,
                    retry_policy=retry, summary=tool_summary(call),
                )
            else:
                result = await workflow.execute_activity(
                    RUN_TOOL,
                    request,
                    result_type=ToolResult | str,
                    start_to_close_timeout=timeout,
                    heartbeat_timeout=min(timeout, MODEL_HEARTBEAT),
                    retry_policy=retry,
                    summary=tool_summary(call),
                )
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == PAYLOAD_TOO_LARGE:
                return ApplicationError(
                    f"Tool '{call.name}' failed: {cause.message}", type=PAYLOAD_TOO_LARGE, non_retryable=True
                )
            detail = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            return ToolResult(
                tool_call_id=call.id,
                content=f"Tool '{call.name}' did not complete: {detail}",
                is_error=True,
            )
        if isinstance(result, str):  # the compact form of a plain result (activities.agents.wire)
            result = ToolResult(tool_call_id=call.id, content=result)
        # The worker keeps what it produced: the next model call names it by hash.
        self.produced.add(message_hash(Message(role="tool", tool_call_id=call.id, content=result.content)))
        return result

    async def _run_child(self, call: ToolCall, agent: str) -> ToolResult:
        """An agent used as a tool: its run is a child workflow; its answer is the tool result."""
        prompt = call.arguments.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return ToolResult(tool_call_id=call.id, content=f"Agent tool '{call.name}' needs a 'prompt' string.", is_error=True)
        child_id = f"{workflow.info().workflow_id}/{call.id}"
        self.children[call.id] = child_id
        try:
            result = await workflow.execute_child_workflow(
                WORKFLOW_TYPE,
                AgentInput(agent=agent, prompt=prompt, stream=self.streaming, parent_call=call.id).model_dump(
                    mode="json", exclude_defaults=True
                ),
                id=child_id,
                static_summary=f"agent {agent} (tool call {call.id})",
            )
        except ChildWorkflowError as err:
            cause = err.cause
            detail = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            return ToolResult(tool_call_id=call.id, content=f"Agent '{agent}' failed: {detail}", is_error=True)
        finally:
            self.children.pop(call.id, None)
            if self.child_wait is not None and self.child_wait[0] == child_id:
                self._child_goes_on()
        stop = result.get("stop_reason") if isinstance(result, dict) else None
        output = result.get("output") if isinstance(result, dict) else None
        return ToolResult(
            tool_call_id=call.id,
            content=str(output or f"(agent '{agent}' ended: {stop})"),
            is_error=stop not in ("done", None),
        )

    @workflow.signal(name=CHILD_SIGNAL, description='From an agent-as-tool child run: {"call_id", "status"}')
    def child_status(self, payload: Any = None) -> None:
        try:
            call_id = payload["call_id"]
            view = RunStatusView.model_validate(payload["status"])
        except (KeyError, TypeError, ValidationError):
            self._ignore(CHILD_SIGNAL, "malformed child status")
            return
        child_id = self.children.get(call_id)
        if child_id is None:
            self._ignore(CHILD_SIGNAL, f"no child run for tool call {call_id!r}")
            return
        if view.status in ("waiting_approval", "waiting_input", "waiting_retry") and view.interrupt is not None:
            self.child_wait = (child_id, view)
            self.pause += 1  # a waiting client (rein.wait) sees the child's interrupt as this run's
            self._publish()
            self._emit(StreamChunk(
                type="interrupt", name=view.interrupt.type, data=view.interrupt.model_dump(mode="json"),
                finish_reason="interrupted", usage=self.session.usage,
            ))
        elif self.child_wait is not None and self.child_wait[0] == child_id:
            self._child_goes_on()

    def _child_goes_on(self) -> None:
        self.child_wait = None
        self._publish()

    def _for_child(self, name: str, payload: BaseModel) -> Any:
        """A decision sent to this run while its child waits: passed on to the child, unchanged."""
        assert self.child_wait is not None
        child = workflow.get_external_workflow_handle(self.child_wait[0])
        asyncio.ensure_future(child.signal(name, payload.model_dump(mode="json")))
        return [c.id for c in self.child_wait[1].pending_tool_calls]

    async def _tell_parent(self) -> None:
        """An agent-as-tool child run tells its parent run that it waits, or goes on."""
        parent = workflow.info().parent
        if self.parent_call is None or parent is None:
            return
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id, run_id=parent.run_id).signal(
                CHILD_SIGNAL, {"call_id": self.parent_call, "status": self._status_view().model_dump(mode="json")}
            )
        except (ApplicationError, FailureError) as err:  # the parent has ended: nothing to tell
            workflow.logger.warning("could not tell the parent run: %s", err)
        except asyncio.CancelledError:
            if not self._cancelled_natively():
                raise

    async def _unless_cancelled(self, work: Awaitable[T]) -> T | None:
        """The result of `work`, or None as soon as the run is cancelled (its activities are cancelled too)."""
        task = asyncio.ensure_future(work)
        try:
            await workflow.wait_condition(lambda: task.done() or self.cancel_reason is not None)
        except asyncio.CancelledError:
            if not self._cancelled_natively():
                raise
        if task.done():
            return task.result()
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, ActivityError):
            pass
        return None

    def _record(self, steps: list[Step]) -> None:
        for step in steps:
            step.index = self.first_step + len(self.steps)
            self.steps.append(step)
            self._emit(StreamChunk(type="step", name=step.kind, data=step.model_dump(mode="json")))

    def _emit(self, chunk: StreamChunk, source: str = "") -> None:
        """Append to the run's stream (in memory: no command; in history only once a reader polls it)."""
        self.stream_topic.publish(StreamEvent(chunk=chunk, source=source).to_json())

    # ------------------------------------------------------------ waiting for people

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
            self.pause += 1
        self._publish()
        if not resumed:  # the predecessor already published it to the stream it handed over
            self._emit(StreamChunk(
                type="interrupt", name=interrupt.type, data=interrupt.model_dump(mode="json"),
                finish_reason="interrupted", usage=self.session.usage,
            ))
        await self._tell_parent()
        timeout = _seconds(config.approval_timeout_s) if interrupt.type != "error" and config.approval_timeout_s else None
        if timeout is not None and self.wait_deadline is None:
            self.wait_deadline = workflow.time() + timeout.total_seconds()
        while True:
            remaining = None if self.wait_deadline is None else self.wait_deadline - workflow.time()
            try:
                if remaining is not None and remaining <= 0:
                    raise asyncio.TimeoutError
                await workflow.wait_condition(
                    lambda: self.woken or self.cancel_reason is not None or self._signals_piled_up(),
                    timeout=None if remaining is None else _seconds(remaining),
                    timeout_summary=f"{interrupt.type} timeout" if remaining is not None else None,
                )
            except asyncio.TimeoutError:
                self._time_out(interrupt, timeout.total_seconds() if timeout else 0)
                break
            except asyncio.CancelledError:
                if not self._cancelled_natively():
                    raise
                break
            if self.woken or self.cancel_reason is not None:
                break
            await self._continue_as_new(waiting=interrupt)
        self._stop_waiting()
        await self._tell_parent()

    def _stop_waiting(self) -> None:
        self.woken = False
        self.wait_deadline = None
        self.session.stop_reason = None
        self.interrupt = None
        self.status = "running"

    def _time_out(self, interrupt: Interrupt, timeout_s: float) -> None:
        reason = f"no decision within {timeout_s:g} seconds"
        if interrupt.type == "need_approval":
            machine.decide(self.session, False, approver="timeout", reason=reason, input_tools=self.input_tools)
        elif interrupt.type == "need_input":
            machine.answer(self.session, f"No answer: {reason}.", approver="timeout", input_tools=self.input_tools)

    # ------------------------------------------------------------ signals and decision updates
    #
    # Each decision exists twice: as a signal (fire and forget; a misfit is recorded and ignored)
    # and as a validated update (a misfit is rejected to the caller). Both take any number of raw
    # arguments so that no payload shape can fail a workflow task; `_check_*` says what fits.

    def _ignore(self, name: str, why: str) -> None:
        self.ignored_signals += 1
        self.last_ignored = f"`{name}`: {why}"[:500]
        workflow.logger.warning("Ignored signal %s: %s", name, why[:500])

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
            raise Misfit(f"malformed payload: {_short_error(exc)}") from None

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

    @workflow.signal(name=STREAM_SIGNAL, description="rein's stream readers: model calls publish their text live")
    def stream_on(self, *args: Any) -> None:
        self.streaming = True

    @workflow.signal(name="cancel", description='End the run with stop_reason cancelled: {"reason"}')
    def cancel(self, *args: Any) -> None:
        self._signal("cancel", self._check_cancel, self._cancel, args)

    @workflow.signal(dynamic=True, description="Any other signal name: recorded and ignored")
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self.signals_in_run += 1
        self.signal_bytes_in_run += sum(len(a.payload.data) for a in args if hasattr(a, "payload"))
        self._ignore(name[:100], f"unknown signal; rein accepts {', '.join(SIGNALS)}")

    @workflow.update(name=APPROVE_UPDATE, description='Approve pending tool calls; rejected when nothing fits: {"tool_call_id", "approver", "reason"}')
    def approve_update(self, *args: Any) -> list[str]:
        return self._decide(self._check_decision(args), True)

    @approve_update.validator
    def _validate_approve(self, *args: Any) -> None:
        self._check_decision(args)

    @workflow.update(name=DENY_UPDATE, description='Deny pending tool calls; rejected when nothing fits: {"tool_call_id", "approver", "reason"}')
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
        self._retry(self._check_retry(args))

    @retry_update.validator
    def _validate_retry(self, *args: Any) -> None:
        self._check_retry(args)

    @workflow.update(name=CANCEL_UPDATE, description='End the run with stop_reason cancelled; rejected once it ended: {"reason"}')
    def cancel_update(self, *args: Any) -> None:
        self._cancel(self._check_cancel(args))

    @cancel_update.validator
    def _validate_cancel(self, *args: Any) -> None:
        self._check_cancel(args)

    # ------------------------------------------------------------ queries and the wait update

    @workflow.query(name="status", description="status, stage, iteration, usage, interrupt, pending_tool_calls, stop_reason")
    def status_query(self) -> dict[str, Any]:
        return self._status_view().model_dump(mode="json")

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
                lambda: self.pause > request.after_pause or self.ended or ticket in self.released or self.rolling
            )
        finally:
            if ticket in self.parked:
                self.parked.remove(ticket)
        if ticket in self.released:
            self.released.discard(ticket)
            raise ApplicationError("newer waits replaced this one; wait again", type="WaitReleased")
        if self.status == "failed":
            raise ApplicationError("the run failed; its result carries the error", type="RunFailed")
        if self.pause <= request.after_pause and not self.ended:
            raise ApplicationError("the run continues as new; wait on its latest run", type="ContinuedAsNew")
        return self._outcome()

    # ------------------------------------------------------------ views

    def _status_view(self) -> RunStatusView:
        child = self.child_wait[1] if self.child_wait is not None else None
        return RunStatusView(
            status=child.status if child else self.status,
            stage=self.session.stage.value,
            iteration=self.session.iteration,
            usage=self.session.usage,
            interrupt=child.interrupt if child else self.interrupt,
            pending_tool_calls=child.pending_tool_calls if child else self.session.pending_tool_calls,
            stop_reason="interrupted" if child else self.session.stop_reason,
            pause=self.pause,
            ignored_signals=self.ignored_signals,
            first_step=self.first_step,
            continued_from=self.continued_from,
        )

    def _outcome(self) -> RunOutcome:
        interrupt = self.child_wait[1].interrupt if self.child_wait is not None else self.interrupt
        interrupted = interrupt is not None
        return RunOutcome(
            status="interrupted" if interrupted else "done",
            output=machine.run_output(self.session),
            data=machine.run_data(self.session),
            usage=self.session.usage,
            elapsed_s=self.active_s,
            stop_reason="interrupted" if interrupted else (self.session.stop_reason or "done"),
            interrupt=interrupt,
            run_id=workflow.info().workflow_id,
            iterations=self.session.iteration,
            step_count=self.first_step + len(self.steps),
            message_count=len(self.session.messages),
        )

    def _published_at_start(self) -> None:
        """Search attributes the client set at start (or the predecessor had) need no upsert."""
        attributes = workflow.info().typed_search_attributes
        for name, key in _SEARCH_KEYS.items():
            value = attributes.get(key)
            if value is not None:
                self.published[name] = value

    def _publish_progress(self, ending: bool = False) -> None:
        if self.progressed:
            self.progressed = False
            self._publish(ending)

    def _counters_due(self, view: RunStatusView, ending: bool) -> bool:
        """Refresh the counters now (the status is unchanged)? Every COUNTER_EVERY iterations, and since
        rein-timed-counters only when COUNTER_SECONDS have passed since the last refresh."""
        if view.iteration % COUNTER_EVERY:
            return False
        if workflow.time() - self.counters_at >= COUNTER_SECONDS:
            return True
        if len(self._search_updates(view, True)[0]) == len(self._search_updates(view, False)[0]):
            return True  # the counters are published already: both rules send the same
        if ending and self.timed_counters is None:
            return True  # the old rule's last refresh costs less than the patch marker this late
        if self.timed_counters is None:
            self.timed_counters = workflow.patched(PATCH_TIMED_COUNTERS)
        return not self.timed_counters

    def _fold_final_publish(self) -> bool:
        """The run ends: what its last iteration changed goes with the final status in one upsert.
        Before rein-timed-counters it was a separate upsert when the old rule published anything."""
        view = self._status_view()
        old_due = self.published.get("ReinStatus") != view.status or view.iteration % COUNTER_EVERY == 0
        if not self._search_updates(view, old_due)[0]:
            return True  # the old code published nothing here: the same commands either way
        return bool(self.timed_counters)  # a run on the new rule already; elsewhere a marker would cost more

    def _search_updates(self, view: RunStatusView, counters: bool) -> tuple[list[Any], dict[str, Any]]:
        """The search attribute updates that publish `view` (the counters only if `counters`)."""
        wanted: dict[str, Any] = {
            "ReinAgent": (self.agent.name or None) if self.agent else None,
            "ReinStatus": view.status,
            "ReinIterations": view.iteration,
            "ReinTokens": view.usage.total_tokens,
        }
        available = set(self.agent.search_attributes) if self.agent else set()
        if not counters:
            available -= {"ReinIterations", "ReinTokens"}
        updates = [
            _SEARCH_KEYS[name].value_set(min(value, INT64_MAX) if isinstance(value, int) else value)
            for name, value in wanted.items()
            if name in available and value is not None and self.published.get(name) != value
        ]
        return updates, {k: v for k, v in wanted.items() if k in available}

    def _publish(self, ending: bool = False) -> None:
        """Tell visibility and the UI where the run is; upserts only the values that changed."""
        view = self._status_view()
        # Counters change every iteration; each upsert is a history event and a visibility
        # write, so between status changes they are refreshed now and then (`_counters_due`).
        counters = self.published.get("ReinStatus") != view.status or self._counters_due(view, ending)
        updates, published = self._search_updates(view, counters)
        if updates:
            workflow.upsert_search_attributes(updates)
            self.published.update(published)
            if counters:
                self.counters_at = workflow.time()
        info = workflow.info()
        details = details_for(
            view,
            workflow_id=info.workflow_id,
            namespace=info.namespace,
            prompt=self.prompt,
            output=machine.last_assistant_text(self.session) if view.status in ("done", "cancelled") else None,
            last_ignored=self.last_ignored,
        )
        if details != self.details:
            workflow.set_current_details(details)
            self.details = details


def fail_if_final(err: ActivityError, what: str, kind: str) -> None:
    """Raise, failing the run (see `AgentLoop.run`), when the activity failed with a non-retryable error."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.non_retryable:
        raise ApplicationError(
            f"{what} failed and cannot be retried: {cause.message}", type=cause.type or kind, non_retryable=True
        ) from None


def _valid_input(args: Sequence[Any]) -> AgentInput | None:
    """The run's one input as an AgentInput; None when it is not one (`run` then says why, failing the run)."""
    if len(args) != 1:
        return None
    raw = args[0]
    try:
        return AgentInput.model_validate(raw.model_dump() if isinstance(raw, BaseModel) else raw)
    except (ValidationError, ValueError, TypeError):
        return None


def _seconds(value: float) -> timedelta:
    """A duration Temporal can hold; an absurd configured value is capped, not a crash."""
    return timedelta(seconds=min(max(float(value), 0.001), MAX_SECONDS))


def _short_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}" for e in exc.errors()
        )[:300]
    return str(exc)[:300]


_SEARCH_KEYS: dict[str, Any] = {
    "ReinAgent": SearchAttributeKey.for_keyword("ReinAgent"),
    "ReinStatus": SearchAttributeKey.for_keyword("ReinStatus"),
    "ReinIterations": SearchAttributeKey.for_int("ReinIterations"),
    "ReinTokens": SearchAttributeKey.for_int("ReinTokens"),
}

"""AgentWorkflow: the durable driver of rein's pure state machine.

Each model call and each tool call is an activity; each interrupt is a wait for
a signal (`approve`, `deny`, `answer`, `retry`, `cancel`). Inputs, signals and
queries are plain JSON validated here, so bad input from any client is a clear
error or an ignored signal, never a failing workflow task.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from collections.abc import Awaitable
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.workflow import HandlerUnfinishedPolicy
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from rein import machine
    from rein.config import LoopConfig
    from rein.contract import (
        CALL_MODEL,
        DESCRIBE_AGENT,
        RUN_TOOL,
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
        RunStatus,
        RunCarry,
        RunStatusView,
        ToolCallInput,
        WaitRequest,
    )
    from rein.ir import Completion, ToolCall, ToolResult
    from rein.result import Interrupt, RunResult, Step
    from rein.session import Session
    from rein.summaries import details_for, model_summary, tool_summary

T = TypeVar("T")

MODEL_HEARTBEAT = timedelta(seconds=20)
COUNTER_EVERY = 5
CONTINUE_AS_NEW_MAX_BYTES = 1_500_000
"""Below Temporal's 2 MB payload limit, with room for encoding overhead."""
PATCH_THROTTLED_COUNTERS = "rein-throttled-counters"
"""Runs recorded before this patch upserted the counters at every step; they replay that way."""
PATCH_PROMPT_CANCEL = "rein-prompt-cancel"
"""Since this patch, `cancel` interrupts in-flight activities instead of waiting for them."""
PATCH_NATIVE_CANCEL = "rein-native-cancel"
"""Since this patch, Temporal cancellation of the workflow ends the run like the `cancel` signal."""
"""Iterations between ReinIterations/ReinTokens refreshes while the status stays the same."""
TOOL_TIMEOUT = timedelta(minutes=5)


@workflow.defn(name=WORKFLOW_TYPE)
class AgentWorkflow:
    def __init__(self) -> None:
        self.session = Session()
        self.steps: list[Step] = []
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
        self.final: RunResult | None = None
        self.published: dict[str, Any] = {}
        self.sent_messages = 0
        """How many conversation messages model-call activities have been given so far."""
        self.details = ""
        self.throttle_counters = False
        self.prompt_cancel = False
        self.native_cancel = False
        self.prompt = ""
        self.last_ignored = ""
        self.cannot_continue_as_new = False

    # ------------------------------------------------------------ main loop

    @workflow.run
    async def run(self, raw_input: Any) -> dict[str, Any]:
        # Read the clock and patches before the local activity: a local activity may resolve in a
        # different workflow task on replay, so nothing that must replay identically follows it.
        started = workflow.time()
        self.throttle_counters = workflow.patched(PATCH_THROTTLED_COUNTERS)
        self.prompt_cancel = workflow.patched(PATCH_PROMPT_CANCEL)
        self.native_cancel = workflow.patched(PATCH_NATIVE_CANCEL)
        request = self._parse_input(raw_input)
        self.agent_key = request.agent
        self.agent = await self._describe(request.agent)
        config = self._config(request)
        self.input_tools = frozenset(t.spec.name for t in self.agent.tools if t.asks_human)
        self.session = self._initial_session(request)
        self.prompt = next((m.content for m in reversed(self.session.messages) if m.role == "user"), "")
        if request.carry is not None:
            self.steps = request.carry.steps
            self.active_s = request.carry.active_s
            self.pause = request.carry.pause
            self.ignored_signals = request.carry.ignored_signals
            self.sent_messages = request.carry.sent_messages
        self._publish()

        while True:
            if self._history_is_long(request):
                self._continue_as_new(request, self.active_s + (workflow.time() - started))
            elapsed = self.active_s + (workflow.time() - started)
            action = machine.next_action(self.session, config, elapsed, self.input_tools)
            if self.cancel_reason is not None and not isinstance(action, machine.Finish):
                self.session.done = True
                self.session.stop_reason = "cancelled"
                continue
            if isinstance(action, machine.Finish):
                break
            if isinstance(action, machine.Wait):
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
            self._publish()

        self.active_s += workflow.time() - started
        self.status = "cancelled" if self.session.stop_reason == "cancelled" else "done"
        self.interrupt = None
        self.final = self._snapshot(0)
        self.pause += 1
        self._publish()
        await self._settle()
        return self.final.model_dump(mode="json")

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
        asyncio.CancelledError: treat it as the `cancel` signal. False: re-raise (runs before the patch)."""
        if not self.native_cancel:
            return False
        if self.cancel_reason is None:
            self.cancel_reason = "workflow cancellation requested"
        return True

    async def _settle(self) -> None:
        """Let signal and update handlers finish before the run returns."""
        try:
            await workflow.wait_condition(workflow.all_handlers_finished)
        except asyncio.CancelledError:
            if not self._cancelled_natively():
                raise
            await workflow.wait_condition(workflow.all_handlers_finished)

    def _history_is_long(self, request: AgentInput) -> bool:
        if self.cannot_continue_as_new:
            return False
        info = workflow.info()
        if request.continue_as_new_after is not None:
            return info.get_current_history_length() >= request.continue_as_new_after
        return info.is_continue_as_new_suggested()

    def _continue_as_new(self, request: AgentInput, active_s: float) -> None:
        """Start a fresh history with the same Session; a client waiting on `rein.wait` re-attaches."""
        carry = RunCarry(
            steps=self.steps,
            active_s=active_s,
            pause=self.pause,
            ignored_signals=self.ignored_signals,
            sent_messages=self.sent_messages,
        )
        successor = request.model_copy(update={"prompt": None, "session": self.session, "carry": carry})
        if len(successor.model_dump_json()) > CONTINUE_AS_NEW_MAX_BYTES:
            # Temporal rejects a larger input and the run would be stuck: keep this history.
            workflow.logger.warning("Session too large to continue as new; the run keeps its history")
            self.cannot_continue_as_new = True
            return
        workflow.continue_as_new(successor.model_dump(mode="json"))

    def _parse_input(self, raw: Any) -> AgentInput:
        try:
            if isinstance(raw, BaseModel):
                raw = raw.model_dump()
            return AgentInput.model_validate(raw)
        except (ValidationError, ValueError, TypeError) as exc:
            self.status = "failed"
            raise ApplicationError(
                f"Invalid AgentWorkflow input: {exc}. Expected JSON like "
                '{"agent": "<registered agent name>", "prompt": "..."}',
                type="InvalidInput",
                non_retryable=True,
            ) from None

    def _config(self, request: AgentInput) -> LoopConfig:
        assert self.agent is not None
        if not request.config:
            return self.agent.config
        try:
            return LoopConfig.model_validate({**self.agent.config.model_dump(), **request.config})
        except ValidationError as exc:
            self.status = "failed"
            raise ApplicationError(f"Invalid config override: {exc}", type="InvalidInput", non_retryable=True) from None

    def _initial_session(self, request: AgentInput) -> Session:
        assert self.agent is not None
        if request.session is None:
            return machine.new_session(request.prompt or "", self.agent.system)
        session = request.session
        if request.prompt is not None:
            machine.prepare_turn(session, request.prompt)
        return session

    # ------------------------------------------------------------ stages

    async def _call_model(self, action: machine.CallModel, config: LoopConfig) -> Interrupt | None:
        assert self.agent is not None
        info = workflow.info()
        began = workflow.time()
        try:
            completion = await self._unless_cancelled(workflow.execute_activity(
                CALL_MODEL,
                ModelCallInput(
                    agent=self.agent_key,
                    iteration=action.iteration,
                    new_messages=self.session.messages[self.sent_messages :],
                    first_index=self.sent_messages,
                    total=len(self.session.messages),
                    run_id=info.workflow_id,
                    workflow_run_id=info.run_id,
                    stream=True,
                ),
                result_type=Completion,
                start_to_close_timeout=timedelta(seconds=config.model_timeout_s),
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
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.non_retryable:
                self.status = "failed"
                self.pause += 1
                self._publish()
                await self._settle()
                raise ApplicationError(
                    f"Model call failed and cannot be retried: {cause.message}",
                    type=cause.type or "ModelError",
                    non_retryable=True,
                ) from None
            reason = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            return machine.model_error_interrupt(reason)
        if completion is None:  # cancelled while the model was answering
            return None
        self.sent_messages = len(self.session.messages)
        self._record([machine.apply_completion(self.session, completion, workflow.time() - began)])
        return None

    async def _run_tools(self, calls: list[ToolCall]) -> None:
        began = workflow.time()
        results = await self._unless_cancelled(asyncio.gather(*(self._run_tool(call) for call in calls)))
        if results is None:  # cancelled while tools ran; the batch stays pending in the Session
            return
        self._record(machine.apply_tool_results(self.session, list(results), workflow.time() - began))

    async def _run_tool(self, call: ToolCall) -> ToolResult:
        assert self.agent is not None
        info = next((t for t in self.agent.tools if t.spec.name == call.name), None)
        retries = info.retries if info else 0
        timeout = timedelta(seconds=info.timeout_s) if info and info.timeout_s else TOOL_TIMEOUT
        try:
            return await workflow.execute_activity(
                RUN_TOOL,
                ToolCallInput(agent=self.agent_key, call=call, run_id=workflow.info().workflow_id),
                result_type=ToolResult,
                start_to_close_timeout=timeout,
                heartbeat_timeout=min(timeout, MODEL_HEARTBEAT),
                # A raising tool is retried only `retries` times (the activity decides);
                # two more attempts cover a worker lost mid-call.
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=retries + 3,
                ),
                summary=tool_summary(call),
            )
        except ActivityError as err:
            cause = err.cause
            detail = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            return ToolResult(
                tool_call_id=call.id,
                content=f"Tool '{call.name}' did not complete: {detail}",
                is_error=True,
            )

    async def _unless_cancelled(self, work: Awaitable[T]) -> T | None:
        """The result of `work`, or None as soon as the run is cancelled (its activities are cancelled too)."""
        if not self.prompt_cancel:
            return await work
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
            step.index = len(self.steps)
            self.steps.append(step)

    # ------------------------------------------------------------ waiting for people

    async def _wait_for_human(self, interrupt: Interrupt, config: LoopConfig) -> None:
        """Pause until a fitting signal arrives (or the approval timeout, which denies)."""
        self.interrupt = interrupt
        self.status = WAITING_STATUS[interrupt.type]
        self.session.stop_reason = "interrupted"
        self.pause += 1
        self._publish()
        self.woken = False
        timeout = config.approval_timeout_s if interrupt.type != "error" else None
        try:
            await workflow.wait_condition(
                lambda: self.woken or self.cancel_reason is not None,
                timeout=timeout,
                timeout_summary=f"{interrupt.type} timeout" if timeout else None,
            )
        except asyncio.TimeoutError:
            self._time_out(interrupt, timeout or 0)
        except asyncio.CancelledError:
            if not self._cancelled_natively():
                raise
        self.session.stop_reason = None
        self.interrupt = None
        self.status = "running"

    def _time_out(self, interrupt: Interrupt, timeout_s: float) -> None:
        reason = f"no decision within {timeout_s:g} seconds"
        if interrupt.type == "need_approval":
            machine.decide(self.session, False, approver="timeout", reason=reason, input_tools=self.input_tools)
        elif interrupt.type == "need_input":
            machine.answer(self.session, f"No answer: {reason}.", approver="timeout", input_tools=self.input_tools)

    # ------------------------------------------------------------ signals

    def _ignore(self, name: str, why: str) -> None:
        self.ignored_signals += 1
        self.last_ignored = f"`{name}`: {why}"
        workflow.logger.warning("Ignored signal %s: %s", name, why)

    def _parse_signal(self, name: str, model: type[BaseModel], payload: Any) -> Any:
        try:
            if payload is None:
                payload = {}
            return model.model_validate(payload)
        except (ValidationError, ValueError, TypeError) as exc:
            self._ignore(name, f"malformed payload: {_short_error(exc)}")
            return None

    def _on_decision(self, name: str, payload: Any, approved: bool) -> None:
        signal = self._parse_signal(name, DecisionSignal, payload)
        if signal is None:
            return
        if self.status != "waiting_approval":
            self._ignore(name, f"the run is {self.status}, not waiting for approval")
            return
        decided = machine.decide(
            self.session, approved, signal.tool_call_id, signal.approver, signal.reason, self.input_tools
        )
        if not decided:
            self._ignore(name, f"no pending tool call with id {signal.tool_call_id!r}")
            return
        self.woken = True

    @workflow.signal(name="approve", description='Approve pending tool calls: {"tool_call_id": id or null for all, "approver", "reason"}')
    def approve(self, payload: Any = None) -> None:
        self._on_decision("approve", payload, True)

    @workflow.signal(name="deny", description='Deny pending tool calls; the model sees the reason: {"tool_call_id", "approver", "reason"}')
    def deny(self, payload: Any = None) -> None:
        self._on_decision("deny", payload, False)

    @workflow.signal(name="answer", description='Answer a need_input interrupt: {"text", "approver"}')
    def answer(self, payload: Any = None) -> None:
        signal = self._parse_signal("answer", AnswerSignal, payload)
        if signal is None:
            return
        if self.status != "waiting_input":
            self._ignore("answer", f"the run is {self.status}, not waiting for input")
            return
        machine.answer(self.session, signal.text, signal.approver, self.input_tools)
        self.woken = True

    @workflow.signal(name="retry", description="Retry the model call after an error interrupt")
    def retry(self, payload: Any = None) -> None:
        if self.status != "waiting_retry":
            self._ignore("retry", f"the run is {self.status}, not waiting after an error")
            return
        self.woken = True

    @workflow.signal(name="cancel", description='End the run with stop_reason cancelled: {"reason"}')
    def cancel(self, payload: Any = None) -> None:
        signal = self._parse_signal("cancel", CancelSignal, payload)
        if signal is None:
            return
        if self.status in ("done", "cancelled", "failed"):
            self._ignore("cancel", f"the run is already {self.status}")
            return
        self.cancel_reason = signal.reason or "cancelled"

    # ------------------------------------------------------------ queries and update

    @workflow.query(name="status", description="status, stage, iteration, usage, interrupt, pending_tool_calls, stop_reason")
    def status_query(self) -> dict[str, Any]:
        return self._status_view().model_dump(mode="json")

    @workflow.query(name="session", description="The run's Session (conversation and loop state)")
    def session_query(self) -> dict[str, Any]:
        return self.session.model_dump(mode="json")

    @workflow.query(name="steps", description="The Step records so far")
    def steps_query(self) -> list[dict[str, Any]]:
        return [s.model_dump(mode="json") for s in self.steps]

    @workflow.update(
        name=WAIT_UPDATE,
        unfinished_policy=HandlerUnfinishedPolicy.ABANDON,
        description="rein's client: wait until the run pauses or ends",
    )
    async def wait(self, request: WaitRequest) -> RunResult:
        await workflow.wait_condition(lambda: self.pause > request.after_pause)
        if self.status == "failed":
            raise ApplicationError("the run failed; its result carries the error", type="RunFailed")
        return self._snapshot(request.steps_from)

    # ------------------------------------------------------------ views

    def _status_view(self) -> RunStatusView:
        return RunStatusView(
            status=self.status,
            stage=self.session.stage.value,
            iteration=self.session.iteration,
            usage=self.session.usage,
            interrupt=self.interrupt,
            pending_tool_calls=self.session.pending_tool_calls,
            stop_reason=self.session.stop_reason,
            pause=self.pause,
            ignored_signals=self.ignored_signals,
        )

    def _snapshot(self, steps_from: int) -> RunResult:
        steps = [s.model_copy(update={"index": i}) for i, s in enumerate(self.steps[steps_from:])]
        interrupted = self.interrupt is not None
        return RunResult(
            status="interrupted" if interrupted else "done",
            output=machine.last_assistant_text(self.session),
            session=self.session,
            usage=self.session.usage,
            elapsed_s=self.active_s,
            stop_reason="interrupted" if interrupted else (self.session.stop_reason or "done"),
            steps=steps,
            interrupt=self.interrupt,
            run_id=workflow.info().workflow_id,
        )

    def _publish(self) -> None:
        """Tell visibility and the UI where the run is; upserts only the values that changed."""
        view = self._status_view()
        wanted: dict[str, Any] = {
            "ReinAgent": self.agent.name if self.agent else None,
            "ReinStatus": view.status,
            "ReinIterations": view.iteration,
            "ReinTokens": view.usage.total_tokens,
        }
        available = set(self.agent.search_attributes) if self.agent else set()
        if self.throttle_counters and self.published.get("ReinStatus") == view.status and view.iteration % COUNTER_EVERY:
            # Counters change every iteration; each upsert is a history event and a visibility
            # write, so between status changes they are refreshed every COUNTER_EVERY iterations.
            available -= {"ReinIterations", "ReinTokens"}
        updates = [
            _SEARCH_KEYS[name].value_set(value)
            for name, value in wanted.items()
            if name in available and value is not None and self.published.get(name) != value
        ]
        if updates:
            workflow.upsert_search_attributes(updates)
            self.published.update({k: v for k, v in wanted.items() if k in available})
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

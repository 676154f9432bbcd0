"""The loop's two kinds of work: a model call and a batch of tool calls, each an activity (an agent
used as a tool is a child run). Messages the worker already holds travel by reference."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from rein.core import machine
    from rein.core.config import LoopConfig
    from rein.core.contract import (
        AGENT_CHANGED,
        CALL_MODEL,
        PAYLOAD_TOO_LARGE,
        RUN_TOOL,
        ModelCallInput,
        ModelReply,
        ToolCallInput,
        model_queue,
    )
    from rein.core.digest import EMPTY, call_hash, extend, message_hash, ref
    from rein.core.events import reasoning_source
    from rein.core.failures import bug_retry_delay, is_bug, salvaged
    from rein.core.ir import Message, StreamChunk, ToolCall, ToolResult, ToolSpec
    from rein.core.result import Interrupt
    from rein.core.summaries import model_summary, tool_summary
    from rein.core.threads import INTERRUPTED

from rein.workflows.options import (
    TOOL_TIMEOUT,
    fail_if_final,
    failure_detail,
    heartbeat_timeout,
    model_retry,
    seconds,
    tool_retry,
)

if TYPE_CHECKING:
    from rein.workflows.agent_changes import AgentChanges
    from rein.workflows.children import ChildRuns
    from rein.workflows.decisions import Decisions
    from rein.workflows.publishing import Publisher
    from rein.workflows.state import RunState
    from rein.workflows.threads import Threads

T = TypeVar("T")
STREAM_RESULT_CHARS = 20_000
"""A tool result on the run's stream (beside its step, for readers such as rein.ops.agui), at most: the step's
summary is short, the recorded result whole."""


class Stages:
    """Model calls and tool calls: a collaborator of the loop, on its state."""

    def __init__(self, run: RunState, publisher: Publisher, agent_changes: AgentChanges, child_runs: ChildRuns,
                 decisions: Decisions, threads: Threads) -> None:
        self.run = run
        self.publisher = publisher
        self.agent_changes = agent_changes
        self.child_runs = child_runs
        self.decisions = decisions
        self.threads = threads

    async def until_fixed(self, what: str, call: Callable[[], Awaitable[T]],
                           first_stuck: Callable[[], Awaitable[None]] | None = None) -> T:
        """`call()`, made again on a durable timer for as long as it fails on a bug in rein's activity code
        (rein.core.failures): meanwhile the run says it is stuck and why; a fixed build's workers carry it on.
        `first_stuck`: what the run does first when it gets stuck (a lean start learns its agent, to publish)."""
        run = self.run
        waits = 0
        try:
            while True:
                try:
                    result = await call()
                except ActivityError as err:
                    if not is_bug(err) or salvaged(err) is not None:
                        raise
                    if first_stuck is not None and not waits:
                        await first_stuck()
                    run.stuck = f"{what}: {failure_detail(err)}"[:500]
                    self.publisher.publish()
                    delay = bug_retry_delay(waits)
                    await workflow.sleep(delay, summary=f"stuck on a bug in rein ({what}): again in {delay.total_seconds():g}s")
                    waits += 1
                    continue
                if run.stuck:  # carried on: the run says so now (a failure or cancellation publishes where it ends)
                    run.stuck = ""
                    self.publisher.publish()
                return result
        finally:
            run.stuck = ""  # no command here: this also runs when a cached run is evicted

    def model_call_options(self, config: LoopConfig, iteration: int) -> dict[str, Any]:
        """What every `rein.call_model` activity is scheduled with, a plain model call or a middleware step."""
        assert self.run.agent is not None
        return {
            "task_queue": self._model_queue(),
            "start_to_close_timeout": seconds(config.model_timeout_s),
            "heartbeat_timeout": heartbeat_timeout(config),
            "retry_policy": model_retry(config),
            "summary": model_summary(self.model_override() or self.run.agent.model, iteration),
        }

    def model_call_error(self, err: ActivityError) -> Interrupt | None:
        """A model call that failed: nothing ran when the agent changed meanwhile (the next pass calls the
        model the agent has now); otherwise the failure's interrupt, or the run fails when it is final."""
        if self.agent_changes.taken(err) is not None:
            return None
        return self.model_call_failed(err)

    async def call_model(self, action: machine.CallModel, config: LoopConfig) -> Interrupt | None:
        run = self.run
        assert run.agent is not None
        began = workflow.time()
        source, live = self.next_model_call()
        if run.sent_conversation != run.carry.conversation:  # rewritten (compaction): send it whole again
            run.carry.sent_messages, run.carry.sent_digest, run.produced = 0, EMPTY, set()
            run.sent_conversation = run.carry.conversation
        new = run.session.messages[run.carry.sent_messages :]
        hashes = [message_hash(m) for m in new]
        digest = extend(run.carry.sent_digest or EMPTY, hashes)  # None only in a hand-over (_restore)
        # All produced by the worker (its reply, then the tool results): a count. Else each
        # produced one by reference, the rest whole. The digest verifies either way.
        produced = len(new) if new and all(h in run.produced for h in hashes) else 0
        entries: list[Message | str] = [] if produced else [
            ref(h) if h in run.produced else m for h, m in zip(hashes, new, strict=False)]
        total = len(run.session.messages)
        request = ModelCallInput(
            agent=run.agent_key,
            new_messages=entries,
            produced=produced,
            digest=digest,
            stream=live,
            stream_source=source if live else "",
            asked_stream=self.asked_stream(live),
            conversation=run.carry.conversation,
            model=self.model_override(),
            version=run.agent.version,
            tools=self.client_tool_specs(),
        )
        options = self.model_call_options(config, action.iteration)
        run.model_call_under_way = True
        try:
            completion = await run.unless_cancelled(self.until_fixed("model call", lambda: workflow.execute_activity(
                CALL_MODEL, request, result_type=ModelReply, **options)), cuttable=True)
        except ActivityError as err:
            return self.model_call_error(err)
        finally:
            run.model_call_under_way = False
        if completion is None:  # cancelled (or cut by an `interrupt` message) while the model was answering
            if run.cut:
                self._cut_model_call(source)
            return None
        self.took_reply(completion, live, source, total, digest, began, run.agent.version)
        return None

    def took_reply(
        self, completion: ModelReply, live: bool, source: str, total: int, digest: str, began: float, version: str
    ) -> None:
        """The model's reply to a call given the conversation's first `total` messages (chain digest `digest`),
        sent with the agent version `version` ("": none, so its tool calls carry the run's)."""
        assert self.run.agent is not None
        if not (live or completion.published):  # nobody read while the model answered: publish it whole
            if completion.message.reasoning:
                self.run.emit(StreamChunk(type="reasoning", text=completion.message.reasoning),
                              source=reasoning_source(source))
            if completion.message.content:
                self.run.emit(StreamChunk(type="text", text=completion.message.content), source=source)
            if completion.message.tool_calls:
                self.run.emit(StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls))
        self.run.carry.sent_messages, self.run.carry.sent_digest = total, digest
        self.run.produced = {message_hash(completion.message)}
        self.run.reply_calls = {call_hash(c) for c in completion.message.tool_calls or ()}
        self.run.reply_version = version
        self.run.record_steps([machine.apply_completion(self.run.session, completion, workflow.time() - began)])
        self.decisions.bind_batch()
        self.child_runs.report_spend()

    def client_tool_specs(self) -> list[ToolSpec]:
        """The thread turn's client tools, offered to the model beside the agent's own (rein.core.threads)."""
        thread = self.run.thread
        return list(thread.client_tools) if thread is not None else []

    def asked_stream(self, live: bool) -> bool | None:
        """ModelCallInput.asked_stream: False when only a reader wants the text live (the answer stays the
        provider's `complete()`), else None (as `stream` says)."""
        return False if live and not self.run.streaming else None

    def _cut_model_call(self, source: str) -> None:
        """An `interrupt` message cut the model call: its text is dropped from the conversation, the stream says so."""
        self.run.cut = False
        self.run.emit(StreamChunk(type="event", name="cut", data={"source": source, "reason": INTERRUPTED}))

    def next_model_call(self) -> tuple[str, bool]:
        """Count a model call: its name on the run's stream, and whether it publishes its text live."""
        run = self.run
        run.model_calls += 1
        return f"{workflow.info().run_id[-8:]}/{run.model_calls}", run.live_text()  # short: every delta carries it

    def _model_queue(self) -> str | None:
        """The provider's own (rate-limited) queue when the worker routes model calls; a run switched to
        another provider's model calls on the run's queue (that provider may have no model workers)."""
        queue = self.run.agent.model_queue if self.run.agent is not None else None
        override = self.model_override()
        return queue if queue is None or not override or model_queue(override) == queue else None

    def model_override(self) -> str:
        """The run's model when its client switched it (AgentInput.model), else "" (the agent's)."""
        return (self.run.request.model or "") if self.run.request is not None else ""

    def model_call_failed(self, err: ActivityError) -> Interrupt:
        """Retries exhausted: an `error` interrupt. A fatal error fails the run (see `run`)."""
        fail_if_final(err, "Model call", "ModelError")
        return machine.model_error_interrupt(failure_detail(err))

    async def run_tools(self, calls: list[ToolCall]) -> None:
        run = self.run
        began = workflow.time()
        results = await run.unless_cancelled(asyncio.gather(*(self._held_or_run(call) for call in calls)))
        if results is None:  # cancelled while tools ran; the batch stays pending in the Session
            return
        too_large = next((r for r in results if isinstance(r, ApplicationError)), None)
        if too_large is not None:
            raise too_large  # fails the run (see `run`): the result cannot be recorded anywhere
        ran = [r for r in results if not isinstance(r, ApplicationError)]  # all of them (typed so)
        refused = next((r for r in ran if isinstance(r, ActivityError)), None)
        old = self.agent_changes.taken(refused) if refused is not None else None
        if old is not None:
            # The agent changed under the batch: keep what ran, settle what can no longer run, and
            # leave the rest pending for the next pass (which asks first where the new rules say so).
            for call, result in zip(calls, ran, strict=False):
                held = self.agent_changes.settled(call, old, None if isinstance(result, ActivityError) else result)
                if held is not None:
                    run.held_results[call.id] = held
            return
        # a refusal the run cannot act on is a failed call
        done = [_not_completed(c, r) if isinstance(r, ActivityError) else r for c, r in zip(calls, ran, strict=False)]
        run.held_results = {}
        self.threads.apply_tool_changes(calls, done)  # the tools' changes to the thread's state, in call order
        steps = machine.apply_tool_results(run.session, done, workflow.time() - began)
        answers = run.session.messages[len(run.session.messages) - len(steps):]  # the batch's tool messages, in order
        run.record_steps(steps, [{"tool_call_id": m.tool_call_id, "content": machine.truncate(m.content, STREAM_RESULT_CHARS)}
                                 for m in answers])

    async def _held_or_run(self, call: ToolCall) -> ToolResult | ApplicationError | ActivityError:
        run = self.run
        held = run.held_results.get(call.id) or (run.what_if.recorded(call) if run.what_if is not None else None)
        return held if held is not None else await self._run_tool(call)

    async def _run_tool(self, call: ToolCall) -> ToolResult | ApplicationError | ActivityError:
        """The tool's result; an ApplicationError when its result is too large to record; the
        ActivityError of a worker that refused the call because the agent changed (nothing ran)."""
        run = self.run
        assert run.agent is not None
        info = next((t for t in run.agent.tools if t.spec.name == call.name), None)
        if info is not None and info.agent:
            return await self.child_runs.run_child(call, info.agent)
        retries = info.retries if info else 0
        timeout = timedelta(seconds=info.timeout_s) if info and info.timeout_s else TOOL_TIMEOUT
        # The worker that produced the model's reply holds the call (else the run's history does): the input names
        # it. A call from elsewhere (a Session given as input, a renamed duplicate id, a predecessor run) travels whole.
        key = call_hash(call)
        # The version travels only where the worker cannot know it: the reply's model call carried it.
        request = (
            ToolCallInput(agent=run.agent_key, ref=ref(key),
                          version=run.agent.version if run.agent.version != run.reply_version else "")
            if key in run.reply_calls
            else ToolCallInput(agent=run.agent_key, call=call, version=run.agent.version)
        )
        request = self.threads.with_state(request.model_copy(update={"key_batch": machine.key_batch(run.session, call.id)}),
                                          local=bool(info is not None and info.local))  # key_batch: a repeated id's key
        retry = tool_retry(retries)  # a result too large to record is final: the activity raises it non-retryable

        def execute() -> Awaitable[ToolResult | str]:
            if info is not None and info.local:
                return workflow.execute_local_activity(
                    # the SDK types result_type `type`, though any type hint its converter reads works
                    RUN_TOOL, request, result_type=ToolResult | str, start_to_close_timeout=timeout,  # type: ignore[arg-type]
                    retry_policy=retry, summary=tool_summary(call),
                )
            return workflow.execute_activity(
                RUN_TOOL,
                request,
                result_type=ToolResult | str,  # type: ignore[arg-type]  # as above
                start_to_close_timeout=timeout,
                heartbeat_timeout=heartbeat_timeout(run.config, timeout),
                retry_policy=retry,
                summary=tool_summary(call),
            )

        try:
            result = await self.until_fixed(f"tool {call.name}", execute)
        except ActivityError as err:
            ran = salvaged(err)
            if ran is not None:  # the tool ran, then rein's code failed: its result is the call's
                return ToolResult.model_validate(ran)
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == AGENT_CHANGED:
                return err
            if isinstance(cause, ApplicationError) and cause.type == PAYLOAD_TOO_LARGE:
                return ApplicationError(
                    f"Tool '{call.name}' failed: {cause.message}", type=PAYLOAD_TOO_LARGE, non_retryable=True
                )
            return _not_completed(call, err)
        if isinstance(result, str):  # the compact form of a plain result (activities.agents.wire)
            result = ToolResult(tool_call_id=call.id, content=result)
        # The worker keeps what it produced: the next model call names it by hash.
        run.produced.add(message_hash(Message(role="tool", tool_call_id=call.id, content=result.content)))
        return result


def _not_completed(call: ToolCall, err: ActivityError) -> ToolResult:
    return ToolResult(tool_call_id=call.id, content=f"Tool '{call.name}' did not complete: {failure_detail(err)}", is_error=True)

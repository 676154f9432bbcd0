"""The in-process runner: a thin, non-durable driver over `rein.core.machine`.

Used by `Agent(engine="local")` and by code that wants no Temporal at all.
The durable driver is `workflows.agent.AgentWorkflow`; both call the same
machine functions, so they produce the same RunResult for the same script.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from rein.blueprint.middleware import Middleware, StepContext, run_step
from rein.blueprint.providers.base import streams
from rein.blueprint.providers.fallback import is_retryable
from rein.blueprint.sync import ensure_no_running_loop
from rein.blueprint.tools import ToolContext, ToolRegistry, execute_all
from rein.core import machine
from rein.core.config import LoopConfig
from rein.core.ir import Completion, Message, StreamChunk, StreamFold, ToolCall, ToolResult
from rein.core.log import logger
from rein.core.result import Interrupt, RunResult, Step
from rein.core.session import Session

__all__ = ["arun", "run", "astream", "arun_streaming", "aresume", "resume", "step", "input_tool_names"]

def input_tool_names(registry: ToolRegistry | None) -> frozenset[str]:
    """Tools whose calls are questions for a person (the built-in `ask_human`)."""
    if registry is None:
        return frozenset()
    return frozenset(t.name for t in registry if getattr(t, "asks_human", False))


def approval_tool_names(registry: ToolRegistry | None) -> frozenset[str]:
    """Tools declared with `@tool(requires_approval=True)`."""
    if registry is None:
        return frozenset()
    return frozenset(t.name for t in registry if getattr(t, "requires_approval", False))


class _Run:
    """Bookkeeping for one driver invocation: clock, steps, run id."""

    def __init__(
        self, session: Session, registry: ToolRegistry | None, config: LoopConfig | None, output: Any = None
    ):
        self.session = session
        self.output = output
        """The agent's `rein.blueprint.output.OutputSpec`, or None."""
        self.registry = registry if registry is not None else ToolRegistry()
        self.config = config or LoopConfig()
        self.input_tools = input_tool_names(self.registry)
        self.approval_tools = approval_tool_names(self.registry)
        self.start = time.monotonic()
        self.steps: list[Step] = []
        self.run_id = uuid.uuid4().hex[:8]

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def next_action(self) -> machine.Action:
        action = machine.next_action(self.session, self.config, self.elapsed(), self.input_tools, self.approval_tools)
        if isinstance(action, machine.Finish) and action.stop_reason not in ("done",):
            logger.warning(
                "circuit tripped",
                extra={"trace_id": self.run_id, "reason": action.stop_reason, "iteration": self.session.iteration},
            )
        return action

    def record(self, steps: list[Step]) -> None:
        for s in steps:
            s.index = len(self.steps)
            self.steps.append(s)
            if s.kind == "tool":
                logger.info(
                    "tool done",
                    extra={
                        "trace_id": self.run_id,
                        "tool": s.summary.split(" → ")[0],
                        "error": s.is_error,
                        "dur_s": round(s.duration_s or 0.0, 3),
                    },
                )

    def tool_specs(self):
        specs = self.registry.specs() + ([self.output.tool_spec()] if self.output is not None else [])
        return specs or None

    def checked(self, completion: Completion) -> Completion:
        """The completion with the output type's verdict attached (see rein.blueprint.output)."""
        return self.output.check(completion) if self.output is not None else completion

    async def execute(self, calls: list[ToolCall], runtime: Any = None) -> list[ToolResult]:
        if not calls:
            return []
        if runtime is not None:
            return await runtime.execute_all(calls, self.registry, "allow")
        return await execute_all(
            self.registry,
            calls,
            context_factory=lambda c: ToolContext(tool_call_id=c.id, idempotency_key=machine.idempotency_key(
                self.run_id, c.id, machine.key_batch(self.session, c.id))),
        )

    async def run_tools(self, calls: list[ToolCall], runtime: Any = None) -> list[Step]:
        t0 = time.monotonic()
        results = await self.execute(calls, runtime)
        return machine.apply_tool_results(self.session, results, time.monotonic() - t0)

    def interrupted(self, interrupt: Interrupt) -> RunResult:
        self.session.stop_reason = "interrupted"
        logger.info("run interrupted", extra={"trace_id": self.run_id, "interrupt": interrupt.type})
        return self.result(interrupt)

    def result(self, interrupt: Interrupt | None = None) -> RunResult:
        if interrupt is None:
            logger.info(
                "run finished",
                extra={
                    "trace_id": self.run_id,
                    "stop_reason": self.session.stop_reason,
                    "iterations": self.session.iteration,
                    "tokens": self.session.usage.total_tokens,
                    "elapsed_s": round(self.elapsed(), 3),
                },
            )
        return RunResult(
            status="interrupted" if interrupt else "done",
            output=machine.run_output(self.session),
            data=machine.run_data(self.session),
            session=self.session,
            usage=self.session.usage,
            elapsed_s=self.elapsed(),
            stop_reason="interrupted" if interrupt else (self.session.stop_reason or "done"),
            steps=self.steps,
            interrupt=interrupt,
        )


async def _call_model(provider: Any, run: _Run) -> tuple[list[Step], Interrupt | None]:
    """One CALL_MODEL stage. Retryable provider errors become an `error` interrupt."""
    t0 = time.monotonic()
    try:
        completion = run.checked(await provider.complete(run.session.messages, tools=run.tool_specs()))
    except Exception as exc:
        if is_retryable(exc):
            return [], machine.model_error_interrupt(f"{type(exc).__name__}: {exc}")
        raise
    return [machine.apply_completion(run.session, completion, time.monotonic() - t0)], None


async def _checked_completion(provider: Any, run: _Run, messages: list[Message]) -> Completion:
    return run.checked(await provider.complete(messages, tools=run.tool_specs()))


async def arun(
    session: Session,
    provider: Any,
    registry: ToolRegistry | None = None,
    config: LoopConfig | None = None,
    runtime: Any = None,
    compaction: Any = None,
    middlewares: list[Middleware] | None = None,
    output: Any = None,
) -> RunResult:
    """Drive the Session until it finishes or interrupts. Mutates `session` in place.

    `output` is a `rein.blueprint.output.OutputSpec` for a run whose final answer has a type.
    """
    run = _Run(session, registry, config, output)
    logger.info(
        "run started",
        extra={"trace_id": run.run_id, "messages": len(session.messages), "tools": len(run.registry)},
    )
    while True:
        if isinstance(run.next_action(), machine.Finish):
            return run.result()
        if compaction is not None and run.session.stage == machine.Stage.CALL_MODEL:
            run.session.messages = await compaction.compact(run.session.messages)
        ctx = StepContext(run.session, run.session.stage, run.config, provider, run.registry, runtime)
        ctx = await run_step(
            ctx,
            middlewares or [],
            elapsed=run.elapsed,
            input_tools=run.input_tools,
            approval_tools=run.approval_tools,
            call_model=lambda messages: _checked_completion(provider, run, messages),
            run_tools=lambda calls: run.execute(calls, runtime),
        )
        run.session = ctx.session
        run.record(ctx.steps)
        if ctx.interrupt is not None:
            return run.interrupted(ctx.interrupt)


async def arun_streaming(
    session: Session, provider: Any, registry: ToolRegistry | None = None, config: LoopConfig | None = None,
    **options: Any,
) -> AsyncIterator[StreamChunk | RunResult]:
    """`arun` (the same steps, middleware included) that yields each model call's text and tool-call
    chunks as the provider streams them, then the RunResult. Closing it early cancels the run."""
    chunks: asyncio.Queue[StreamChunk | None] = asyncio.Queue()
    running = asyncio.ensure_future(arun(session, _Relaying(provider, chunks.put_nowait), registry, config, **options))
    running.add_done_callback(lambda _: chunks.put_nowait(None))
    try:
        while (chunk := await chunks.get()) is not None:
            yield chunk
        yield await running
    finally:
        running.cancel()


class _Relaying:
    """A provider whose `complete` is the wrapped provider's stream, each chunk worth showing passed
    to `out` as it comes; everything else is the wrapped provider's (middleware may look at it)."""

    def __init__(self, provider: Any, out: Any) -> None:
        self._provider = provider
        self._out = out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        """The stream folded (the durable model activity's rule); `complete` when the stream is a stub."""
        if not streams(self._provider):
            return await self._provider.complete(messages, tools=tools, **kwargs)
        fold, said, finished = StreamFold(), False, False
        async for chunk in self._provider.stream(messages, tools=tools, **kwargs):
            if not isinstance(chunk, StreamChunk):
                if said:
                    raise TypeError(f"the provider's stream yielded {type(chunk).__name__}, not a StreamChunk")
                return await self._provider.complete(messages, tools=tools, **kwargs)
            finished = finished or chunk.type == "done"
            if fold.add(chunk):
                said = True
                self._out(chunk)
        return fold.completion() if said or finished else await self._provider.complete(messages, tools=tools, **kwargs)


def run(
    session: Session,
    provider: Any,
    registry: ToolRegistry | None = None,
    config: LoopConfig | None = None,
    runtime: Any = None,
    compaction: Any = None,
    middlewares: list[Middleware] | None = None,
) -> RunResult:
    ensure_no_running_loop("run()", "arun(...)")
    return asyncio.run(arun(session, provider, registry, config, runtime, compaction, middlewares))


async def aresume(
    session: Session,
    provider: Any,
    registry: ToolRegistry | None = None,
    config: LoopConfig | None = None,
    *,
    approve: bool = True,
    answer: str | None = None,
    runtime: Any = None,
    compaction: Any = None,
    middlewares: list[Middleware] | None = None,
    output: Any = None,
    approver: str = "",
) -> RunResult:
    """Continue an interrupted (or finished) Session: decide the pending batch or add an answer (recorded as
    `approver`'s)."""
    machine.prepare_resume(session, approve, answer, input_tool_names(registry), approver)
    return await arun(session, provider, registry, config, runtime, compaction, middlewares, output)


def resume(session: Session, provider: Any, registry: ToolRegistry | None = None, config: LoopConfig | None = None, *, approve: bool = True, answer: str | None = None) -> RunResult:  # noqa: E501  (one string, read whole)
    ensure_no_running_loop("resume()", "aresume(...)")
    return asyncio.run(aresume(session, provider, registry, config, approve=approve, answer=answer))


async def step(
    session: Session,
    provider: Any,
    registry: ToolRegistry | None = None,
    config: LoopConfig | None = None,
    runtime: Any = None,
    output: Any = None,
) -> tuple[Session, list[Step], Interrupt | None]:
    """Advance exactly one stage (breakers are the caller's business, as in rein-agent)."""
    run = _Run(session, registry, config, output)
    if session.stage == machine.Stage.CALL_MODEL:
        steps, interrupt = await _call_model(provider, run)
        return session, steps, interrupt
    if session.stage == machine.Stage.RUN_TOOLS:
        action = machine._tool_stage_action(session, run.config, run.input_tools, run.approval_tools)
        if isinstance(action, machine.Wait):
            return session, [], action.interrupt
        return session, await run.run_tools(action.calls, runtime), None
    return session, [], None


async def astream(
    session: Session,
    provider: Any,
    registry: ToolRegistry | None = None,
    config: LoopConfig | None = None,
    runtime: Any = None,
    compaction: Any = None,
    output: Any = None,
) -> AsyncIterator[StreamChunk]:
    """Stream text as the model produces it; state advances exactly as in `arun`.

    Ends with one `done` chunk carrying the stop reason and cumulative usage. An
    interrupt ends the stream with an `interrupt` chunk (its Interrupt as `data`), then
    finish_reason "interrupted"; resume with `aresume`.
    """
    run = _Run(session, registry, config, output)
    interrupt: Interrupt | None = None
    while True:
        action = run.next_action()
        if isinstance(action, machine.Finish):
            break
        if isinstance(action, machine.Wait):
            session.stop_reason, interrupt = "interrupted", action.interrupt
            break
        if isinstance(action, machine.RunTools):
            run.record(await run.run_tools(action.calls, runtime))
            continue
        if compaction is not None:
            session.messages = await compaction.compact(session.messages)
        t0 = time.monotonic()
        fold = StreamFold()
        try:
            async for chunk in provider.stream(session.messages, tools=run.tool_specs()):
                if fold.add(chunk):
                    yield chunk
        except Exception as exc:
            if not is_retryable(exc):
                raise
            session.stop_reason = "interrupted"
            interrupt = machine.model_error_interrupt(f"{type(exc).__name__}: {exc}")
            break
        completion = run.checked(fold.completion())
        run.record([machine.apply_completion(session, completion, time.monotonic() - t0)])
    if interrupt is not None:
        yield StreamChunk(type="interrupt", data=interrupt.model_dump(mode="json"), finish_reason="interrupted",
                          usage=session.usage)
    yield StreamChunk(type="done", finish_reason=session.stop_reason or "done", usage=session.usage)

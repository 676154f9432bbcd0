"""Middleware: code wrapped around every step of a run, on both engines.

A middleware is `async def mw(ctx, call_next) -> ctx`; element 0 of the list is
the outermost layer. It may edit `ctx.session`, short-circuit by returning
without calling `call_next`, or read `ctx.steps` / `ctx.interrupt` afterwards.
`run_step` is the one place that applies the stack: the in-process runner calls
it in the caller's process, a durable run's activities call it on the worker
(where the live provider, tools and middleware are) and send the Session back.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from rein.blueprint.providers.fallback import is_retryable
from rein.core import machine
from rein.core.config import LoopConfig
from rein.core.ir import Completion, Message, ToolCall, ToolResult
from rein.core.result import Interrupt, Step
from rein.core.session import Session, Stage


class StepContext:
    """One step's inputs (session, stage at start, config, provider, registry, runtime) and outputs."""

    def __init__(
        self,
        session: Session,
        stage: Stage,
        config: LoopConfig,
        provider: Any,
        registry: Any,
        runtime: Any = None,
    ):
        self.session = session
        self.stage = stage
        self.config = config
        self.provider = provider
        self.registry = registry
        self.runtime = runtime
        self.steps: list[Step] = []
        self.interrupt: Interrupt | None = None
        self.emit: Callable[[str, StepContext], None] | None = None
        """Set by the durable driver: puts `agent.on` events on the run's stream too."""


CoreStep = Callable[[StepContext], Awaitable[StepContext]]
Middleware = Callable[[StepContext, CoreStep], Awaitable[StepContext]]
ModelCall = Callable[[list[Message]], Awaitable[Completion]]
"""How a driver gets one completion for the conversation (provider, tools and streaming are its business)."""
ToolRun = Callable[[list[ToolCall]], Awaitable[list[ToolResult]]]
"""How a driver executes a batch of tool calls; results in call order."""


async def run_step(
    ctx: StepContext,
    middlewares: list[Middleware],
    *,
    elapsed: Callable[[], float],
    input_tools: frozenset[str],
    approval_tools: frozenset[str] = frozenset(),
    call_model: ModelCall,
    run_tools: ToolRun,
) -> StepContext:
    """One step inside the middleware onion; the core does whatever the machine says is next.

    A retryable model error becomes an `error` interrupt (what the middleware sees);
    any other exception propagates through the middleware.
    """

    async def core(ctx: StepContext) -> StepContext:
        action = machine.next_action(ctx.session, ctx.config, elapsed(), input_tools, approval_tools)
        if isinstance(action, machine.Wait):
            ctx.interrupt = action.interrupt
        elif isinstance(action, machine.CallModel):
            began = time.monotonic()
            try:
                completion = await call_model(ctx.session.messages)
            except Exception as exc:
                if not is_retryable(exc):
                    raise
                ctx.interrupt = machine.model_error_interrupt(f"{type(exc).__name__}: {exc}")
                return ctx
            ctx.steps = [machine.apply_completion(ctx.session, completion, time.monotonic() - began)]
        elif isinstance(action, machine.RunTools):
            began = time.monotonic()
            results = await run_tools(action.calls) if action.calls else []
            ctx.steps = machine.apply_tool_results(ctx.session, results, time.monotonic() - began)
        return ctx

    return await dispatch(middlewares, ctx, core)


def require_async(fn: Any, what: str) -> None:
    """Hooks are awaited: a plain function would fail mid-run, on a worker; fail when it is registered."""
    call = getattr(fn, "__call__", None)  # noqa: B004  (a callable object: is its __call__ async?)
    if not callable(fn) or not (inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)):
        raise TypeError(f"{what} must be an async function (async def), got {fn!r}")


async def dispatch(middlewares: list[Middleware], ctx: StepContext, core: CoreStep) -> StepContext:
    """Run `core` inside the onion of `middlewares` (index 0 outermost)."""
    call: CoreStep = core
    for mw in reversed(middlewares):
        call = _wrap(mw, call)
    return await call(ctx)


def _wrap(mw: Middleware, call_next: CoreStep) -> CoreStep:
    async def layer(ctx: StepContext) -> StepContext:
        return await mw(ctx, call_next)

    return layer


def hook(stage: Stage, fn: Callable[[StepContext], Awaitable[Any]], *, before: bool) -> Middleware:
    """A before-hook returning exactly False skips the step; an after-hook only observes."""

    async def middleware(ctx: StepContext, call_next: CoreStep) -> StepContext:
        if before and ctx.stage == stage and (await fn(ctx)) is False:
            return ctx
        ctx = await call_next(ctx)
        if not before and ctx.stage == stage:
            await fn(ctx)
        return ctx

    return middleware


def event_middleware(handlers: dict[str, list[Callable[[StepContext], Any]]]) -> Middleware:
    """Read-only observers: "step" after every step, "tool" after tool steps (also put on a durable run's stream)."""

    async def middleware(ctx: StepContext, call_next: CoreStep) -> StepContext:
        ctx = await call_next(ctx)
        fired = ["step", "tool"] if ctx.stage == Stage.RUN_TOOLS else ["step"]
        for event in fired:
            for handler in handlers.get(event, []):
                handler(ctx)
            if ctx.emit is not None:
                ctx.emit(event, ctx)
        return ctx

    return middleware

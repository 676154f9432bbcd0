"""Middleware for the in-process runner: code wrapped around every step of a run.

A middleware is `async def mw(ctx, call_next) -> ctx`; element 0 of the list is
the outermost layer. It may edit `ctx.session`, short-circuit by returning
without calling `call_next`, or read `ctx.steps` / `ctx.interrupt` afterwards.
Middleware is arbitrary code with live objects, so it runs only in-process:
an Agent that has any runs on the local engine (see Agent._engine).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from rein.config import LoopConfig
from rein.result import Interrupt, Step
from rein.session import Session, Stage


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


CoreStep = Callable[[StepContext], Awaitable[StepContext]]
Middleware = Callable[[StepContext, CoreStep], Awaitable[StepContext]]


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
    """Read-only observers: "step" after every step, "tool" after tool steps."""

    async def middleware(ctx: StepContext, call_next: CoreStep) -> StepContext:
        ctx = await call_next(ctx)
        for handler in handlers.get("step", []):
            handler(ctx)
        if ctx.stage == Stage.RUN_TOOLS:
            for handler in handlers.get("tool", []):
                handler(ctx)
        return ctx

    return middleware

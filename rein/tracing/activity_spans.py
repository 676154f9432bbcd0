"""`chat {model}` and `execute_tool {name}` spans, emitted by the activities that do the work.

An activity runs once per attempt, so its spans are emitted once per attempt (a failed attempt
is its own span with an error status) and never again on replay. The parent is the context
temporalio's OpenTelemetry interceptor attached from the activity's headers: the run span.
Each span is exported before the activity reports back, and spans the worker's workflow tasks
ended (a decision) before the step starts (see rein.tracing.setup.flush).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from rein.blueprint.secrets import scrub
from rein.core.ir import Completion, ToolCall, ToolResult
from rein.tracing import genai
from rein.tracing.setup import enabled, flush, tracer


def _ignore(_: Any) -> None:
    return None


@contextlib.asynccontextmanager
async def _span(name: str, attributes: dict[str, Any], describe: Callable[[Any], dict[str, Any]]) -> AsyncIterator[Callable[[Any], None]]:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    kind = SpanKind.CLIENT if attributes.get("gen_ai.operation.name") == "chat" else SpanKind.INTERNAL
    await flush()  # what this worker's workflow tasks ended (an approval) goes out before the step can die
    try:
        with tracer().start_as_current_span(name, kind=kind, attributes=attributes, set_status_on_exception=False) as span:

            def record(result: Any) -> None:
                span.set_attributes(describe(result))
                if getattr(result, "is_error", False):
                    span.set_status(Status(StatusCode.ERROR, scrub(str(getattr(result, "content", "")))[:200]))

            try:
                yield record
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, scrub(f"{type(exc).__name__}: {exc}")[:500]))
                raise
    finally:
        await flush()


@contextlib.asynccontextmanager
async def chat_span(model: str, agent: str) -> AsyncIterator[Callable[[Completion], None]]:
    """Around one model call; call the yielded function with the completion."""
    if not enabled():
        yield _ignore
        return
    async with _span(genai.chat_name(model), genai.chat_request(model, agent), lambda c: genai.chat_response(model, c)) as record:
        yield record


@contextlib.asynccontextmanager
async def tool_span(call: ToolCall) -> AsyncIterator[Callable[[ToolResult], None]]:
    """Around one tool call; call the yielded function with the result."""
    if not enabled():
        yield _ignore
        return
    async with _span(genai.tool_name(call.name), genai.tool_request(call), genai.tool_response) as record:
        yield record

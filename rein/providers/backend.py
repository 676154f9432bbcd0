"""Adapt any `rein.llm.LlmBackend` (feishu-style streaming backend) into a rein provider.

A rein provider is any object with

* ``async complete(messages, tools=None, **kwargs) -> Completion`` and
* ``stream(messages, tools=None, **kwargs)``, an async generator of `StreamChunk`,

both speaking rein's IR (`rein.ir`). An `LlmBackend` speaks `rein.llm` instead:
it has only ``stream(*, messages, tools=(), system=None, **kwargs)`` yielding
`TextDelta` / `ToolCallDelta` / `MessageStop`. `BackendProvider` translates
both ways:

* rein ``system`` messages -> the backend's ``system`` argument (joined by a
  blank line when there are several);
* ``user`` text -> ``Message("user", [TextPart])``;
* ``assistant`` text and ``tool_calls`` -> ``TextPart`` + ``ToolUsePart`` blocks;
* consecutive ``tool`` messages -> one ``Message("tool", [ToolResultPart, ...])``
  (rein tool messages carry no error flag, so ``is_error`` is always False);
* rein ``ToolSpec.parameters`` -> ``ToolSpec.input_schema``;
* streamed ``ToolCallDelta`` fragments are merged by ``index`` and their JSON
  arguments parsed (invalid or non-object JSON -> ``{}`` with ``arguments_error`` set, so
  the tool does not run);
* ``StopReason`` -> ``finish_reason``: ``end_turn``/``refusal``/``other`` ->
  ``stop``, ``tool_use`` -> ``tool_calls``, ``max_tokens`` -> ``length``. Any
  answer that carries tool calls (and was not truncated) gets ``tool_calls``;
  ``tool_use`` without any tool call is reported as ``error``. A stream that
  ends without `MessageStop` counts as a normal end of turn.

Exceptions raised by the backend propagate unchanged.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from rein import llm
from rein.ir import Completion, Message, StreamChunk, ToolCall, ToolSpec, Usage, parse_tool_arguments

__all__ = [
    "BackendProvider",
    "as_provider",
    "finish_reason_for",
    "parse_arguments",
    "to_llm_messages",
    "to_llm_tools",
    "to_usage",
]


# ---------------------------------------------------------------- rein -> llm


def to_llm_messages(messages: Sequence[Message]) -> tuple[str | None, list[llm.Message]]:
    """Split rein messages into ``(system prompt or None, llm messages)``."""
    system_parts: list[str] = []
    out: list[llm.Message] = []
    for m in messages:
        if m.role == "system":
            if m.content:
                system_parts.append(m.content)
        elif m.role == "user":
            out.append(llm.Message(role="user", content=[llm.TextPart(text=m.content)]))
        elif m.role == "assistant":
            parts: list[llm.ContentPart] = []
            if m.content:
                parts.append(llm.TextPart(text=m.content))
            for tc in m.tool_calls or []:
                parts.append(llm.ToolUsePart(id=tc.id, name=tc.name, arguments=dict(tc.arguments)))
            if not parts:
                parts.append(llm.TextPart(text=""))
            out.append(llm.Message(role="assistant", content=parts))
        elif m.role == "tool":
            part = llm.ToolResultPart(tool_call_id=m.tool_call_id or "", content=m.content)
            if out and out[-1].role == "tool":
                out[-1].content.append(part)
            else:
                out.append(llm.Message(role="tool", content=[part]))
        else:  # pragma: no cover - rein.ir.Message validates the role
            raise ValueError(f"unsupported message role: {m.role!r}")
    system = "\n\n".join(system_parts) if system_parts else None
    return system, out


def to_llm_tools(tools: Sequence[ToolSpec] | None) -> tuple[llm.ToolSpec, ...]:
    return tuple(
        llm.ToolSpec(name=t.name, description=t.description, input_schema=dict(t.parameters))
        for t in tools or ()
    )


# ---------------------------------------------------------------- llm -> rein


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """Parse a tool call's JSON argument string; empty, invalid or non-object JSON gives ``{}``
    (the provider also records why on the call: `rein.ir.parse_tool_arguments`)."""
    return parse_tool_arguments(raw)[0]


def to_usage(raw: dict[str, Any] | None) -> Usage:
    """Map a `MessageStop.usage` dict onto rein `Usage`.

    Understands Anthropic (``input_tokens``/``output_tokens`` plus cache counters,
    which are added to the input) and OpenAI (``prompt_tokens``/``completion_tokens``)
    names, and an optional ``cost_usd``.
    """
    if not raw:
        return Usage()

    def num(*keys: str) -> int:
        for k in keys:
            v = raw.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return int(v)
        return 0

    input_tokens = (
        num("input_tokens", "prompt_tokens")
        + num("cache_creation_input_tokens")
        + num("cache_read_input_tokens")
    )
    output_tokens = num("output_tokens", "completion_tokens")
    cost = raw.get("cost_usd")
    cost_usd = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd)


def _stop_reason(value: Any) -> llm.StopReason | None:
    if value is None:
        return None
    if isinstance(value, llm.StopReason):
        return value
    try:
        return llm.StopReason(value)
    except ValueError:
        return llm.StopReason.OTHER


def finish_reason_for(stop_reason: llm.StopReason | str | None, has_tool_calls: bool) -> str:
    """rein ``finish_reason`` for a backend stop reason (None: the stream had no `MessageStop`)."""
    reason = _stop_reason(stop_reason)
    if reason is llm.StopReason.MAX_TOKENS:
        return "length"
    if has_tool_calls:
        return "tool_calls"
    if reason is llm.StopReason.TOOL_USE:
        return "error"  # the model said it called a tool, but no call arrived
    return "stop"


# ---------------------------------------------------------------- the provider


class BackendProvider:
    """A rein provider backed by any object satisfying `rein.llm.LlmBackend`."""

    def __init__(self, backend: llm.LlmBackend) -> None:
        if not isinstance(backend, llm.LlmBackend):
            raise TypeError(
                f"BackendProvider needs an object with a stream(*, messages, tools, system) "
                f"method (rein.llm.LlmBackend); got {type(backend).__name__}"
            )
        self.backend = backend

    def __repr__(self) -> str:
        return f"BackendProvider({self.backend!r})"

    async def _chunks(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None, kwargs: dict[str, Any]
    ) -> AsyncIterator[llm.StreamChunk | llm.ToolCall]:
        system, llm_messages = to_llm_messages(messages)
        result: Any = self.backend.stream(
            messages=llm_messages, tools=to_llm_tools(tools), system=system, **kwargs
        )
        if not hasattr(result, "__aiter__") and inspect.isawaitable(result):
            result = await result  # tolerate `async def stream(...)` returning an iterator
        if not hasattr(result, "__aiter__"):
            raise TypeError(
                f"{type(self.backend).__name__}.stream() must return an async iterator, "
                f"got {type(result).__name__}"
            )
        async for chunk in result:
            yield chunk

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None, **kwargs: Any
    ) -> AsyncIterator[StreamChunk]:
        """Yield text chunks as they arrive, then one ``tool_calls`` chunk (if any), then ``done``."""
        deltas: list[llm.ToolCallDelta] = []
        whole: list[llm.ToolCall] = []
        stop: llm.MessageStop | None = None
        async for chunk in self._chunks(messages, tools, kwargs):
            if isinstance(chunk, llm.TextDelta):
                if chunk.text:
                    yield StreamChunk(type="text", text=chunk.text)
            elif isinstance(chunk, llm.ToolCallDelta):
                deltas.append(chunk)
            elif isinstance(chunk, llm.MessageStop):
                stop = chunk
            elif isinstance(chunk, llm.ToolCall):  # lenient: an already merged call
                whole.append(chunk)
            else:
                raise TypeError(
                    f"{type(self.backend).__name__}.stream() yielded {type(chunk).__name__}; "
                    "expected TextDelta, ToolCallDelta or MessageStop"
                )
        calls = []
        for c in [*llm.merge_tool_call_deltas(deltas), *whole]:
            arguments, error = parse_tool_arguments(c.arguments)
            calls.append(ToolCall(id=c.id, name=c.name, arguments=arguments, arguments_error=error))
        if calls:
            yield StreamChunk(type="tool_calls", tool_calls=calls)
        yield StreamChunk(
            type="done",
            usage=to_usage(stop.usage if stop else None),
            finish_reason=finish_reason_for(stop.stop_reason if stop else None, bool(calls)),
        )

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None, **kwargs: Any
    ) -> Completion:
        """Run one streamed turn to the end and assemble it into a `Completion`."""
        text: list[str] = []
        calls: list[ToolCall] = []
        usage = Usage()
        finish_reason = "stop"
        async for chunk in self.stream(messages, tools, **kwargs):
            if chunk.type == "text":
                text.append(chunk.text)
            elif chunk.type == "tool_calls":
                calls.extend(chunk.tool_calls or [])
            else:
                usage = chunk.usage or Usage()
                finish_reason = chunk.finish_reason or "stop"
        return Completion(
            message=Message(role="assistant", content="".join(text), tool_calls=calls or None),
            usage=usage,
            finish_reason=finish_reason,
        )


def as_provider(obj: Any) -> Any:
    """Return a rein provider for ``obj``.

    Objects that already have ``complete`` are returned unchanged; objects that
    satisfy `rein.llm.LlmBackend` are wrapped in `BackendProvider`; anything
    else raises TypeError.
    """
    if callable(getattr(obj, "complete", None)):
        return obj
    if isinstance(obj, llm.LlmBackend):
        return BackendProvider(obj)
    raise TypeError(
        f"cannot use {type(obj).__name__} as a model provider: expected a rein provider "
        "(an object with an async complete(messages, tools=None, **kwargs) method) or a "
        "rein.llm.LlmBackend (an object with a stream(*, messages, tools=(), system=None, "
        "**kwargs) method)"
    )

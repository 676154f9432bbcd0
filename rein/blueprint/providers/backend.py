"""Adapt any `rein.blueprint.llm.LlmBackend` (feishu-style streaming backend) into a rein provider.

A rein provider is any object with

* ``async complete(messages, tools=None, **kwargs) -> Completion`` and
* ``stream(messages, tools=None, **kwargs)``, an async generator of `StreamChunk`,

both speaking rein's IR (`rein.core.ir`). An `LlmBackend` speaks `rein.blueprint.llm` instead:
it has only ``stream(*, messages, tools=(), system=None, **kwargs)`` yielding
`TextDelta` / `ToolCallDelta` / `MessageStop`. `BackendProvider` translates
both ways with `rein.blueprint.llm`'s conversions (the one place they live):

* rein ``system`` messages -> the backend's ``system`` argument (joined by a
  blank line when there are several);
* ``user`` text -> ``Message("user", [TextPart])``;
* ``assistant`` text and ``tool_calls`` -> ``TextPart`` + ``ToolUsePart`` blocks;
* consecutive ``tool`` messages -> one ``Message("tool", [ToolResultPart, ...])``
  (rein tool messages carry no error flag, so ``is_error`` is always False);
* rein ``ToolSpec.parameters`` -> ``ToolSpec.input_schema``;
* streamed ``ToolCallDelta`` fragments are merged by ``index`` and their JSON
  arguments parsed (invalid or non-object JSON -> ``{}``);
* ``StopReason`` -> ``finish_reason``: ``end_turn``/``refusal``/``other`` ->
  ``stop``, ``tool_use`` -> ``tool_calls``, ``max_tokens`` -> ``length``. Any
  answer that carries tool calls (and was not truncated) gets ``tool_calls``;
  ``tool_use`` without any tool call is reported as ``error``. A stream that
  ends without `MessageStop` counts as a normal end of turn.

Exceptions raised by the backend propagate unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Sequence
from typing import Any

from rein.blueprint import llm
from rein.blueprint.llm import finish_reason_for, parse_arguments, to_llm_messages, to_llm_tools
from rein.blueprint.llm import to_ir_usage as to_usage
from rein.core.ir import Completion, Message, StreamChunk, StreamFold, ToolSpec

__all__ = [
    "BackendProvider",
    "as_provider",
    "finish_reason_for",
    "parse_arguments",
    "to_llm_messages",
    "to_llm_tools",
    "to_usage",
]


# ---------------------------------------------------------------- the provider


class BackendProvider:
    """A rein provider backed by any object satisfying `rein.blueprint.llm.LlmBackend`."""

    def __init__(self, backend: llm.LlmBackend) -> None:
        if not isinstance(backend, llm.LlmBackend):
            raise TypeError(
                f"BackendProvider needs an object with a stream(*, messages, tools, system) "
                f"method (rein.blueprint.llm.LlmBackend); got {type(backend).__name__}"
            )
        self.backend = backend

    def __repr__(self) -> str:
        return f"BackendProvider({self.backend!r})"

    async def _chunks(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None, kwargs: dict[str, Any]
    ) -> AsyncIterator[Any]:
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
        source = f"{type(self.backend).__name__}.stream()"
        async for chunk in llm.to_ir_stream(self._chunks(messages, tools, kwargs), source):
            yield chunk

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None, **kwargs: Any
    ) -> Completion:
        """Run one streamed turn to the end and fold it into a `Completion`."""
        fold = StreamFold()
        async for chunk in self.stream(messages, tools, **kwargs):
            fold.add(chunk)
        return fold.completion()


def as_provider(obj: Any) -> Any:
    """Return a rein provider for ``obj``.

    Objects that already have ``complete`` are returned unchanged; objects that
    satisfy `rein.blueprint.llm.LlmBackend` are wrapped in `BackendProvider`; anything
    else raises TypeError.
    """
    if callable(getattr(obj, "complete", None)):
        return obj
    if isinstance(obj, llm.LlmBackend):
        return BackendProvider(obj)
    raise TypeError(
        f"cannot use {type(obj).__name__} as a model provider: expected a rein provider "
        "(an object with an async complete(messages, tools=None, **kwargs) method) or a "
        "rein.blueprint.llm.LlmBackend (an object with a stream(*, messages, tools=(), system=None, "
        "**kwargs) method)"
    )

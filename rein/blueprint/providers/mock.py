"""MockProvider: an offline, deterministic Provider that plays back a script.

Script items, consumed in order by both `complete` and `stream`:
- `str`: a text answer (finish "stop");
- `Completion`: returned as-is;
- an `Exception` instance: raised, which is how tests script provider failures;
- anything else: an iterable of ToolCall (finish "tool_calls").
An exhausted script answers a fixed closing text, so a loop can never hang on it.
The provider is stateful: concurrent runs sharing one instance interleave the script.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from rein.core.ir import Completion, Message, StreamChunk, ToolSpec, Usage

EXHAUSTED_TEXT = "[MockProvider: script exhausted]"


class MockProvider:
    def __init__(self, responses: list, usage_per_call: Usage | None = None):
        self._responses = list(responses)
        self._index = 0
        self.usage_per_call = usage_per_call or Usage(input_tokens=1, output_tokens=1)

    def _next(self) -> Completion:
        """Consume one script item and turn it into a Completion (or raise it)."""
        if self._index >= len(self._responses):
            item: Any = EXHAUSTED_TEXT
        else:
            item = self._responses[self._index]
            self._index += 1
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Completion):
            return item
        if isinstance(item, str):
            return Completion(message=Message(role="assistant", content=item),
                              finish_reason="stop", usage=self.usage_per_call)
        return Completion(message=Message(role="assistant", content="", tool_calls=list(item)),
                          finish_reason="tool_calls", usage=self.usage_per_call)

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec] | None = None, **kwargs: Any
    ) -> Completion:
        return self._next()

    async def stream(
        self, messages: list[Message], tools: list[ToolSpec] | None = None, **kwargs: Any
    ) -> AsyncIterator[StreamChunk]:
        exhausted = self._index >= len(self._responses)
        c = self._next()
        if c.message.content:
            # The closing text is one chunk; scripted text goes out per character.
            parts = [c.message.content] if exhausted else list(c.message.content)
            for ch in parts:
                yield StreamChunk(type="text", text=ch)
        if c.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=c.message.tool_calls)
        yield StreamChunk(type="done", finish_reason=c.finish_reason, usage=c.usage)

"""The Provider protocol: the one boundary between rein's IR and model vendors.

Structural (duck-typed): anything with matching `complete` and `stream` methods
is a Provider, no inheritance needed. It is runtime-checkable so callers can
`isinstance(x, Provider)`; that check needs both methods to be present.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

from rein.ir import Completion, Message, StreamChunk, ToolSpec


@runtime_checkable
class Provider(Protocol):
    async def complete(
        self, messages: list[Message], tools: list[ToolSpec] | None = None, **kwargs: Any
    ) -> Completion:
        """Send the conversation (and optional tools); return one full answer."""
        ...

    def stream(
        self, messages: list[Message], tools: list[ToolSpec] | None = None, **kwargs: Any
    ) -> AsyncIterator[StreamChunk]:
        """Async generator: text chunks, at most one tool_calls chunk, then one done chunk."""
        ...


def streams(provider: Any) -> bool:
    """Whether to answer with the provider's `stream`: it has one, and no subclass overrode only
    `complete` below it (a MockProvider subclass that answers in `complete` means that answer).
    Both engines ask it: the durable model activity (activities/answers.py) and the local one."""
    if not callable(getattr(provider, "stream", None)):
        return False
    mro = type(provider).__mro__
    streamer = next((c for c in mro if "stream" in vars(c)), None)
    completer = next((c for c in mro if "complete" in vars(c)), None)
    return streamer is None or completer is None or issubclass(streamer, completer)

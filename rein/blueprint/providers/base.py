"""The Provider protocol: the one boundary between rein's IR and model vendors.

Structural (duck-typed): anything with matching `complete` and `stream` methods
is a Provider, no inheritance needed. It is runtime-checkable so callers can
`isinstance(x, Provider)`; that check needs both methods to be present.

A run answers with `complete` unless its caller asked for a stream; a provider whose `stream` is
the same answer says so (`stream_is_complete`, see `streams_its_answer`) and then streams either
way, so a reader who attaches mid-call gets live text (docs/streaming.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

from rein.core.ir import Completion, Message, StreamChunk, ToolSpec


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


SAME_ANSWER = frozenset({
    "rein.blueprint.providers.litellm.LiteLLMProvider",  # `stream` is the same vendor call with stream=True
    "rein.blueprint.providers.mock.MockProvider",  # both play the same script item
    "rein.blueprint.providers.backend.BackendProvider",  # `complete` folds `stream`
})
"""rein's providers whose `stream` is their `complete` answer (another provider says so itself)."""


def streams_its_answer(provider: Any) -> bool:
    """Whether the provider's `stream` is its `complete` answer told as it comes, so streaming a call
    nobody asked to stream cannot change what the run records (its text can then go live for a
    reader who attaches mid-call).

    A provider says so with the class attribute `stream_is_complete = True`. It counts only when said
    by a class at or below both methods: a subclass that overrides either one has not said it.
    """
    if not streams(provider):
        return False
    mro = type(provider).__mro__
    said = (c for c in mro if "stream_is_complete" in vars(c) or f"{c.__module__}.{c.__qualname__}" in SAME_ANSWER)
    sayer = next(said, None)
    if sayer is None or vars(sayer).get("stream_is_complete", True) is not True:
        return False
    definers = [next((c for c in mro if name in vars(c)), None) for name in ("stream", "complete")]
    return all(c is not None and issubclass(sayer, c) for c in definers)


def streams(provider: Any) -> bool:
    """Whether a call that streams answers with the provider's `stream`: it has one, and no subclass
    overrode only `complete` below it (a MockProvider subclass that answers in `complete` means that
    answer). Both engines ask it: the durable model activity (activities/answers.py) and the local one."""
    if not callable(getattr(provider, "stream", None)):
        return False
    mro = type(provider).__mro__
    streamer = next((c for c in mro if "stream" in vars(c)), None)
    completer = next((c for c in mro if "complete" in vars(c)), None)
    return streamer is None or completer is None or issubclass(streamer, completer)

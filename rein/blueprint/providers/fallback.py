"""FallbackProvider: try [primary, backups...] in order, switching only on retryable errors.

Transient failures (rate limits, timeouts, 5xx) are worth another attempt or
another vendor; fatal ones (bad key, bad request, context too long) would fail
the same way everywhere, so they are raised at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from rein.blueprint.providers.errors import MissingApiKey
from rein.core.ir import Completion, Message, StreamChunk, ToolSpec

_RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_FATAL_STATUS = frozenset({400, 401, 403, 404, 405, 422})
# Fatal words are checked first: "AuthenticationTimeout"-style names stay fatal.
_FATAL_NAMES = ("authentication", "permission", "notfound", "badrequest", "invalidrequest",
                "unprocessable", "contextwindow")
_RETRYABLE_NAMES = ("ratelimit", "timeout", "serviceunavailable", "apiconnection", "overloaded",
                    "internalserver", "tryagain")


def _status_of(e: BaseException) -> int | None:
    """The first int among the attributes SDKs use for an HTTP status."""
    for attr in ("status_code", "code", "http_status", "status"):
        value = getattr(e, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def is_retryable(e: BaseException) -> bool:
    """Decide by HTTP status, then by class name; unknown errors are not retried."""
    if isinstance(e, MissingApiKey):
        return False
    status = _status_of(e)
    if status in _RETRYABLE_STATUS:
        return True
    if status in _FATAL_STATUS:
        return False
    name = type(e).__name__.lower()
    if any(word in name for word in _FATAL_NAMES):
        return False
    return any(word in name for word in _RETRYABLE_NAMES)


class FallbackProvider:
    """A Provider over other providers; transparent to the loop.

    In-process runs try the chain here (with `max_retries_per_provider` and a short backoff).
    Durable runs do not: each model-call activity attempt uses one provider (`for_attempt`),
    so Temporal's retry policy is the only retry loop and the history shows every attempt.
    """

    def __init__(self, providers: list, *, max_retries_per_provider: int = 1, base_delay: float = 0.5):
        if not providers:
            raise ValueError("FallbackProvider needs at least one provider.")
        self.providers = list(providers)
        self.max_retries_per_provider = max_retries_per_provider
        self.base_delay = base_delay

    def for_attempt(self, attempt: int) -> object:
        """The provider a durable run's `attempt` (1-based) uses: the chain in order, then round again."""
        return self.providers[(max(attempt, 1) - 1) % len(self.providers)]

    async def _backoff(self, attempt: int) -> None:
        if self.base_delay > 0:
            await asyncio.sleep(self.base_delay * 2**attempt)

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec] | None = None, **kwargs: Any
    ) -> Completion:
        last: BaseException | None = None
        for provider in self.providers:
            attempts = max(self.max_retries_per_provider, 0) + 1
            for attempt in range(attempts):
                try:
                    return await provider.complete(messages, tools, **kwargs)
                except Exception as e:
                    if not is_retryable(e):
                        raise
                    last = e
                    if attempt + 1 < attempts:
                        await self._backoff(attempt)
        assert last is not None
        raise last

    async def stream(
        self, messages: list[Message], tools: list[ToolSpec] | None = None, **kwargs: Any
    ) -> AsyncIterator[StreamChunk]:
        """Like complete, but once a chunk has gone out, a failure is raised as is:
        the consumer has already seen part of one answer, so no other may follow."""
        last: BaseException | None = None
        for provider in self.providers:
            attempts = max(self.max_retries_per_provider, 0) + 1
            for attempt in range(attempts):
                started = False
                try:
                    async for chunk in provider.stream(messages, tools, **kwargs):
                        started = True
                        yield chunk
                    return
                except Exception as e:
                    if started or not is_retryable(e):
                        raise
                    last = e
                    if attempt + 1 < attempts:
                        await self._backoff(attempt)
        assert last is not None
        raise last

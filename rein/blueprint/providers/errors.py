"""What a model vendor's failure means for the durable engine: when to retry, and how to say it.

Retries belong to Temporal (the model activity's retry policy), so nothing here sleeps:
it reads the vendor's `Retry-After` for Temporal to honour, and turns the failures a person
must fix (no key, a rejected key) into one clear sentence.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator, Mapping
from typing import Any

MAX_RETRY_AFTER_S = 3600.0
"""A vendor asking for more than an hour is capped; the retry policy's attempts still apply."""


class MissingApiKey(Exception):
    """The worker has no API key for the model's vendor: retrying cannot help."""

    status_code = 401


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _headers(exc: BaseException) -> Mapping[str, Any] | None:
    response = getattr(exc, "response", None)
    for candidate in (getattr(response, "headers", None), getattr(exc, "litellm_response_headers", None),
                      getattr(exc, "headers", None)):
        if candidate is not None and hasattr(candidate, "get"):
            return candidate
    return None


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the vendor asked us to wait (`retry-after-ms`, `retry-after` seconds or HTTP date), or None."""
    for current in _chain(exc):
        headers = _headers(current)
        if headers is None:
            continue
        try:
            millis = headers.get("retry-after-ms")
            if millis is not None:
                return min(max(float(millis) / 1000, 0.0), MAX_RETRY_AFTER_S)
            value = headers.get("retry-after")
            if value is None:
                continue
            try:
                seconds = float(value)
            except ValueError:
                parsed = email.utils.parsedate_to_datetime(str(value))
                seconds = parsed.timestamp() - time.time()
            return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
        except (TypeError, ValueError, OverflowError):
            continue
    return None


def status_of(exc: BaseException) -> int | None:
    for current in _chain(exc):
        for attr in ("status_code", "http_status", "status", "code"):
            value = getattr(current, attr, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def failure_message(exc: BaseException, model: str) -> str:
    """One sentence a person can act on for key problems; the vendor's own words otherwise."""
    if isinstance(exc, MissingApiKey):
        return str(exc)
    status = status_of(exc)
    if status in (401, 403):
        return (
            f"The vendor rejected the API key for {model} (HTTP {status}): check the key in the worker's "
            f"environment. ({type(exc).__name__}: {str(exc)[:300]})"
        )
    return f"{type(exc).__name__}: {exc}"

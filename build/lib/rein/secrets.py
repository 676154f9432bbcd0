"""Keep API keys out of anything that reaches Temporal history: errors, results, logs.

Keys live in the worker's environment (and sometimes in provider parameters);
whatever text leaves a worker passes through here first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)


def secret_values(params: Mapping[str, Any] | None = None) -> list[str]:
    """Secret-looking environment values and parameter values, longest first."""
    found = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    found |= {
        v for k, v in (params or {}).items() if isinstance(v, str) and len(v) >= 4 and _SECRET_NAME.search(k)
    }
    return sorted(found, key=len, reverse=True)


def scrub(text: str, params: Mapping[str, Any] | None = None) -> str:
    """`text` with every secret value replaced."""
    for value in secret_values(params):
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def scrub_exception(exc: BaseException, params: Mapping[str, Any] | None = None) -> None:
    """Redact secrets in place along the exception chain, keeping type and status code intact."""
    secrets = secret_values(params)
    if not secrets:
        return

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            for secret in secrets:
                value = value.replace(secret, REDACTED)
        return value

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(clean(a) for a in current.args)
        for attr in ("message", "detail", "litellm_debug_info"):
            value = getattr(current, attr, None)
            if isinstance(value, str):
                try:
                    setattr(current, attr, clean(value))
                except Exception:  # read-only attribute: args were cleaned already
                    pass
        current = current.__cause__ or current.__context__

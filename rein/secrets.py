"""Keep API keys out of anything that reaches Temporal history: errors, results, logs."""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)


def _secret_values() -> list[str]:
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    return sorted(values, key=len, reverse=True)


def scrub(text: str) -> str:
    """Replace every secret-looking environment value that occurs in `text`."""
    for value in _secret_values():
        if value in text:
            text = text.replace(value, "***")
    return text

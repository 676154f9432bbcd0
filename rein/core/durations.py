"""Durations as people type them: `30s`, `10m`, `24h`, `7d`."""

from __future__ import annotations

import re
from datetime import timedelta

_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(text: str) -> timedelta:
    """`7d` -> 7 days; a ValueError naming the text otherwise."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration like 30m, 1h or 2d")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})

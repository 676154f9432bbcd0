"""Durations as people type them: `30s`, `10m`, `24h`, `7d`, or a sum (`1h30m`)."""

from __future__ import annotations

import re
from datetime import timedelta

_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str) -> timedelta:
    """`7d` -> 7 days, `1h30m` -> 90 minutes; a ValueError naming the text otherwise (also for nothing at all)."""
    parts = _DURATION.fullmatch(text.strip())
    if not text.strip() or parts is None:
        raise ValueError(f"{text!r} is not a duration like 30s, 10m, 2h or 1h30m")
    days, hours, minutes, seconds = (int(p or 0) for p in parts.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)

"""Sync entry points over async code: `Agent.run`, `rein.run`, `Chat.send` refuse a running event loop."""

from __future__ import annotations

import asyncio

_IN_LOOP_MESSAGE = (
    "rein: {call} was called inside a running event loop (Jupyter, a web server, async code); "
    "use `await {alternative}` instead."
)


def ensure_no_running_loop(call: str, alternative: str) -> None:
    """Raise with the async alternative when called inside a running loop (asyncio.run would fail obscurely)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(_IN_LOOP_MESSAGE.format(call=call, alternative=alternative))

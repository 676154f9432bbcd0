"""The runners an Agent can run on, by engine name: a small registry the runners are entered in.

The blueprint imports no runner (the runners import agents): `rein/__init__.py` registers the built-in two
("local": rein.local.loop, "temporal": rein.durable.engine), each loaded on first use, and anyone may add one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_RUNNERS: dict[str, Callable[[], Any]] = {}


def register_runner(engine: str, load: Callable[[], Any]) -> None:
    """Enter `engine`: `load()` returns its runner (a module or object with arun/run_session/...)."""
    _RUNNERS[engine] = load


def runner(engine: str) -> Any:
    """The runner of `engine` ("local" or "temporal", or one registered)."""
    try:
        load = _RUNNERS[engine]
    except KeyError:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(sorted(_RUNNERS))}") from None
    return load()


def engines() -> list[str]:
    return sorted(_RUNNERS)

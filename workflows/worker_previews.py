"""What the worker processes' rein workers serve, by task queue, for a run's first model call.

A lean start (rein.workflows.start) schedules the run's first model call before the run knows its
agent: the description comes back with the call's result. That command's options (task queue,
timeouts, retries, summary) are not part of the command sequence Temporal replays, so they may come
from the worker that schedules it: this registry, filled by ReinPlugin as it configures a worker.
What a run acts on is never read here, only the recorded description; whether a new run asks first is
read here once and recorded with the run (a patch marker), so its replay does not read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rein.core.config import LoopConfig

LEAN_START_ENV = "REIN_LEAN_START"


@dataclass(frozen=True)
class Preview:
    """An agent as its worker defines it, for the options of a run's first model call."""

    model: str
    config: LoopConfig
    model_queue: str | None = None
    steps_on_worker: bool = False
    """The agent has middleware or compaction: its first step is not a plain model call, so a run of it
    learns the agent first (a describe marker costs less than a first call that can only describe)."""


_previews: dict[tuple[str, str], Preview] = {}
_lean: dict[str, bool] = {}


def serve(task_queue: str, previews: Mapping[str, Preview], lean_start: bool) -> None:
    """A worker on `task_queue` serves these agents (by the names runs use); `lean_start`: its new runs start lean."""
    for name, preview in previews.items():
        _previews[(task_queue, name)] = preview
    _lean[task_queue] = lean_start


def preview(task_queue: str, agent: str) -> Preview | None:
    return _previews.get((task_queue, agent)) or _previews.get((task_queue, agent.split("#", 1)[0]))


def lean_start(task_queue: str) -> bool:
    return _lean.get(task_queue, False)

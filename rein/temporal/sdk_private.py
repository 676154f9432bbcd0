"""The places rein reaches into private parts of temporalio or the standard library, in one module.

Each has no public equivalent today; each is used for one reason given below. When a temporalio or
Python upgrade breaks one, this module is the only place to look: pyproject.toml bounds temporalio to
the releases the suite ran, and tests/test_layers.py names each reach and fails where one is gone.
Each runs in a client or at exit, never in workflow code or on a worker's task path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def query_handler(instance: Any, name: str) -> Callable[..., Any]:
    """The query handler `name` of a workflow object (a history replayed in the caller answers queries
    without a worker: rein.temporal.history). temporalio keeps handler definitions in `_Definition`."""
    from temporalio import workflow

    definition = workflow._Definition.must_from_class(type(instance))
    fn = definition.queries[name].fn
    return lambda *args: fn(instance, *args)


def forget_default_runtime() -> None:
    """Drop temporalio's default Runtime at exit so its Rust core is freed before interpreter teardown
    (otherwise its threads may outlive the objects they use); the module-level reference is the only one."""
    from temporalio import runtime

    runtime._runtime_ref._default_runtime = None  # type: ignore[attr-defined]


def at_exit_before_threads_join(fn: Callable[[], None]) -> None:
    """Run `fn` when the interpreter starts to exit, before it joins non-daemon threads and shuts the
    default executors down: the engine's worker still needs them to finish. `atexit` runs too late."""
    threading._register_atexit(fn)  # type: ignore[attr-defined]


def stream_log(stream: Any) -> tuple[list[Any], int]:
    """The retained items of a WorkflowStream and the offset of the first, read from a replayed
    workflow object (rein.temporal.history.stream_items: a closed run's stream with no worker to poll).
    The public `get_state()` needs a running workflow's clock; a finished replay has none."""
    return stream._log, stream._base_offset

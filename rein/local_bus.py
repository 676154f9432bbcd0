"""A process-local side channel from in-process worker activities to rein's client side.

Temporal carries results and errors between processes; this only adds what a
caller in the *same* process can use on top: live stream chunks for
`Agent.astream`, and the original exception object of a fatal model error (so
`Agent.run` raises what the provider raised, as the local engine does).
Nothing here is needed for correctness: a remote worker simply never publishes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from rein.ir import StreamChunk

_lock = threading.Lock()
_listeners: dict[str, Callable[[StreamChunk], None]] = {}
_errors: dict[str, BaseException] = {}


def listen(run_id: str, queue: asyncio.Queue[StreamChunk]) -> None:
    """Deliver chunks for `run_id` into `queue`, on the loop that is running now."""
    loop = asyncio.get_running_loop()
    with _lock:
        _listeners[run_id] = lambda chunk: loop.call_soon_threadsafe(queue.put_nowait, chunk)


def stop_listening(run_id: str) -> None:
    with _lock:
        _listeners.pop(run_id, None)


def has_listener(run_id: str) -> bool:
    with _lock:
        return run_id in _listeners


def publish(run_id: str, chunk: StreamChunk) -> None:
    with _lock:
        deliver = _listeners.get(run_id)
    if deliver is not None:
        deliver(chunk)


def record_error(run_id: str, error: BaseException) -> None:
    with _lock:
        _errors[run_id] = error


def take_error(run_id: str) -> Any:
    with _lock:
        return _errors.pop(run_id, None)

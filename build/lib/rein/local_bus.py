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
_sent: dict[str, int] = {}


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


class AttemptStream:
    """Publishes one model call's chunks so that a retried attempt never repeats text.

    Keyed by the activity id, which stays the same across Temporal retries: a
    retry publishes only the text beyond what earlier attempts already sent.
    """

    def __init__(self, run_id: str, call_key: str):
        self.run_id = run_id
        self.key = f"{run_id}/{call_key}"
        with _lock:
            self.already = _sent.get(self.key, 0)
        self.position = 0

    def text(self, chunk: StreamChunk) -> None:
        start, self.position = self.position, self.position + len(chunk.text)
        if self.position <= self.already:
            return
        if start < self.already:
            chunk = chunk.model_copy(update={"text": chunk.text[self.already - start :]})
        with _lock:
            _sent[self.key] = self.position
        publish(self.run_id, chunk)

    def other(self, chunk: StreamChunk) -> None:
        publish(self.run_id, chunk)

    def finished(self) -> None:
        with _lock:
            _sent.pop(self.key, None)

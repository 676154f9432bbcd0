"""Publishing to a durable run's stream from inside rein's activities.

The run's workflow hosts the stream (temporalio.contrib.workflow_streams); an activity
publishes with signals, batched. `publish_event` is how middleware and hooks running
inside `rein.call_model` / `rein.run_tool` put their records on the same stream.
Streaming is observation: a failure to publish is logged and never fails the activity.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio.contrib.workflow_streams import TopicHandle, WorkflowStreamClient

from rein.events import TOPIC, StreamEvent
from rein.ir import StreamChunk

log = logging.getLogger("rein.stream")

BATCH_INTERVAL = timedelta(milliseconds=200)
"""How often buffered items are signalled: each batch is one signal (one history event)."""

_current: contextvars.ContextVar[RunStream | None] = contextvars.ContextVar("rein_run_stream", default=None)


class RunStream:
    """The stream of the run whose activity is running: buffered publishes, flushed in batches."""

    def __init__(self, client: WorkflowStreamClient):
        self.client = client
        self.topic: TopicHandle[Any] = client.topic(TOPIC)

    def publish(self, chunk: StreamChunk, *, source: str = "", offset: int = 0, now: bool = False) -> None:
        self.topic.publish(StreamEvent(chunk=chunk, source=source, offset=offset).to_json(), force_flush=now)


@contextlib.asynccontextmanager
async def activity_stream() -> AsyncIterator[RunStream]:
    """Open the current activity's run stream for the duration of the block (flushed at its end)."""
    stream = RunStream(WorkflowStreamClient.from_within_activity(batch_interval=BATCH_INTERVAL))
    token = _current.set(stream)
    entered = False
    try:
        await stream.client.__aenter__()
        entered = True
        yield stream
    finally:
        _current.reset(token)
        if entered:
            try:
                await stream.client.__aexit__(None, None, None)
            except Exception as exc:  # the run may have ended; the stream never fails the activity
                log.warning("could not publish to the run's stream: %s", exc)


def current_stream() -> RunStream | None:
    """The stream opened by the running rein activity, if any."""
    return _current.get()


def publish_event(name: str, data: dict[str, Any] | None = None) -> None:
    """Put an `event` chunk (`name`, JSON `data`) on the stream of the run being served.

    For middleware and hooks: call it while `rein.call_model` or `rein.run_tool` runs
    (from inside them). Subscribers (`ReinClient.stream`) see it in order with the run's
    text, steps and interrupts.
    """
    stream = _current.get()
    if stream is None:
        raise RuntimeError("publish_event works only inside a rein activity (rein.call_model / rein.run_tool)")
    stream.publish(StreamChunk(type="event", name=name, data=data))


class ModelText:
    """Publishes one model call's text deltas with their offsets in the answer (see StreamEvent)."""

    def __init__(self, stream: RunStream, source: str):
        self.stream = stream
        self.source = source
        self.position = 0

    def text(self, chunk: StreamChunk) -> None:
        self.stream.publish(chunk, source=self.source, offset=self.position, now=self.position == 0)
        self.position += len(chunk.text)

    def tool_calls(self, chunk: StreamChunk) -> None:
        self.stream.publish(chunk)

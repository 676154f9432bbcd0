"""Publishing to a durable run's stream from inside rein's activities.

The run's workflow hosts the stream (temporalio.contrib.workflow_streams); an activity
publishes with signals, batched. `publish_event` is how middleware and hooks running
inside `rein.call_model` / `rein.run_tool` put their records on the same stream.
Streaming is observation: a failure to publish is logged and never fails the activity.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowQueryFailedError
from temporalio.contrib.workflow_streams import TopicHandle, WorkflowStreamClient

from rein.core.contract import READERS_QUERY
from rein.core.events import TOPIC, StreamEvent, reasoning_source
from rein.core.ir import StreamChunk

log = logging.getLogger("rein.stream")

BATCH_INTERVAL = timedelta(milliseconds=100)
"""The least time between two signals of one activity: each batch is one signal (one history
event). The first item after a quiet spell goes at once; a steady stream goes in batches."""
READER_CHECK = timedelta(milliseconds=500)
"""When a model call nobody reads first asks its run whether a reader has turned up (one query,
a workflow task on the worker holding the run); the wait doubles up to READER_CHECK_MAX."""
READER_CHECK_MAX = timedelta(seconds=2)

_current: contextvars.ContextVar[RunStream | None] = contextvars.ContextVar("rein_run_stream", default=None)


class RunStream:
    """The stream of the run whose activity is running: buffered publishes, signalled in batches.

    Opened on the first publish: most activities publish nothing (no reader asked for live
    text, no middleware event), and those cost no stream client at all. rein runs its own
    batching loop instead of the client's context manager: that flusher waits with
    `asyncio.wait_for`, which on Python 3.11 can swallow the cancellation that stops it when
    a force-flush lands at the same moment, and the activity then never completes.
    """

    def __init__(self) -> None:
        self.client: WorkflowStreamClient | None = None
        self.topic: TopicHandle[Any] | None = None
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    def publish(self, chunk: StreamChunk, *, source: str = "", offset: int = 0) -> None:
        """Buffer one chunk, signalled at once or with the batch under way (see BATCH_INTERVAL).

        Safe from a sync tool's thread: the batching runs on the activity's loop.
        """
        if self.topic is None:
            self.client = WorkflowStreamClient.from_within_activity()
            self.topic = self.client.topic(TOPIC)
        self.topic.publish(StreamEvent(chunk=chunk, source=source, offset=offset).to_json())
        self._loop.call_soon_threadsafe(self._flush_soon)

    def _flush_soon(self) -> None:
        if self._closed:
            return
        if self._flusher is None:
            self._flusher = self._loop.create_task(self._flush_batches())
        self._wake.set()

    async def _flush_batches(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            began = self._loop.time()
            await self._send()
            await asyncio.sleep(max(0.0, BATCH_INTERVAL.total_seconds() - (self._loop.time() - began)))

    async def _send(self) -> None:
        assert self.client is not None
        try:
            await self.client.flush()  # a failed batch stays pending and goes with the next one
        except Exception as exc:  # the run may have ended; the stream never fails the activity
            log.warning("could not publish to the run's stream: %s", exc)

    async def close(self) -> None:
        """Signal what is still buffered; later publishes are dropped."""
        self._closed = True
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        if self.client is not None:
            await self._send()


@contextlib.asynccontextmanager
async def activity_stream() -> AsyncIterator[RunStream]:
    """The current activity's run stream for the duration of the block (flushed at its end)."""
    stream = RunStream()
    token = _current.set(stream)
    try:
        yield stream
    finally:
        _current.reset(token)
        await stream.close()


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
    """One model call's answer on the run's stream: text deltas with their offsets in the answer
    (see StreamEvent) and the tool calls, published as they come while `live`.

    Not live (nobody read when the call was scheduled), the answer is only kept; `go_live` (a
    reader turned up) publishes the text so far as one chunk, then every later delta as it comes.
    """

    def __init__(self, stream: RunStream, source: str, *, live: bool):
        self.stream = stream
        self.source = source
        self.live = live
        self.position = 0
        self.thought = 0
        self._held: list[str] = []
        self._held_reasoning: list[str] = []
        self._calls: StreamChunk | None = None

    def text(self, chunk: StreamChunk) -> None:
        if not self.live:
            self._held.append(chunk.text)
            return
        self.stream.publish(chunk, source=self.source, offset=self.position)
        self.position += len(chunk.text)

    def reasoning(self, chunk: StreamChunk) -> None:
        """The model's reasoning: deltas with offsets of their own (source `<call>#r`, rein.core.events)."""
        if not self.live:
            self._held_reasoning.append(chunk.text)
            return
        self.stream.publish(chunk, source=reasoning_source(self.source), offset=self.thought)
        self.thought += len(chunk.text)

    def tool_calls(self, chunk: StreamChunk) -> None:
        if self.live:
            self.stream.publish(chunk)
        else:
            self._calls = chunk

    def go_live(self) -> None:
        """Publish what the model has said so far, and from now on each delta as it comes."""
        if self.live:
            return
        self.live = True
        if self._held_reasoning:
            self.reasoning(StreamChunk(type="reasoning", text="".join(self._held_reasoning)))
            self._held_reasoning = []
        if self._held:
            self.text(StreamChunk(type="text", text="".join(self._held)))
            self._held = []
        if self._calls is not None:
            self.tool_calls(self._calls)


@contextlib.asynccontextmanager
async def live_once_read(out: ModelText) -> AsyncIterator[None]:
    """While the block runs, ask the run now and then (READER_CHECK) whether someone reads its
    stream (READERS_QUERY: a query is no history event); the first reader makes `out` live."""
    watcher = None if out.live else asyncio.create_task(_until_read(out))
    try:
        yield
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


async def _until_read(out: ModelText) -> None:
    info = activity.info()
    if info.workflow_id is None:  # a standalone activity: no run to ask
        return
    try:
        run = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
    except RuntimeError:  # a worker built without a client: nobody can be asked
        return
    wait = READER_CHECK
    while True:
        await asyncio.sleep(wait.total_seconds())
        wait = min(wait * 2, READER_CHECK_MAX)
        try:
            readers = await run.query(READERS_QUERY, result_type=int)
        except WorkflowQueryFailedError:  # workflow code from before READERS_QUERY: it never asks
            return
        except Exception as exc:  # the run's worker is busy or gone: ask again later
            log.debug("could not ask the run for stream readers: %s", exc)
            continue
        if readers > 0:
            out.go_live()
            return

"""One reader per thread in a web server, however many browsers watch it (rein.web.agui).

A thread's stream is read by long-poll Updates (temporalio.contrib.workflow_streams): each poll is two history
events and one workflow task, and the run counts the polls in flight as its readers (its model calls publish live
while it has one). A hundred browsers on one thread must not be a hundred polls, so a `Feed` per thread keeps ONE
subscription and the items it read, and every viewer in the process reads from that. Items older than the feed
holds are read once with the stream's poll *query* (no history event). The feed stops reading a little after its
last viewer left (a browser reconnecting meanwhile finds it warm).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStreamClient

from rein.core.events import TOPIC, StreamEvent

log = logging.getLogger("rein.agui")

POLL_QUERY = "__temporal_workflow_stream_poll"
"""The contrib's poll, as a query: the retained items from an offset, at once, with no history event."""
LINGER_S = 5.0
"""How long a feed keeps reading after its last viewer left."""
KEEP_ITEMS = 20_000
"""Items a feed holds at most (the oldest go first; a viewer that needs them reads them with the query)."""
RETRY_S = (0.2, 0.5, 1.0, 2.0, 5.0)
"""Waits between attempts to read again after the subscription failed (no worker yet, a restart)."""


class Feed:
    """One thread's stream items, read once for every viewer in this process."""

    def __init__(self, hub: Hub, thread_id: str):
        self.hub = hub
        self.thread_id = thread_id
        self.items: list[tuple[int, StreamEvent]] = []
        self.first = -1
        """The offset the feed started reading at (items before it come from the query)."""
        self.viewers = 0
        self.ended = False
        self._changed = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None
        self._closer: asyncio.TimerHandle | None = None

    @property
    def reading(self) -> bool:
        return self._reader is not None and not self._reader.done()

    def start(self, offset: int) -> None:
        if self._reader is None:
            self.first = offset
            self._reader = asyncio.create_task(self._read(offset), name=f"rein-agui-feed-{self.thread_id}")
            self.hub.readers_started += 1

    async def _read(self, offset: int) -> None:
        """The one subscription: follows continue-as-new, reads again after a failure, stops when the thread ended."""
        failures = 0
        stream = WorkflowStreamClient.create(self.hub.client, self.thread_id)
        while True:
            try:
                items = stream.subscribe(TOPIC, offset, poll_cooldown=self.hub.poll_cooldown)
                async with contextlib.aclosing(items):  # type: ignore[type-var]
                    async for item in items:
                        offset = item.offset + 1
                        failures = 0
                        await self._add(item.offset, StreamEvent.model_validate(item.data))
                break  # the thread closed and its last items were read
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                wait = RETRY_S[min(failures, len(RETRY_S) - 1)]
                failures += 1
                log.info("reading thread %s's stream failed (%s); again in %gs", self.thread_id, exc, wait)
                await asyncio.sleep(wait)
        async with self._changed:
            self.ended = True
            self._changed.notify_all()

    async def _add(self, offset: int, item: StreamEvent) -> None:
        async with self._changed:
            if self.items and offset <= self.items[-1][0]:
                return  # read again after a retry
            self.items.append((offset, item))
            if len(self.items) > KEEP_ITEMS:
                del self.items[: len(self.items) - KEEP_ITEMS]
                self.first = self.items[0][0]
            self._changed.notify_all()

    async def read(self, offset: int) -> AsyncIterator[tuple[int, StreamEvent, bool]]:
        """The thread's items from `offset` on, as they come, each with whether a later one is known already (a
        wait followed by more was answered); ends once the thread ended and all were read."""
        if offset < self.first:
            early = [item async for item in self._backfill(offset, self.first)]
            for number, (at, item) in enumerate(early):
                yield at, item, number + 1 < len(early) or bool(self.items)
            offset = self.first
        index = 0
        while True:
            async with self._changed:
                await self._changed.wait_for(functools.partial(self._ready, offset, index))
                found = self._after(offset, index)
                if found is None:
                    return
                index, (at, item) = found
                more = index + 1 < len(self.items)
            offset = at + 1
            index += 1
            yield at, item, more

    def _ready(self, offset: int, hint: int) -> bool:
        return self.ended or self._after(offset, hint) is not None

    def _after(self, offset: int, hint: int) -> tuple[int, tuple[int, StreamEvent]] | None:
        """The first held item at or after `offset` (searched from `hint`, where the last one was)."""
        items = self.items
        start = hint if hint < len(items) and (hint == 0 or items[hint - 1][0] < offset) else 0
        for index in range(start, len(items)):
            if items[index][0] >= offset:
                return index, items[index]
        return None

    async def _backfill(self, offset: int, until: int) -> AsyncIterator[tuple[int, StreamEvent]]:
        """Retained items in [offset, until) read with the poll query: no history event, no reader counted."""
        handle = self.hub.client.get_workflow_handle(self.thread_id)
        converter = self.hub.client.data_converter.payload_converter
        while offset < until:
            result = await handle.query(POLL_QUERY, PollInput(topics=[TOPIC], from_offset=offset), result_type=PollResult)
            for wire in result.items:
                if wire.offset >= until:
                    return
                payload = Payload.FromString(base64.b64decode(wire.data))
                yield wire.offset, StreamEvent.model_validate(converter.from_payload(payload))
            if not result.more_ready or not result.items:
                return
            offset = result.next_offset

    def joined(self) -> None:
        self.viewers += 1
        if self._closer is not None:
            self._closer.cancel()
            self._closer = None

    def left(self) -> None:
        self.viewers -= 1
        if self.viewers == 0:
            self._closer = asyncio.get_running_loop().call_later(self.hub.linger_s, self.stop)

    def stop(self) -> None:
        """Stop reading once nobody watches (now, or when its linger ends)."""
        self._closer = None
        if self.viewers == 0:
            self.hub.feeds.pop(self.thread_id, None)
            if self._reader is not None:
                self._reader.cancel()


class Hub:
    """The feeds of this process's viewers, by thread id."""

    def __init__(self, client: Client, *, linger_s: float = LINGER_S, poll_cooldown: Any = None):
        from rein.client import POLL_COOLDOWN

        self.client = client
        self.linger_s = linger_s
        self.poll_cooldown = poll_cooldown or POLL_COOLDOWN
        self.feeds: dict[str, Feed] = {}
        self.readers_started = 0
        """Subscriptions started over the hub's life (a test's measure: one per thread, not one per viewer)."""

    @property
    def readers(self) -> int:
        """Threads read right now: one stream reader each, whatever the number of viewers."""
        return sum(1 for feed in self.feeds.values() if feed.reading)

    @contextlib.asynccontextmanager
    async def watch(self, thread_id: str, offset: int) -> AsyncIterator[Feed]:
        """A viewer of `thread_id` from `offset` on, for the block's duration."""
        feed = self.feeds.get(thread_id)
        if feed is None:
            feed = self.feeds[thread_id] = Feed(self, thread_id)
        feed.joined()
        feed.start(offset)
        try:
            yield feed
        finally:
            feed.left()

    async def close(self) -> None:
        for feed in list(self.feeds.values()):
            feed.viewers = 0
            feed.stop()

"""The vocabulary of a durable run's stream (temporalio.contrib.workflow_streams, one topic).

Pure: the workflow publishes steps, interrupts and the end; the model activity publishes
text deltas and tool calls while the model answers; middleware and hooks publish events.
Each item is a `StreamEvent` as plain JSON, so any converter on either side reads it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rein.core.ir import StreamChunk

TOPIC = "rein"
"""The run's one topic: ordering across kinds (a step after its text) is the log's order."""


class StreamEvent(BaseModel):
    """One stream item: a chunk, and for model text where it sits in that model call's answer.

    `source` names one model call across its Temporal retries (the run id's random tail and
    the call's number in the run, or `a<activity id>`); `offset` is the position of `chunk.text` in that call's text. A retried attempt
    starts again at 0, so a reader drops what it already has and never shows text twice.
    """

    chunk: StreamChunk
    source: str = ""
    offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True)


REASONING = "#r"
"""A model call's reasoning is told under its source with this suffix: its offsets count in the reasoning."""


def reasoning_source(source: str) -> str:
    return f"{source}{REASONING}"


class TextDeduplicator:
    """Keeps, per model call, how much text (and reasoning) a reader has seen; returns only what is new. A model call a
    `cut` event names (an `interrupt` message cut it) says nothing more: deltas its activity published
    before it learnt of the cut are dropped."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.cut: set[str] = set()

    def __call__(self, event: StreamEvent) -> StreamChunk | None:
        chunk = event.chunk
        if chunk.type == "event" and chunk.name == "cut" and chunk.data:
            self.cut.add(str(chunk.data.get("source")))
        if chunk.type not in ("text", "reasoning") or not event.source:
            return chunk
        if event.source.removesuffix(REASONING) in self.cut:
            return None
        have = self.seen.get(event.source, 0)
        end = event.offset + len(chunk.text)
        if end <= have:
            return None
        self.seen[event.source] = end
        if event.offset < have:
            chunk = chunk.model_copy(update={"text": chunk.text[have - event.offset :]})
        return chunk

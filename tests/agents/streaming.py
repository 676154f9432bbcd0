"""A slowly streaming agent for the cross-process streaming test (tests/test_streaming.py).

    python worker.py --agent tests.agents.streaming:agent

`GatedModel` is scripted like MockProvider, but its answer streams in pieces with
sleeps, and after the first piece it waits until the file `go` appears in REINTEST_DIR.
Only a reader that already received the first piece can create it, so the model call
(and its activity) finishes only if text reached a client while it was still running.
It writes `model-started` / `model-finished` there so the test can order events.

`LateReaderModel` (`late_agent`) is for a reader that attaches while the model call is already
under way (tests/test_live_text.py): its gates open only on the second and third pieces a reader got.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rein import Agent, Completion, Message, StreamChunk, Usage

PIECES = ["Hel", "lo, ", "stream", "ing world."]
GATE_TIMEOUT_S = 60.0


def _dir() -> Path:
    return Path(os.environ["REINTEST_DIR"])


def _note(line: str) -> None:
    with open(_dir() / "events", "a") as f:
        f.write(line + "\n")


class GatedModel:
    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        _note("model-started")
        yield StreamChunk(type="text", text=PIECES[0])
        waited = 0.0
        while not (_dir() / "go").exists():
            if waited > GATE_TIMEOUT_S:
                raise TimeoutError("no reader received the first piece of text while the model ran")
            await asyncio.sleep(0.05)
            waited += 0.05
        for piece in PIECES[1:]:
            await asyncio.sleep(0.05)
            yield StreamChunk(type="text", text=piece)
        _note("model-finished")
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=4))

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        parts, usage = [], Usage()
        async for chunk in self.stream(messages, tools):
            parts.append(chunk.text)
            usage = chunk.usage or usage
        return Completion(message=Message(role="assistant", content="".join(parts)), finish_reason="stop", usage=usage)


agent = Agent(provider=GatedModel(), name="streamer")


LATE_PIECES = ["Hello, ", "late ", "reader: ", "every ", "word once."]


async def _gate(name: str) -> None:
    waited = 0.0
    while not (_dir() / name).exists():
        if waited > GATE_TIMEOUT_S:
            raise TimeoutError(f"nobody wrote {name}: no reader received live text while the model ran")
        await asyncio.sleep(0.05)
        waited += 0.05


class LateReaderModel:
    """Says two pieces before anyone reads, then waits for `go1` (a reader's first text), says one
    more, waits for `go2` (its second), then says the rest: it finishes only if a reader that
    attached mid-call received two separate pieces while it ran. Its stream is its answer (it says
    so): a run not asked to stream streams it, for a reader who attaches mid-call."""

    stream_is_complete = True

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        _note("model-started")
        yield StreamChunk(type="text", text=LATE_PIECES[0])
        yield StreamChunk(type="text", text=LATE_PIECES[1])
        await _gate("go1")
        yield StreamChunk(type="text", text=LATE_PIECES[2])
        await _gate("go2")
        for piece in LATE_PIECES[3:]:
            yield StreamChunk(type="text", text=piece)
        _note("model-finished")
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=5))

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        raise AssertionError("rein streams from a provider whose stream is its answer, read or not")


late_agent = Agent(provider=LateReaderModel(), name="late-reader")

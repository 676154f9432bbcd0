"""A conversation agent for the threads' process tests (tests/test_threads_processes.py).

    python worker.py --agent tests.agents.threads:talker

`Talker` is stateless (a restarted worker answers the same): it answers every user message since its
last answer ("heard: a | b"). Asked `slow:N`, its answer comes in N pieces, one every 0.2 s, and
notes `model-started` in REINTEST_DIR/events first (`slow:hold`: a piece every 0.2 s until the test calls
`release_model()`, so a test that acts while the model streams does not race a clock); asked `tool:N`, it calls `work(seconds=N)`,
which notes `tool-started` and `tool-finished`. Asked `tool:hold`, the tool runs until the test writes
REINTEST_DIR/release (`release()`): a test that must act while a tool runs is not a race against a clock.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rein import Agent, Completion, LoopConfig, Message, StreamChunk, ToolCall, Usage

PIECE_S = 0.2


def _note(line: str) -> None:
    with open(Path(os.environ["REINTEST_DIR"]) / "events", "a") as f:
        f.write(line + "\n")


def _heard(messages: list[Message]) -> list[str]:
    since: list[str] = []
    for message in reversed(messages):
        if message.role == "assistant" and message.content:
            break
        if message.role == "user":
            since.insert(0, message.content)
    return since


class Talker:
    stream_is_complete = True  # its stream is its answer: a reader who attaches sees the text live

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        last = messages[-1]
        usage = Usage(input_tokens=1, output_tokens=1)
        if last.role == "user" and last.content.startswith("tool:"):
            held = last.content[5:] == "hold"
            call = ToolCall(id=f"w{len(messages)}", name="work", arguments={"seconds": -1 if held else float(last.content[5:])})
            yield StreamChunk(type="tool_calls", tool_calls=[call])
            yield StreamChunk(type="done", finish_reason="tool_calls", usage=usage)
            return
        slow = last.content[5:] if last.role == "user" and last.content.startswith("slow:") else "1"
        held = slow == "hold"
        pieces = -1 if held else int(slow)
        if pieces != 1:
            _note("model-started")
        n = 0
        while (not _released("model-release")) if held else n < pieces - 1:
            yield StreamChunk(type="text", text=f"thinking {n} … ")
            n += 1
            await asyncio.sleep(PIECE_S)
        yield StreamChunk(type="text", text="heard: " + " | ".join(_heard(messages)))
        yield StreamChunk(type="done", finish_reason="stop", usage=usage)

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        text, calls, usage = "", None, Usage()
        async for chunk in self.stream(messages, tools):
            if chunk.type == "text":
                text += chunk.text
            elif chunk.type == "tool_calls":
                calls = chunk.tool_calls
            usage = chunk.usage or usage
        if calls:
            return Completion(message=Message(role="assistant", tool_calls=calls), finish_reason="tool_calls", usage=usage)
        return Completion(message=Message(role="assistant", content=text), finish_reason="stop", usage=usage)


def release(folder: Path) -> None:
    """Ends a `tool:hold` call's work."""
    (folder / "release").touch()


def release_model(folder: Path) -> None:
    """Ends a `slow:hold` answer's stream."""
    (folder / "model-release").touch()


def _released(name: str) -> bool:
    return (Path(os.environ["REINTEST_DIR"]) / name).exists()


async def work(seconds: float) -> str:
    """Work for a while (seconds < 0: until `release`)."""
    _note("tool-started")
    if seconds < 0:
        while not _released("release"):
            await asyncio.sleep(0.05)
    else:
        await asyncio.sleep(seconds)
    _note("tool-finished")
    return f"worked {seconds}s"


talker = Agent(provider=Talker(), tools=[work], name="talker",
               config=LoopConfig(detect_loops=False, heartbeat_timeout_s=2, model_retry_interval_s=0.2))

"""Agents for the AI SDK tests (tests/test_ai_sdk*.py) and bench/ai_sdk.py.

    python worker.py --agent tests.agents.ai_sdk:teller --agent tests.agents.ai_sdk:planner

`teller` says its first piece, then holds its answer while the file `<REINTEST_DIR>/<question>.hold` exists (a
test writes it before asking, and deletes it to let the answer end): a page can reload, a second tab open, or a
stop arrive mid-answer without racing a clock. Its stream is its answer. `planner` is examples/planner.py's: it keeps
a to-do list in the thread's shared state (`add X and Y`: one tool call per item, in one batch).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rein import Agent, Completion, LoopConfig, Message, StreamChunk, Usage
from rein.examples.planner import ScriptedPlanner, add_todo, list_todos, remove_todo
from rein.examples.planner import agent as rein_planner

FIRST = "Once upon a time, "
REST = ["a durable ", "thread ", "told its ", "story to the end."]
HOLD_LIMIT_S = 120.0


def hold_file(question: str) -> Path:
    return Path(os.environ.get("REINTEST_DIR", "/tmp")) / f"{question}.hold"


class Teller:
    stream_is_complete = True

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        question = next(m.content for m in reversed(messages) if m.role == "user")
        yield StreamChunk(type="text", text=FIRST)
        held = 0.0
        while hold_file(question).exists() and held < HOLD_LIMIT_S:
            await asyncio.sleep(0.02)
            held += 0.02
        for piece in REST:
            yield StreamChunk(type="text", text=piece)
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=5))

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        text = "".join([c.text async for c in self.stream(messages, tools) if c.type == "text"])
        return Completion(message=Message(role="assistant", content=text), finish_reason="stop",
                          usage=Usage(input_tokens=3, output_tokens=5))


def story() -> str:
    return FIRST + "".join(REST)


teller = Agent(provider=Teller(), name="teller", config=LoopConfig(heartbeat_timeout_s=5, model_retry_interval_s=0.2))


class HeldPlanner(ScriptedPlanner):
    """examples/planner.py's model asking for a request's calls in one batch, holding its first answer while
    `hold_file(<question>)` exists."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        question = messages[-1].content
        held = 0.0
        while messages[-1].role == "user" and hold_file(question).exists() and held < HOLD_LIMIT_S:
            await asyncio.sleep(0.02)
            held += 0.02
        return await super().complete(messages, tools)


planner = Agent(provider=HeldPlanner(batch=True), tools=[add_todo, remove_todo, list_todos], system=rein_planner.system,
                name="planner")
"""The to-do agent of examples/planner.py (its list in the thread's shared state), held as a test says."""

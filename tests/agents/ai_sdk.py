"""Agents for the AI SDK tests (tests/test_ai_sdk*.py) and bench/ai_sdk.py.

    python worker.py --agent tests.agents.ai_sdk:teller --agent tests.agents.ai_sdk:planner

`teller` says its first piece, then holds its answer while the file `<REIN_TEST_DIR>/<question>.hold` exists (a
test writes it before asking, and deletes it to let the answer end): a page can reload, a second tab open, or a
stop arrive mid-answer without racing a clock. Its stream is its answer. `planner` keeps a to-do list in the
thread's shared state: asked `add X and Y`, it calls its tool once per item (one batch) and says what the last did.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rein import Agent, Completion, LoopConfig, Message, StreamChunk, ToolCall, ToolContext, Usage

FIRST = "Once upon a time, "
REST = ["a durable ", "thread ", "told its ", "story to the end."]
HOLD_LIMIT_S = 120.0


def hold_file(question: str) -> Path:
    return Path(os.environ.get("REIN_TEST_DIR", "/tmp")) / f"{question}.hold"


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


def add_todo(item: str, ctx: ToolContext) -> str:
    """Add an item to the shared to-do list.

    Args:
        item: What to do.
    """
    todos = ctx.state.setdefault("todos", [])
    todos.append(item)
    return f"added {item} ({len(todos)} on the list)"


class Planner:
    """`add X and Y`: one add_todo call per item, in one batch; then says how long the list is."""

    stream_is_complete = True

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        usage = Usage(input_tokens=4, output_tokens=4)
        if messages[-1].role == "tool":
            said = messages[-1].content
            return Completion(message=Message(role="assistant", content=f"Done: {said}."), finish_reason="stop",
                              usage=usage)
        items = messages[-1].content.removeprefix("add ").split(" and ")
        calls = [ToolCall(id=f"todo-{len(messages)}-{n}", name="add_todo", arguments={"item": item})
                 for n, item in enumerate(items)]
        return Completion(message=Message(role="assistant", tool_calls=calls), finish_reason="tool_calls", usage=usage)

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        completion = await self.complete(messages, tools)
        if completion.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls)
        else:
            yield StreamChunk(type="text", text=completion.message.content)
        yield StreamChunk(type="done", finish_reason=completion.finish_reason, usage=completion.usage)


planner = Agent(provider=Planner(), tools=[add_todo], name="planner")

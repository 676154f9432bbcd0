"""Agents for the AG-UI process tests (tests/test_agui_processes.py) and bench/agui.py.

    python worker.py --agent tests.agents.agui:slow --agent tests.agents.agui:asker

`slow` streams its answer in PIECES pieces, one every PIECE_S (its stream is its answer, so a killed worker's
retry says the same again, from the start). `asker` calls the first client tool it is offered (a web page's own,
rein.web.agui) and then says what it got back.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from rein import Agent, Completion, LoopConfig, Message, StreamChunk, ToolCall, Usage

PIECES = int(os.environ.get("REINTEST_PIECES", "12"))
PIECE_S = float(os.environ.get("REINTEST_PIECE_S", "0.25"))


def answer_pieces(n: int = PIECES) -> list[str]:
    return [f"piece {i} " for i in range(n)]


class Slow:
    stream_is_complete = True

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        for piece in answer_pieces():
            yield StreamChunk(type="text", text=piece)
            await asyncio.sleep(PIECE_S)
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=PIECES))

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        return Completion(message=Message(role="assistant", content="".join(answer_pieces())), finish_reason="stop",
                          usage=Usage(input_tokens=3, output_tokens=PIECES))


class Asker:
    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        usage = Usage(input_tokens=2, output_tokens=2)
        last = messages[-1]
        if last.role == "tool":
            return Completion(message=Message(role="assistant", content=f"the page said: {last.content}"),
                              finish_reason="stop", usage=usage)
        client_tool = next((t.name for t in tools or ()), None)
        if client_tool is None:
            return Completion(message=Message(role="assistant", content="no tool to ask"), finish_reason="stop", usage=usage)
        call = ToolCall(id=f"ask-{len(messages)}", name=client_tool, arguments={"question": last.content})
        return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls", usage=usage)

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        completion = await self.complete(messages, tools)
        if completion.message.content:
            yield StreamChunk(type="text", text=completion.message.content)
        if completion.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls)
        yield StreamChunk(type="done", finish_reason=completion.finish_reason, usage=completion.usage)


slow = Agent(provider=Slow(), name="slow", config=LoopConfig(heartbeat_timeout_s=2, model_retry_interval_s=0.2))
asker = Agent(provider=Asker(), name="asker")

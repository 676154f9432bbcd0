"""Agents for Ctrl-C through a terminal (tests/test_ctrl_c.py).

`streaming`: its answer starts ("Thinking it over") and then never goes on, so the test can press Ctrl-C
while text is streaming. Its model call is cut short by the test (the run is terminated afterwards).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from rein import Agent, Completion, Message, StreamChunk

FIRST_WORDS = "Thinking it over"


class Stalls:
    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        yield StreamChunk(type="text", text=FIRST_WORDS)
        await asyncio.sleep(3600)
        yield StreamChunk(type="done", finish_reason="stop")

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        await asyncio.sleep(3600)
        return Completion(message=Message(role="assistant", content="late"), finish_reason="stop")


streaming = Agent(provider=Stalls(), name="ctrl-c-stream")

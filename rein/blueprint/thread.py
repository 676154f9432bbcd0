"""`Agent.thread(id)`: a conversation that lives in Temporal, not in the caller (rein.core.threads).

Any process that has the agent can send the thread its next message; between turns it waits at no cost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from rein.blueprint.runners import runner
from rein.blueprint.sync import ensure_no_running_loop
from rein.core.ir import StreamChunk
from rein.core.result import RunResult

if TYPE_CHECKING:
    from rein.core.threads import Mode


class ThreadAgent(Protocol):
    """What a Thread needs of its Agent: rein.blueprint.agent imports this module, so it is named by its shape."""

    def _engine(self) -> str: ...

    def _typed(self, result: RunResult) -> RunResult: ...


class Thread:
    """One durable conversation of `agent`: its Temporal workflow id is `thread_id`."""

    def __init__(self, agent: ThreadAgent, thread_id: str):
        if agent._engine() == "local":
            raise ValueError("a thread is a durable run: use engine='temporal' (a Chat keeps a conversation in this process)")
        self.agent = agent
        self.thread_id = thread_id

    async def asend(self, text: str, *, mode: Mode = "queue", message_id: str | None = None) -> RunResult:
        """Send `text` (starting the thread) and wait for the answer of the turn that takes it."""
        return self.agent._typed(await runner("temporal").send_to_thread(
            self.agent, self.thread_id, text, mode=mode, message_id=message_id))

    def send(self, text: str, *, mode: Mode = "queue", message_id: str | None = None) -> RunResult:
        ensure_no_running_loop("Thread.send()", "thread.asend(...)")
        return asyncio.run(self.asend(text, mode=mode, message_id=message_id))

    async def astream(self, text: str, *, mode: Mode = "queue", message_id: str | None = None) -> AsyncIterator[StreamChunk]:
        """`asend`, yielding the turn's text and tool-call chunks as they come (an `event` chunk named `cut` when
        an interrupt cut a model call: its text so far is no longer in the conversation), then a `done` chunk."""
        async for item in runner("temporal").stream_thread(self.agent, self.thread_id, text, mode=mode,
                                                           message_id=message_id):
            if isinstance(item, RunResult):
                yield StreamChunk(type="done", finish_reason=item.stop_reason, usage=item.usage)
            else:
                yield item

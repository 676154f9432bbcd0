"""The durable engine's threads: `Agent.thread(id)` sends through this process's engine (its client,
the agent's queue, a worker here serving the agent) and waits for, or streams, the turn's answer.

Part of the "temporal" runner (rein.durable.runner).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from rein.core.ir import StreamChunk
from rein.core.result import RunResult

if TYPE_CHECKING:
    from rein.blueprint.agent import Agent
    from rein.client import ReinClient
    from rein.core.threads import SendReceipt


async def _client(agent: Agent) -> tuple[Any, ReinClient, str]:
    from rein.client import ReinClient
    from rein.durable.engine import engine

    eng = await engine()
    key = eng.register(agent)  # this process serves the agent: the thread's turns run here too
    queue = eng.task_queue(key)
    await eng.submit(eng.serving(queue))
    assert eng.client is not None
    return eng, ReinClient(eng.client, queue), key


async def send_to_thread(agent: Agent, thread_id: str, text: str, *, mode: str = "queue",
                         message_id: str | None = None) -> RunResult:
    """Send `text` to the thread (starting it) and wait for the answer of the turn that takes it."""
    eng, runs, key = await _client(agent)

    async def go() -> RunResult:
        receipt = await runs.send(thread_id, text, agent=key, mode=mode, message_id=message_id)  # type: ignore[arg-type]
        return await runs.reply(receipt)

    return await eng.submit(go())


async def stream_thread(agent: Agent, thread_id: str, text: str, *, mode: str = "queue",
                        message_id: str | None = None) -> AsyncIterator[StreamChunk | RunResult]:
    """Send `text`, then the turn's text and tool-call chunks as they come (interrupt chunks when it waits
    for a person, a `cut` event when an interrupt cut a model call), then its RunResult. The stream is read from
    where the message was taken: a queued message's turn begins at its `turn` event (earlier turns' chunks are
    skipped); one that joined a turn under way (steer, interrupt) gets that turn from there on, not a wait for a
    person it joined."""
    eng, runs, key = await _client(agent)
    receipt: SendReceipt = await eng.submit(
        runs.send(thread_id, text, agent=key, mode=mode, message_id=message_id, stream=True))  # type: ignore[arg-type]
    ours = receipt.joined
    async for chunk in eng.relay(lambda: runs.stream(thread_id, from_offset=receipt.offset)):
        turn = (chunk.data or {}).get("turn") if chunk.type == "event" else None
        if chunk.name == "turn" and turn == receipt.turn:
            ours = True
        elif turn is not None and (turn > receipt.turn or chunk.name == "turn_end" and turn == receipt.turn and not ours):
            break  # its start is no longer in the stream (truncated at a continue-as-new): its answer still comes
        elif ours and (chunk.type in ("text", "tool_calls", "interrupt") or chunk.name == "cut"):
            yield chunk  # the stream drops a cut call's late deltas (rein.core.events.TextDeduplicator)
        if ours and (chunk.type == "interrupt" or chunk.name == "turn_end" and turn == receipt.turn):
            break
    yield await eng.submit(runs.reply(receipt))

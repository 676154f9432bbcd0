"""Threads (rein.core.threads): one durable run per conversation, taking messages at any moment."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import rein
from rein import Agent, Completion, LoopConfig, Message, ToolCall, Usage
from rein.client import ReinClient, ThreadRefused


class Echo:
    """Stateless: answers every user message since its last answer; `tool:N` asks for the `wait` tool first."""

    async def complete(self, messages, tools=None, **kw):
        since = []
        for m in reversed(messages):
            if m.role == "assistant" and m.content:
                break
            if m.role == "user":
                since.insert(0, m.content)
        last = messages[-1]
        if last.role == "user" and last.content.startswith("tool:"):
            call = ToolCall(id=f"w{len(messages)}", name="wait", arguments={"seconds": float(last.content[5:])})
            return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls",
                              usage=Usage(input_tokens=1, output_tokens=1))
        return Completion(message=Message(role="assistant", content="heard: " + " | ".join(since)),
                          finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1))

    async def stream(self, messages, tools=None, **kw):  # pragma: no cover - not asked to stream
        yield


async def wait(seconds: float) -> str:
    """Wait a while."""
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


def echo_agent(name: str) -> Agent:
    return Agent(provider=Echo(), tools=[wait], name=name, config=LoopConfig(detect_loops=False))


async def test_a_thread_takes_turns_from_messages_and_dedupes_ids(dev, ids):
    queue, thread_id = ids
    agent = echo_agent(f"echo-{uuid.uuid4().hex[:6]}")
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        first = await runs.send(thread_id, "hello", agent=agent.name, message_id="m1")
        assert (first.turn, first.duplicate) == (1, False)
        again = await runs.send(thread_id, "hello", agent=agent.name, message_id="m1")
        assert (again.turn, again.message_id, again.duplicate) == (1, "m1", True)
        answer = await runs.reply(first)
        assert answer.output == "heard: hello"
        second = await runs.send(thread_id, "and again", agent=agent.name)
        assert second.turn == 2
        answer = await runs.reply(second)
        assert answer.output == "heard: and again"
        assert [m.content for m in answer.session.messages if m.role == "user"] == ["hello", "and again"]
        view = await runs.thread(thread_id)
        assert (view.status, view.turns, view.open, view.queued) == ("idle", 2, False, [])
        await runs.cancel(thread_id, wait=True)
        with pytest.raises(ThreadRefused) as refused:
            await runs.send(thread_id, "late", agent=agent.name)
        assert refused.value.kind == "ThreadEnded"

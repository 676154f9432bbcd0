"""A run's answer is the provider's `complete()` unless its caller asked for a stream (issue 34).

The providers here answer differently in their two methods, as a custom Provider may: `run`/`arun`
must record `complete()`'s answer on both engines, whether or not anyone reads the run, and
`astream` (or `ReinClient.start(stream=True)`) the answer of `stream()`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rein import Agent, Completion, LoopConfig, Message, MockProvider, StreamChunk, ToolCall, Usage
from rein.blueprint.providers.base import streams_its_answer
from rein.client import ReinClient
from rein.core.contract import READERS_QUERY
from rein.durable import engine as engine_module
from rein.durable.temporal_worker import create_worker

TIMEOUT = 60
ADD = ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})


def _last_user(messages: list[Message]) -> str:
    return next(m.content for m in reversed(messages) if m.role == "user")


class DoneOnlyStream:
    """The user's provider: answers in `complete`; its `stream` yields only `done` (a valid Provider)."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        return Completion(message=Message(role="assistant", content=f"echo:{_last_user(messages)}"),
                          finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1))

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1))


class TwoAnswers(DoneOnlyStream):
    """`complete` says `echo:…`, `stream` says `stream:…` in pieces: which one answered shows."""

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        for piece in ("stream:", _last_user(messages)):
            yield StreamChunk(type="text", text=piece)
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1))


class HeldTwoAnswers(TwoAnswers):
    """TwoAnswers that holds either method until `go` is set, once `entered` says the call is under way."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        self.entered.set()
        await self.go.wait()
        return await super().complete(messages, tools)

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        self.entered.set()
        await self.go.wait()
        async for chunk in super().stream(messages, tools):
            yield chunk


def _assistant_texts(messages: list[Message]) -> list[str]:
    return [m.content for m in messages if m.role == "assistant"]


# --------------------------------------------------------------------------- run / arun: complete()


@pytest.mark.parametrize("provider", [DoneOnlyStream, TwoAnswers])
@pytest.mark.parametrize("engine", ["local", "temporal"])
def test_run_records_what_complete_answered(engine: str, provider: type) -> None:
    agent = Agent(provider=provider(), name=f"complete-{engine}-{provider.__name__.lower()}", engine=engine)
    result = agent.run("hello")
    assert (result.status, result.stop_reason, result.output) == ("done", "done", "echo:hello")
    assert _assistant_texts(result.session.messages) == ["echo:hello"]


def test_runs_of_the_users_provider_all_answer() -> None:
    """The report: 30 runs on the durable engine all ended `done` with output None."""
    agent = Agent(provider=DoneOnlyStream(), name="complete-thirty", engine="temporal")

    async def thirty() -> list[Any]:
        return await asyncio.gather(*(agent.arun(f"hello {i}") for i in range(30)))

    results = asyncio.run(thirty())
    assert [r.output for r in results] == [f"echo:hello {i}" for i in range(30)]


# --------------------------------------------------------------------------- astream: stream()


@pytest.mark.parametrize("engine", ["local", "temporal"])
async def test_astream_answers_with_stream(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []

    def new_workflow_id(agent: Agent) -> str:
        started.append(f"{agent.name}-{uuid.uuid4().hex[:12]}")
        return started[-1]

    monkeypatch.setattr(engine_module, "new_workflow_id", new_workflow_id)
    agent = Agent(provider=TwoAnswers(), name=f"stream-{engine}", engine=engine)
    chunks = [c async for c in agent.astream("hello")]
    assert "".join(c.text for c in chunks if c.type == "text") == "stream:hello"
    assert chunks[-1].type == "done" and chunks[-1].finish_reason == "done"
    if engine == "temporal":  # what the run recorded, read back from it
        eng = await engine_module.engine()
        (run_id,) = started
        result = await eng.submit(ReinClient(eng.client).result(run_id))  # type: ignore[arg-type]
        assert result.output == "stream:hello"
        assert _assistant_texts(result.session.messages) == ["stream:hello"]


@pytest.mark.parametrize("engine", ["local", "temporal"])
async def test_astream_of_a_stream_that_says_nothing_says_nothing(engine: str) -> None:
    """Asked for a stream, the stream is the answer (the seeds' `astream`), on both engines alike."""
    agent = Agent(provider=DoneOnlyStream(), name=f"stream-done-{engine}", engine=engine)
    chunks = [c async for c in agent.astream("hello")]
    assert [c.type for c in chunks] == ["done"] and chunks[0].finish_reason == "done"


# --------------------------------------------------------------------------- readers


async def test_a_reader_attaching_mid_call_does_not_change_the_answer(dev: Any) -> None:
    provider = HeldTwoAnswers()
    tq = f"complete-read-{uuid.uuid4().hex[:6]}"
    async with create_worker(dev.client, agents=[Agent(provider=provider, name="held")], task_queue=tq):
        runs = ReinClient(dev.client, task_queue=tq)
        handle = await runs.start("held", "hello")  # no stream=True
        await asyncio.wait_for(provider.entered.wait(), TIMEOUT)  # the model call is under way
        reader = asyncio.ensure_future(_collect(runs.stream(handle.id)))
        run = dev.client.get_workflow_handle(handle.id)
        deadline = time.monotonic() + TIMEOUT
        while await run.query(READERS_QUERY, result_type=int) < 1:
            assert time.monotonic() < deadline, "the reader never attached"
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # long enough for the worker to notice the reader (READER_CHECK)
        provider.go.set()
        seen = await asyncio.wait_for(reader, TIMEOUT)
        result = await runs.result(handle.id)
    assert result.output == "echo:hello"
    assert _assistant_texts(result.session.messages) == ["echo:hello"]
    assert [c.text for c in seen if c.type == "text"] == ["echo:hello"]  # whole, when it arrived


async def test_a_run_started_to_stream_answers_with_stream(dev: Any) -> None:
    tq = f"complete-asked-{uuid.uuid4().hex[:6]}"
    async with create_worker(dev.client, agents=[Agent(provider=TwoAnswers(), name="asked")], task_queue=tq):
        runs = ReinClient(dev.client, task_queue=tq)
        handle = await runs.start("asked", "hello", stream=True)
        seen = await asyncio.wait_for(_collect(runs.stream(handle.id)), TIMEOUT)
        result = await runs.result(handle.id)
    assert result.output == "stream:hello"
    assert "".join(c.text for c in seen if c.type == "text") == "stream:hello"


class ToolThenTwoAnswers(TwoAnswers):
    """Asks for `add` first (in both methods alike), then answers as TwoAnswers does."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        if any(m.role == "tool" for m in messages):
            return await super().complete(messages, tools)
        return Completion(message=Message(role="assistant", content="", tool_calls=[ADD]), finish_reason="tool_calls")

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        if any(m.role == "tool" for m in messages):
            async for chunk in super().stream(messages, tools):
                yield chunk
            return
        yield StreamChunk(type="tool_calls", tool_calls=[ADD])
        yield StreamChunk(type="done", finish_reason="tool_calls")


async def test_a_reader_attached_before_a_call_does_not_change_its_answer(dev: Any) -> None:
    from tests.support.tools import add

    tq = f"complete-before-{uuid.uuid4().hex[:6]}"
    agent = Agent(provider=ToolThenTwoAnswers(), tools=[add], name="before", config=LoopConfig(permission="ask"))
    async with create_worker(dev.client, agents=[agent], task_queue=tq):
        runs = ReinClient(dev.client, task_queue=tq)
        handle = await runs.start("before", "hello")  # no stream=True
        reader = asyncio.ensure_future(_collect(runs.stream(handle.id)))
        run = dev.client.get_workflow_handle(handle.id)
        deadline = time.monotonic() + TIMEOUT
        # The run waits for the approval and the reader polls: the next call is scheduled with it there.
        while (await runs.status(handle.id)).status != "waiting_approval" or await run.query(READERS_QUERY, result_type=int) < 1:
            assert time.monotonic() < deadline, "the run never waited with a reader attached"
            await asyncio.sleep(0.05)
        await runs.approve(handle.id, approver="tester", wait=True)
        await asyncio.wait_for(reader, TIMEOUT)
        result = await runs.result(handle.id)
    assert result.output == "echo:hello"


async def _collect(chunks: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [c async for c in chunks]


# --------------------------------------------------------------------------- which providers stream anyway


def test_which_providers_stream_their_answer() -> None:
    from rein.blueprint.providers.backend import BackendProvider
    from rein.blueprint.providers.litellm import LiteLLMProvider

    class Backend:
        def stream(self, *, messages: Any, tools: Any = (), system: Any = None, **kwargs: Any) -> Any:
            raise AssertionError("not called")

    class Said(TwoAnswers):
        stream_is_complete = True

    class Slower(MockProvider):  # its own stream: it has not said it is the answer
        async def stream(self, messages: Any, tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
            yield StreamChunk(type="done", finish_reason="stop")

    class SaidAbove(Said):  # overrides `complete` below the class that said it
        async def complete(self, messages: Any, tools: Any = None, **kwargs: Any) -> Completion:
            raise AssertionError("not called")

    alike = [LiteLLMProvider("openai/gpt-4o"), MockProvider(["hi"]), BackendProvider(Backend()), Said()]
    assert all(streams_its_answer(p) for p in alike)
    assert not any(streams_its_answer(p) for p in (TwoAnswers(), DoneOnlyStream(), Slower([]), SaidAbove()))

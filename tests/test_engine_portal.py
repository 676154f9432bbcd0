"""The durable engine's bridge between a caller's event loop and its own (rein.durable.engine.Engine):
cancelling a call cancels its engine-side task, a relayed iterator stops when the caller closes it and
passes its error on, and an async tool (run on the engine's own loop) can run another durable agent.
The embedded server of the session's REIN_HOME, as every `engine="temporal"` test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from rein import Agent, MockProvider
from rein.durable import engine
from tests.support.tools import tc


def test_cancelling_a_submitted_call_cancels_it_on_the_engine_loop() -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def main() -> None:
        eng = await engine.engine()
        call = asyncio.ensure_future(eng.submit(slow()))
        assert await asyncio.to_thread(started.wait, 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await asyncio.to_thread(cancelled.wait, 10)

    asyncio.run(main())


def test_a_submitted_calls_result_and_error_reach_the_caller() -> None:
    async def on_engine() -> threading.Thread:
        return threading.current_thread()

    async def fails() -> None:
        raise ValueError("from the engine loop")

    async def main() -> None:
        eng = await engine.engine()
        assert (await eng.submit(on_engine())).name == "rein-engine"
        with pytest.raises(ValueError, match="from the engine loop"):
            await eng.submit(fails())

    asyncio.run(main())


def test_relay_yields_on_the_caller_raises_the_sources_error_and_closing_stops_the_source() -> None:
    stopped = threading.Event()

    async def counting() -> AsyncIterator[tuple[int, str]]:
        try:
            for i in range(1000):
                yield i, threading.current_thread().name
                await asyncio.sleep(0.01)
        finally:
            stopped.set()

    async def failing() -> AsyncIterator[int]:
        yield 1
        raise ValueError("the source failed")

    async def main() -> None:
        eng = await engine.engine()
        relayed = eng.relay(counting)
        seen = [item async for item, _ in _first(relayed, 3)]
        await relayed.aclose()
        assert seen == [0, 1, 2]
        assert await asyncio.to_thread(stopped.wait, 10)
        items: list[int] = []
        with pytest.raises(ValueError, match="the source failed"):
            async for item in eng.relay(failing):
                items.append(item)
        assert items == [1]

    asyncio.run(main())


async def _first(items: AsyncIterator[tuple[int, str]], n: int) -> AsyncIterator[tuple[int, str]]:
    async for item in items:
        assert item[1] == "rein-engine"  # the source runs on the engine's loop
        yield item
        n -= 1
        if n == 0:
            return


def test_an_async_tool_runs_another_durable_agent() -> None:
    """An async tool runs on the engine's own loop (the in-process worker's activity): a run it starts
    goes to that loop directly, not through the bridge, which refuses calls from there."""
    helper = Agent(provider=MockProvider(["from the helper"]), engine="temporal", name="portal-helper")

    threads: list[str] = []

    async def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        threads.append(threading.current_thread().name)
        return (await helper.arun(question)).output or ""

    lead = Agent(provider=MockProvider([[tc("ask_helper", question="hi")], "done"]), engine="temporal",
                 name="portal-lead", tools=[ask_helper])
    result = lead.run("go")
    assert (result.output, threads) == ("done", ["rein-engine"])
    assert [s.summary for s in result.steps if s.kind == "tool"][0].endswith("from the helper")

"""The durable engine's bridge between a caller's event loop and its own (rein.durable.engine.Engine):
cancelling a call cancels its engine-side task, a relayed iterator stops when the caller closes it and
passes its error on, an async tool (run on the engine's own loop) can run another durable agent, and a
script exits in bounded time even while a run is under way or a tool blocks the engine's loop.
The embedded server of the session's REIN_HOME, as every `engine="temporal"` test; the scripts use a
private server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rein import Agent, MockProvider
from rein.durable import engine
from tests.support.processes import ROOT
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


def test_an_async_tool_runs_and_streams_another_durable_agent() -> None:
    """An async tool runs on the engine's own loop (the in-process worker's activity): the runs it
    starts go to that loop directly, not through the portal, which refuses calls from there."""
    helper = Agent(provider=MockProvider(["from the helper", "streamed"]), engine="temporal", name="portal-helper")
    threads: list[str] = []

    async def ask_helper(question: str) -> str:
        """Ask the helper agent, then stream its answer to the same question."""
        threads.append(threading.current_thread().name)
        answer = (await helper.arun(question)).output or ""
        streamed = "".join([chunk.text or "" async for chunk in helper.astream(question) if chunk.type == "text"])
        return f"{answer} / {streamed}"

    lead = Agent(provider=MockProvider([[tc("ask_helper", question="hi")], "done"]), engine="temporal",
                 name="portal-lead", tools=[ask_helper])
    result = lead.run("go")
    assert (result.output, threads) == ("done", ["rein-engine"])
    assert [s.summary for s in result.steps if s.kind == "tool"][0].endswith("from the helper / streamed")


EXITING = textwrap.dedent('''
    import asyncio
    import sys
    import threading
    import time

    from rein import Agent, MockProvider, ToolCall

    entered = threading.Event()


    async def wait() -> str:
        """Never returns."""
        entered.set()
        if sys.argv[1] == "blocks":
            time.sleep(3600)  # blocks the engine's loop
        await asyncio.sleep(3600)
        return "late"


    agent = Agent(provider=MockProvider([[ToolCall(id="1", name="wait", arguments={})], "done"]), tools=[wait],
                  name="exiting-" + sys.argv[1])
    daemon = sys.argv[1] != "waits-in-a-non-daemon-thread"
    threading.Thread(target=agent.run, args=("go",), daemon=daemon).start()
    assert entered.wait(60)
    print("exiting", flush=True)
''')


@pytest.mark.parametrize("case, within", [("blocks", 40), ("waits-in-a-non-daemon-thread", 20)])
def test_a_script_exits_while_a_tool_blocks_the_loop_or_a_thread_waits_for_its_run(
    private_server, tmp_path: Path, case: str, within: float
) -> None:
    """Exit closes the engine within its bounds (15 s) even when its loop is blocked, and a thread still
    waiting for a run then gets an error (it waited forever before, and exit with it)."""
    script = tmp_path / "script.py"
    script.write_text(EXITING)
    env = {k: v for k, v in os.environ.items() if k not in ("REIN_DEBUG", "REIN_TASK_QUEUE", "TEMPORAL_NAMESPACE")}
    env.update(TEMPORAL_ADDRESS=private_server.address, PYTHONPATH=str(ROOT))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(script), case], cwd=str(tmp_path), env=env, text=True,
                          capture_output=True, timeout=within + 30)
    assert (proc.returncode, proc.stdout) == (0, "exiting\n"), proc.stderr
    assert time.monotonic() - started < within

"""A rewind or fork of a run whose steps are old is not stopped for `timeout_s`: the time between the
original step and the rewind (or fork) is not the new run's active time (issue 34).

Through the real CLI (`rein rewind --to-step 0 --rerun-tools`, `rein fork`) on a dev server: Temporal's
test server has no reset, so the steps are made old by waiting, on the server's clock, longer than the
agent's `timeout_s` after the original finished."""

from __future__ import annotations

import asyncio
import uuid

import rein
from rein import Agent, LoopConfig, ToolCall
from rein.cli import main
from rein.client import ReinClient
from tests.support.providers import RecordingProvider

TIMEOUT_S = 3.0


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def _server_seconds_since(client: ReinClient, run_id: str) -> float:
    """Seconds on the server's clock since the run closed (the server's time now: a throwaway run's start)."""
    closed = (await client.handle(run_id).describe()).close_time
    assert closed is not None
    probe = await client.client.start_workflow("rein-clock-probe", id=f"probe-{uuid.uuid4().hex[:8]}", task_queue="nobody")
    now = (await probe.describe()).start_time
    await probe.terminate()
    return (now - closed).total_seconds()


async def test_rewind_and_fork_of_old_steps_are_not_timed_out(dev):
    names = uuid.uuid4().hex[:6]
    address = dev.client.service_client.config.target_host
    model = RecordingProvider([[ToolCall(id="c-a", name="lookup", arguments={"key": "a"})], "first", "forked", "rewound"])
    agent = Agent(provider=model, tools=[lookup], name=f"old-{names}", config=LoopConfig(timeout_s=TIMEOUT_S))
    tq = f"old-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        handle = await client.start(agent.name, "go")
        original = await client.result(handle.id)
        assert original.stop_reason == "done" and original.output == "first"
        while await _server_seconds_since(client, handle.id) <= TIMEOUT_S:  # the steps are now older than timeout_s
            await asyncio.sleep(0.5)

        fork_id = f"{handle.id}-f"
        assert await asyncio.to_thread(main, ["fork", handle.id, "--at-step", "1", "--id", fork_id, "--address", address]) == 0
        forked = await client.result(fork_id)
        assert await asyncio.to_thread(main, ["rewind", handle.id, "--to-step", "0", "--rerun-tools",
                                              "--address", address]) == 0
        rewound = await client.result(handle.id)
    assert (forked.stop_reason, forked.output) == ("done", "forked")
    assert (rewound.stop_reason, rewound.output) == ("done", "rewound")  # not "timeout"
    assert [s.kind for s in rewound.steps] == ["model", "tool", "model"]
    assert rewound.elapsed_s >= 0

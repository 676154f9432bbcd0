"""A replay of a run's history that its caller cancels still ends (rein.temporal.history).

`rein status` races a slow worker's query against the replayed history; the loser was cancelled,
and `asyncio.run` cancels it once more at exit. temporalio's Replayer cancelled twice while it
shuts its worker down waits forever, and the command hung with no output (1 of 50 calls under
CI load).
"""

from __future__ import annotations

import asyncio
import uuid

import rein
from rein import Agent, LoopConfig
from rein.client import ReinClient
from rein.temporal import history
from tests.support.providers import OpsModel, restart
from tests.support.waiting import poll


async def test_a_replay_cancelled_twice_still_ends(dev) -> None:  # noqa: ANN001
    tq = f"replay-cancel-{uuid.uuid4().hex[:6]}"
    agent = Agent(provider=OpsModel(), tools=[restart], config=LoopConfig(permission="ask"), name="replay-cancel")
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await ReinClient(dev.client, tq).start("replay-cancel", "billing please")

        async def waiting() -> bool:
            return (await handle.query("status"))["status"] == "waiting_approval"

        await poll(waiting, "the run to wait for approval", 30, interval=0.1)
    fetched = await handle.fetch_history()
    baseline = len(asyncio.all_tasks())

    trials = []
    for i in range(40):  # cancel at several points of the replay, the second cancel soon after
        trial = asyncio.ensure_future(history.replay_history(dev.client, handle.id, fetched))
        await asyncio.sleep((i % 20) * 0.002)
        trial.cancel()
        await asyncio.sleep((i % 7) * 0.002)
        trial.cancel()
        trials.append(trial)

    async def all_ended() -> bool:
        return all(t.done() for t in trials) and len(asyncio.all_tasks()) <= baseline

    await poll(all_ended, "every cancelled replay to end", 60, interval=0.1)
    # and a replay left alone still answers as the worker did
    replayed = await history.replay_history(dev.client, handle.id, fetched)
    assert replayed.query("status")["status"] == "waiting_approval"

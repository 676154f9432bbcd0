#!/usr/bin/env python
"""What a new build's promotion costs: the time from its worker's start to its being current, by open runs.

A promotion has the new build's workers replay every open run that would move to it (rein.temporal.promotion:
ReinReplayCheck, 50 runs per activity) before it sets itself current. One dev server; build a (a versioned
in-process worker) with N runs waiting for approval; then build b's worker starts and the clock runs until the
deployment's current version is b. Each N runs on a deployment of its own, `--reps` times; the median and the
spread are printed.

    python bench/promotion.py                  # N = 0, 200, 1000
    python bench/promotion.py --runs 0 500 --reps 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.client import Client  # noqa: E402

from rein import Agent, LoopConfig, create_worker  # noqa: E402
from rein.core.log import disable_logging  # noqa: E402
from rein.durable.embedded_server import start_dev_server  # noqa: E402
from rein.temporal.converter import rein_data_converter  # noqa: E402
from rein.temporal.deployment import current_build_id, describe  # noqa: E402


def agent() -> Agent:
    from tests.support.providers import CallThenReport  # stateless: every run asks for the tool first

    a = Agent(provider=CallThenReport("add", {"a": 1, "b": 2}), name="promo", config=LoopConfig(permission="ask"))

    @a.tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    return a


async def once(client: Client, runs: int) -> float:
    deployment, queue = f"promo{uuid.uuid4().hex[:6]}", f"promo-{uuid.uuid4().hex[:6]}"
    served = agent()
    async with create_worker(client, [served], task_queue=queue, deployment=deployment, build_id="a"):
        while current_build_id(await describe(client, deployment)) != "a":
            await asyncio.sleep(0.05)
        limit = asyncio.Semaphore(50)

        async def started() -> Any:
            async with limit:
                return await client.start_workflow("AgentWorkflow", {"agent": "promo", "prompt": "1+2"},
                                                   id=f"promo-{uuid.uuid4().hex[:8]}", task_queue=queue)

        handles = await asyncio.gather(*(started() for _ in range(runs)))
        waiting = f'TaskQueue = "{queue}" AND ReinStatus = "waiting_approval" AND ExecutionStatus = "Running"'
        while (await client.count_workflows(waiting)).count < len(handles):  # each waits for approval
            await asyncio.sleep(0.2)
        began = time.perf_counter()
        async with create_worker(client, [served], task_queue=queue, deployment=deployment, build_id="b"):
            while current_build_id(await describe(client, deployment)) != "b":
                await asyncio.sleep(0.02)
            return time.perf_counter() - began


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[0, 200, 1000])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    disable_logging()
    server = start_dev_server()
    try:
        client = await Client.connect(server.address, data_converter=rein_data_converter())
        for runs in args.runs:
            times = [await once(client, runs) for _ in range(args.reps)]
            print(f"{runs:4d} open runs: promotion {statistics.median(times) * 1000:7.0f} ms median "
                  f"({min(times) * 1000:.0f}-{max(times) * 1000:.0f}), {args.reps} reps", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())

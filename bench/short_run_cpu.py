"""CPU and wall time per one-call run: AgentWorkflow's package re-imported in every run's sandbox
(as before 0.4.0's passthrough) against passed through (now), interleaved in one process.

    python bench/short_run_cpu.py --runs 150 --reps 2

CPU is this process's (client and worker together: they share it), per run, from getrusage.
Prints a Markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time
import uuid

import rein
import rein.temporal.sandbox as sandbox
from rein import Agent, MockProvider
from rein.client import ReinClient
from rein.testing import start_local

NOW = sandbox.SANDBOX_PASSTHROUGH
BEFORE = tuple(m for m in NOW if m != "rein.workflows") + tuple(
    f"rein.workflows.{m}" for m in ("state", "options", "visibility", "continuation", "children", "identity",
                                    "decisions", "waiting", "stages", "readers", "worker_steps", "loop"))
"""The 0.4.0-rc list: the workflow body's modules passed through, the package and agent.py re-imported."""


async def one_batch(env, passthrough: tuple[str, ...], runs: int) -> tuple[float, float]:
    sandbox.SANDBOX_PASSTHROUGH = passthrough  # read when the worker builds its sandbox
    queue = f"short-{uuid.uuid4().hex[:6]}"
    agent = Agent(provider=MockProvider(["ok"] * (runs + 5)), name="short-bot")
    client = ReinClient(env.client, queue)
    async with rein.create_worker(env.client, agents=[agent], task_queue=queue):
        for i in range(5):  # warm the worker
            await (await client.start("short-bot", f"warm {i}")).result()
        before, began = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        for i in range(runs):
            await (await client.start("short-bot", f"#{i}")).result()
        after, ended = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / runs * 1000
    return cpu, (ended - began) / runs * 1000


async def main(runs: int, reps: int) -> None:
    env = await start_local()
    results: dict[str, list[tuple[float, float]]] = {"re-imported per run": [], "passed through": []}
    try:
        for _ in range(reps):
            results["re-imported per run"].append(await one_batch(env, BEFORE, runs))
            results["passed through"].append(await one_batch(env, NOW, runs))
    finally:
        sandbox.SANDBOX_PASSTHROUGH = NOW
        await env.shutdown()
    print(f"| workflows/ in the sandbox | CPU ms per run (median of {reps}) | wall ms per run |")
    print("|---|---|---|")
    for label, rows in results.items():
        print(f"| {label} | {statistics.median(r[0] for r in rows):.1f} | {statistics.median(r[1] for r in rows):.1f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=150)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.reps))

"""The approvals inbox, measured (figures in bench/README.md, issue 46):

1. listing: N runs wait for approval (default 5,000, several agents and tenants); how long `ReinClient.inbox()` takes
   to list them all with their details (one visibility query per page of 1,000, the memo of each run decoded),
   median of --reps reads; with --codec the memos are encrypted (REIN_CODEC_KEY) and decoded on the client.
2. click to tool: from a click on approve (the inbox page's POST to `rein serve`, its own process) to the tool's
   activity starting on the worker (in this process: the same monotonic clock), p50 and p90 over --clicks runs,
   beside `rein approve` (the console script) and ReinClient.approve in this process.

   `--synthetic`: the N runs are AgentWorkflow starts no worker takes, with the search attributes and waiting memo a
   waiting run has (the same visibility rows, in a minute instead of ~10 on a loaded machine); each read is also
   timed beside the bare visibility RPC for the same rows (the server's share).

    python bench/inbox.py [--runs 5000] [--reps 5] [--clicks 30] [--codec] [--synthetic]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

import rein  # noqa: E402
from rein.client import ReinClient  # noqa: E402
from tests.support.inbox import FilesModel, delete_file  # noqa: E402

STARTED: dict[str, float] = {}
"""path -> when the tool began (monotonic): the tool's activity started."""


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: Which file.
    """
    STARTED.setdefault(path, time.monotonic())
    return f"contents of {path}"


def agent(name: str) -> rein.Agent:
    return rein.Agent(provider=FilesModel(), tools=[read_file, delete_file], name=name,
                      config=rein.LoopConfig(permission="ask", timeout_s=None))  # a loaded machine: no time breaker


async def start_waiting(runs: ReinClient, count: int, agents: list[str], prefix: str) -> list[str]:
    gate = asyncio.Semaphore(64)

    async def one(i: int) -> str:
        async with gate:
            handle = await runs.start(agents[i % len(agents)], f"read /{prefix}/{i}", tenant=f"tenant-{i % 7}",
                                      run_id=f"{prefix}-{i}")
            return handle.id

    return list(await asyncio.gather(*(one(i) for i in range(count))))


async def until_listed(runs: ReinClient, count: int, agent: str | None = None) -> None:
    began = time.monotonic()
    while True:
        items = await runs.inbox(agent=agent)
        ready = sum(1 for i in items if i.since is not None)
        if ready >= count:
            return
        print(f"  {ready}/{count} waiting ({time.monotonic() - began:.0f}s)", flush=True)
        await asyncio.sleep(2)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def start_synthetic(runs: ReinClient, count: int, agents: list[str]) -> None:
    """Runs as visibility shows a waiting one (search attributes, the rein.waiting memo) on a queue nobody serves."""
    from datetime import UTC, datetime

    from temporalio.common import SearchAttributePair, TypedSearchAttributes

    from rein.core.contract import SEARCH_KEYS
    from rein.core.inbox import WAITING_MEMO

    gate = asyncio.Semaphore(64)

    async def one(i: int) -> None:
        memo = {"kind": "approval", "calls": [{"id": "call-read", "tool": "read_file", "args": f'path="/list/{i}"'}],
                "said": f"I will read /list/{i} now.", "since": datetime.now(UTC).isoformat()}
        attributes = TypedSearchAttributes([SearchAttributePair(SEARCH_KEYS["ReinStatus"], "waiting_approval"),
                                            SearchAttributePair(SEARCH_KEYS["ReinAgent"], agents[i % len(agents)]),
                                            SearchAttributePair(SEARCH_KEYS["ReinTenant"], f"tenant-{i % 7}")])
        async with gate:
            await runs.client.start_workflow("AgentWorkflow", {"agent": agents[i % len(agents)], "prompt": "x"},
                                             id=f"synthetic-{i}", task_queue="nobody-serves-this",
                                             memo={WAITING_MEMO: memo}, search_attributes=attributes)

    await asyncio.gather(*(one(i) for i in range(count)))


async def bare_list(runs: ReinClient, query: str) -> float:
    """The visibility RPC alone for the same rows, page by page (no decoding): the server's share."""
    from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest

    began, token = time.perf_counter(), b""
    while True:
        page = await runs.client.workflow_service.list_workflow_executions(ListWorkflowExecutionsRequest(
            namespace=runs.client.namespace, query=query, page_size=1000, next_page_token=token))
        token = page.next_page_token
        if not token:
            return time.perf_counter() - began


async def listing(runs: ReinClient, count: int, reps: int, agents: list[str], synthetic: bool) -> None:
    from rein.durable.inbox import inbox_query

    print(f"starting {count} waiting runs of {len(agents)} agents and 7 tenants…", flush=True)
    began = time.monotonic()
    if synthetic:
        await start_synthetic(runs, count, agents)
    else:
        await start_waiting(runs, count, agents, "list")
    await until_listed(runs, count)
    print(f"  all waiting after {time.monotonic() - began:.0f}s", flush=True)
    times, bare = [], []
    for _ in range(reps):
        t = time.perf_counter()
        items = await runs.inbox()
        times.append(time.perf_counter() - t)
        assert len(items) >= count and all(i.calls for i in items)
        bare.append(await bare_list(runs, inbox_query()))
    filtered = time.perf_counter()
    one = await runs.inbox(agent=agents[0], tenant="tenant-0", tool="read_file")
    filtered = time.perf_counter() - filtered
    print(f"listing {len(items)} waiting runs: median {statistics.median(times):.2f}s, min {min(times):.2f}s, "
          f"max {max(times):.2f}s over {reps} reads (the bare visibility RPC: median {statistics.median(bare):.2f}s); "
          f"one agent and tenant ({len(one)} runs): {filtered:.3f}s; load {os.getloadavg()[0]:.1f}")


async def clicks(runs: ReinClient, address: str, queue: str, count: int) -> None:
    port = 18000 + os.getpid() % 1000
    env = {**os.environ, "REIN_TASK_QUEUE": queue, "REIN_CODEC_AUTH": "", "REIN_CODEC_TOKEN": "", "PYTHONUNBUFFERED": "1"}
    serve = subprocess.Popen([str(Path(sys.executable).parent / "rein"), "serve", "--port", str(port), "--address",
                              address, "--open"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert serve.stdout is not None and "rein serve on" in serve.stdout.readline()
        url = f"http://127.0.0.1:{port}/inbox/api/decide"
        results: dict[str, list[float]] = {"page (rein serve)": [], "rein approve": [], "ReinClient.approve": []}
        async with httpx.AsyncClient(timeout=30) as http:
            for how in results:
                ids = await start_waiting(runs, count, ["bench-click"], f"click-{how.split()[0].lower()}")
                await until_listed(runs, count, "bench-click")
                shown = {i.run_id: i for i in await runs.inbox(agent="bench-click")}  # what the page's cards show
                for run_id in ids:
                    path = f"/click-{how.split()[0].lower()}/{run_id.rsplit('-', 1)[1]}"
                    t = time.monotonic()
                    if how.startswith("page"):
                        card = shown[run_id]
                        answer = (await http.post(url, json={"run_id": run_id, "action": "approve", "wait": card.wait,
                                                             "tool_call_ids": [c.id for c in card.calls]})).json()
                        assert answer["outcome"] == "applied", answer
                    elif how == "rein approve":
                        process = await asyncio.create_subprocess_exec(
                            str(Path(sys.executable).parent / "rein"), "approve", run_id, "--address", address,
                            stdout=asyncio.subprocess.DEVNULL, env=env)
                        await process.wait()
                    else:
                        await runs.approve(run_id)
                    while path not in STARTED:
                        await asyncio.sleep(0.001)
                    results[how].append((STARTED[path] - t) * 1000)
        for how, values in results.items():
            print(f"click to tool, {how}: p50 {percentile(values, 0.5):.0f} ms, p90 {percentile(values, 0.9):.0f} ms "
                  f"over {len(values)} runs")
    finally:
        serve.terminate()
        serve.wait(10)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--clicks", type=int, default=30)
    parser.add_argument("--codec", action="store_true", help="encrypt payloads and memos (REIN_CODEC_KEY)")
    parser.add_argument("--synthetic", action="store_true", help="waiting runs as visibility rows (see above)")
    args = parser.parse_args()
    if args.codec:
        os.environ["REIN_CODEC_KEY"] = base64.b64encode(os.urandom(32)).decode()
    from rein.testing import start_local

    env = await start_local()
    address = env.client.service_client.config.target_host
    client = await rein.client.connect(address)  # rein's converter (and the codec, with --codec)
    queue = "bench-inbox"
    names = [f"bench-{i}" for i in range(5)]
    try:
        async with rein.create_worker(client, agents=[agent(n) for n in [*names, "bench-click"]], task_queue=queue,
                                      max_concurrent_activities=200):
            runs = ReinClient(client, queue)
            if args.runs:
                await listing(runs, args.runs, args.reps, names, args.synthetic)
            if args.clicks:
                await clicks(runs, address, queue, args.clicks)
    finally:
        await env.shutdown()


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the dev server stops with it (finally)
    asyncio.run(main())

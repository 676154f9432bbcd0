#!/usr/bin/env python
"""Benchmark: how late live text reaches a reader in another process, and what it adds to history.

A worker process (`worker.py`) serves `timed`, a scripted streaming model: after a first-token
wait it yields DELTAS text deltas, one every DELTA_INTERVAL_S, each holding the wall-clock time
it was yielded (`<unix time>;`). This process is the reader: it starts RUNS runs at once with
`ReinClient.start` (no `stream=True`, the ordinary pattern), reads each with
`ReinClient.stream`, and for every live delta takes receive time minus yield time (one machine,
one clock). Text the model said before a reader was noticed arrives as one chunk (several stamps)
and is counted apart, not as a delay. Then the history cost: runs of the same answer with and
without a reader, `history_size_bytes` from the server. Not a test; it prints a Markdown table
and writes bench/stream_delay.json.

    python bench/stream_delay.py            # 3 rounds of 10 concurrent runs (~1 minute)
    python bench/stream_delay.py --rounds 1 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("REIN_HOME", tempfile.mkdtemp(prefix="rein-bench-"))

from rein import Agent, StreamChunk, Usage  # noqa: E402
from rein.core.ir import StreamFold  # noqa: E402

DELTAS = 40
DELTA_INTERVAL_S = 0.025
"""40 deltas a second: a fast model's token rate."""
FIRST_TOKEN_S = 1.0
"""Time to the first token: the reader attaches meanwhile, as it would to a real model call."""


class TimedModel:
    """Streams DELTAS deltas, each stamped with the time it was yielded.

    Its stream is its answer (`complete` folds it), and it says so: a run started without
    `stream=True` then still streams, so a reader who attaches mid-call gets live text
    (docs/streaming.md, "Which calls stream")."""

    model = "scripted/timed"
    stream_is_complete = True

    async def stream(self, messages: Any, tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        await asyncio.sleep(FIRST_TOKEN_S)
        for _ in range(DELTAS):
            yield StreamChunk(type="text", text=f"{time.time():.6f};")
            await asyncio.sleep(DELTA_INTERVAL_S)
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=DELTAS))

    async def complete(self, messages: Any, tools: Any = None, **kwargs: Any) -> Any:
        fold = StreamFold()
        async for chunk in self.stream(messages, tools, **kwargs):
            fold.add(chunk)
        return fold.completion()


agent = Agent(provider=TimedModel(), name="timed")

if os.environ.get("STREAM_BENCH_BATCH_MS"):  # what-ifs: the worker's batch interval (read at each batch)
    from datetime import timedelta

    from rein.temporal import streaming

    streaming.BATCH_INTERVAL = timedelta(milliseconds=float(os.environ["STREAM_BENCH_BATCH_MS"]))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def read_one(runs: Any) -> dict[str, Any]:
    handle = await runs.start("timed", "talk")
    delays, at_attach, text = [], 0, []
    async for chunk in runs.stream(handle.id):
        if chunk.type != "text":
            continue
        received = time.time()
        text.append(chunk.text)
        stamps = [float(s) for s in chunk.text.split(";") if s]
        if len(stamps) == 1:
            delays.append(received - stamps[0])
        else:
            at_attach += len(stamps)
    whole = "".join(text)
    assert whole.count(";") == DELTAS and len(set(whole.split(";"))) == DELTAS + 1, "text lost or repeated"
    return {"delays": delays, "at_attach": at_attach, "history": await history_size(handle)}


async def unread_one(runs: Any) -> int:
    handle = await runs.start("timed", "talk")
    await handle.result()
    return await history_size(handle)


async def history_size(handle: Any) -> int:
    info = (await handle.describe()).raw_description.workflow_execution_info
    return info.history_size_bytes


async def measure(address: str, queue: str, rounds: int, runs_at_once: int, pids: dict[str, int]) -> dict[str, Any]:
    from temporalio.client import Client

    from rein import client as rein_client
    from rein.client import ReinClient
    from rein.temporal import ReinPlugin

    if os.environ.get("STREAM_BENCH_COOLDOWN_MS"):  # what-ifs: the reader's pause between polls
        from datetime import timedelta

        rein_client.POLL_COOLDOWN = timedelta(milliseconds=float(os.environ["STREAM_BENCH_COOLDOWN_MS"]))

    client = await Client.connect(address, plugins=[ReinPlugin()])
    runs = ReinClient(client, task_queue=queue)
    await read_one(runs)  # warm-up: imports, caches, the worker's first workflow tasks
    delays: list[float] = []
    at_attach, read_sizes = 0, []
    cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
    for _ in range(rounds):
        for result in await asyncio.gather(*(read_one(runs) for _ in range(runs_at_once))):
            delays += result["delays"]
            at_attach += result["at_attach"]
            read_sizes.append(result["history"])
    answers = rounds * runs_at_once
    read_cpu = {f"{name}_cpu_ms_per_answer": round((cpu_seconds(pid) - cpu[name]) * 1000 / answers, 1) for name, pid in pids.items()}
    cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
    unread_sizes = list(await asyncio.gather(*(unread_one(runs) for _ in range(runs_at_once))))
    unread_cpu = {f"{name}_cpu_ms_per_unread_answer": round((cpu_seconds(pid) - cpu[name]) * 1000 / runs_at_once, 1)
                  for name, pid in pids.items() if name != "reader"}
    return {
        **read_cpu,
        **unread_cpu,
        "delays_ms": [d * 1000 for d in delays],
        "deltas_at_attach": at_attach,
        "history_read": statistics.median(read_sizes),
        "history_unread": statistics.median(unread_sizes),
    }


@contextlib.contextmanager
def timed_worker(prefix: str) -> Iterator[tuple[Any, str, subprocess.Popen]]:
    """A dev server and a `worker.py` process serving this module's `agent` on a queue of its own, once it
    serves: (server, queue, worker). Both are stopped on leaving."""
    from rein.durable.embedded_server import start_dev_server
    from tests.support.processes import stop_process, wait_for_text

    server = start_dev_server()
    queue = f"{prefix}-{uuid.uuid4().hex[:6]}"
    log = Path(tempfile.mkdtemp(prefix="rein-bench-")) / "worker.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "worker.py", "--agent", "stream_delay:agent", "--task-queue", queue,
             "--address", server.address],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    try:
        wait_for_text(log, "serving:", worker, 60)
        yield server, queue, worker
    finally:
        stop_process(worker)
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10, help="concurrent streaming runs per round")
    args = parser.parse_args()

    load_before = os.getloadavg()
    with timed_worker("stream-bench") as (server, queue, worker):
        pids = {"worker": worker.pid, "server": server.process.pid, "reader": os.getpid()}
        figures = asyncio.run(measure(server.address, queue, args.rounds, args.runs, pids))
    load_after = os.getloadavg()
    delays = figures["delays_ms"]
    report = {
        "runs_at_once": args.runs, "rounds": args.rounds, "deltas_per_answer": DELTAS,
        "delta_interval_ms": DELTA_INTERVAL_S * 1000, "live_deltas": len(delays),
        "deltas_at_attach": figures["deltas_at_attach"],
        "p50_ms": round(statistics.median(delays), 1), "p95_ms": round(percentile(delays, 95), 1),
        "max_ms": round(max(delays), 1),
        "history_bytes_read": figures["history_read"], "history_bytes_unread": figures["history_unread"],
        "history_bytes_per_streamed_answer": figures["history_read"] - figures["history_unread"],
        **{k: v for k, v in figures.items() if "_cpu_ms_per_" in k},
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
    }
    (HERE / "stream_delay.json").write_text(json.dumps(report, indent=2) + "\n")
    print("| runs at once | live deltas | p50 | p95 | max | at attach | history bytes/answer (read − unread) | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.runs} | {len(delays)} | {report['p50_ms']} ms | {report['p95_ms']} ms | {report['max_ms']} ms "
          f"| {report['deltas_at_attach']} | {report['history_bytes_per_streamed_answer']:.0f} "
          f"({report['history_bytes_read']:.0f} − {report['history_bytes_unread']:.0f}) "
          f"| {load_before[0]:.2f} → {load_after[0]:.2f} |")
    print("CPU ms per answer, read:", {k.split("_")[0]: v for k, v in report.items() if k.endswith("_cpu_ms_per_answer")},
          "unread:", {k.split("_")[0]: v for k, v in report.items() if k.endswith("_per_unread_answer")})


if __name__ == "__main__":
    main()

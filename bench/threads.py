#!/usr/bin/env python
"""Benchmark: a thread (one durable run per conversation) against a new run per turn (the seeds' Chat on
the durable engine: each turn a workflow whose input is the whole Session so far).

Two figures, on one dev server, one process (rein's worker in-process, a scripted streaming model):
- **send → first text delta**: a reader is attached to the thread's stream; the time from `ReinClient.send`
  to the first text chunk of that turn. For a new run per turn: from `ReinClient.start(stream=True)` to the
  run's first text chunk. p50 and p95 over the turns.
- **cost per turn** over a conversation of K turns: history bytes (protobuf), events and billed actions per
  turn, and wall time per turn (`send` + `reply` against `start` + `result`), all turns one after another.

    python bench/threads.py                # K = 20 and 100, 30 latency samples (~3 minutes)
    python bench/threads.py --quick        # K = 10, 10 samples
    python bench/threads.py --samples 3 --turns 2 --out /tmp/t.json   # any sizes, results elsewhere

Each thread sample is timed to the first text of its own turn: the reader replays the thread's stream from its
start (the warm-up turn included), so arrivals are kept by turn, and a send waits for its receipt's turn.

Not a test: it asserts nothing; it prints a Markdown table and writes bench/threads_results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("REIN_HOME", tempfile.mkdtemp(prefix="rein-bench-"))

from lean import chain_histories, shape  # noqa: E402
from temporalio.client import Client  # noqa: E402

import rein  # noqa: E402
from rein import Agent, Completion, LoopConfig, Message, StreamChunk, Usage  # noqa: E402
from rein.client import ReinClient  # noqa: E402
from rein.core.session import Session  # noqa: E402
from rein.durable.embedded_server import start_dev_server  # noqa: E402
from rein.temporal.converter import rein_data_converter  # noqa: E402

HERE = Path(__file__).resolve().parent
ANSWER = "x" * 400  # a short answer: a turn's bytes are the conversation's growth, not the model's verbosity


class Streamer:
    """Answers at once, in four pieces (its stream is its answer)."""

    stream_is_complete = True

    async def stream(self, messages: list[Message], tools: Any = None, **kw: Any):
        for n in range(4):
            yield StreamChunk(type="text", text=ANSWER[n * 100:(n + 1) * 100])
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1))

    async def complete(self, messages: list[Message], tools: Any = None, **kw: Any) -> Completion:
        return Completion(message=Message(role="assistant", content=ANSWER), finish_reason="stop",
                          usage=Usage(input_tokens=1, output_tokens=1))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def first_delta_thread(runs: ReinClient, samples: int) -> list[float]:
    thread_id = f"lat-thread-{uuid.uuid4().hex[:8]}"
    await runs.reply(await runs.send(thread_id, "warm up", agent="bench-chat"))
    arrived: dict[int, float] = {}
    """Turn → when its first text reached the reader (the warm-up turn's too: the stream replays from its start)."""
    news = asyncio.Condition()

    async def read() -> None:
        turn = None
        async for chunk in runs.stream(thread_id):
            if chunk.type == "event" and chunk.name == "turn" and chunk.data:
                turn = chunk.data.get("turn")
            elif chunk.type == "text" and turn is not None and turn not in arrived:
                arrived[turn] = time.perf_counter()
                async with news:
                    news.notify_all()

    reader = asyncio.ensure_future(read())
    await asyncio.sleep(0.5)  # the reader's poll is in flight
    delays = []
    for n in range(samples):
        began = time.perf_counter()
        receipt = await runs.send(thread_id, f"message {n}", agent="bench-chat")
        async with news:
            await news.wait_for(lambda receipt=receipt: receipt.turn in arrived)  # this message's own turn, not an earlier one
        delays.append(arrived[receipt.turn] - began)
        await runs.reply(receipt)
    reader.cancel()
    await runs.cancel(thread_id, wait=True)
    return delays


async def first_delta_runs(runs: ReinClient, samples: int) -> list[float]:
    delays = []
    for n in range(samples):
        began = time.perf_counter()
        handle = await runs.start("bench-chat", f"message {n}", stream=True)
        async for chunk in runs.stream(handle.id):
            if chunk.type == "text":
                delays.append(time.perf_counter() - began)
                break
        await handle.result()
    return delays


async def cost_thread(client: Client, runs: ReinClient, turns: int) -> dict[str, float]:
    thread_id = f"cost-thread-{uuid.uuid4().hex[:8]}"
    began = time.perf_counter()
    for n in range(turns):
        await runs.reply(await runs.send(thread_id, f"message {n}", agent="bench-chat"))
    elapsed = time.perf_counter() - began
    first = None
    async for execution in client.list_workflows(f'WorkflowId="{thread_id}"'):
        first = execution.run_id  # the oldest run of the chain comes last
    histories = await chain_histories(client, thread_id, first or "")
    await runs.cancel(thread_id, wait=True)
    return {**shape(histories), "s": elapsed}


async def cost_runs(client: Client, runs: ReinClient, turns: int) -> dict[str, float]:
    """The seeds' Chat on the durable engine: each turn a new run whose input is the whole Session so far."""
    session: Session | None = None
    totals = {"bytes": 0.0, "events": 0.0, "actions": 0.0, "runs": 0.0}
    began = time.perf_counter()
    for n in range(turns):
        prompt = f"message {n}"
        if session is None:
            handle = await runs.start("bench-chat", prompt)
        else:
            from rein.core import machine
            from rein.core.contract import WORKFLOW_TYPE, AgentInput, RunOutcome

            machine.prepare_turn(session, prompt)
            handle = await client.start_workflow(
                WORKFLOW_TYPE, AgentInput(agent="bench-chat", session=session), id=f"cost-run-{uuid.uuid4().hex[:10]}",
                task_queue=runs.task_queue, result_type=RunOutcome)
        await handle.result()
        session = await runs.session(handle.id)
        for key, value in shape(await chain_histories(client, handle.id, handle.result_run_id or "")).items():
            totals[key] += value
    return {**totals, "s": time.perf_counter() - began}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10 samples, K = 10")
    parser.add_argument("--samples", type=int, help="latency samples of each kind")
    parser.add_argument("--turns", help="conversation lengths K for the cost table, comma-separated")
    parser.add_argument("--out", type=Path, help="where the JSON goes (default bench/threads_results[_quick].json)")
    args = parser.parse_args()
    samples, lengths = (10, [10]) if args.quick else (30, [20, 100])
    samples = args.samples or samples
    lengths = [int(k) for k in args.turns.split(",")] if args.turns else lengths
    server = start_dev_server()
    try:
        client = await Client.connect(server.address, data_converter=rein_data_converter())
        agent = Agent(provider=Streamer(), name="bench-chat", config=LoopConfig(detect_loops=False))
        runs = ReinClient(client, "bench-threads")
        results: dict[str, Any] = {"latency": {}, "cost": {}}
        async with rein.create_worker(client, agents=[agent], task_queue="bench-threads"):
            for kind, measure in (("thread", first_delta_thread), ("new run", first_delta_runs)):
                delays = await measure(runs, samples)
                results["latency"][kind] = {"p50_ms": pct(delays, 0.5) * 1000, "p95_ms": pct(delays, 0.95) * 1000,
                                            "n": len(delays), "samples_ms": [d * 1000 for d in delays]}
            for turns in lengths:
                thread = await cost_thread(client, runs, turns)
                separate = await cost_runs(client, runs, turns)
                results["cost"][str(turns)] = {"thread": thread, "new run per turn": separate}
        out = args.out or HERE / ("threads_results_quick.json" if args.quick else "threads_results.json")
        out.write_text(json.dumps(results, indent=1) + "\n")
        print(report(results))
    finally:
        server.stop()


def report(results: dict[str, Any]) -> str:
    lines = ["| send → first text delta | p50 | p95 | n |", "|---|---:|---:|---:|"]
    for kind, row in results["latency"].items():
        lines.append(f"| {kind} | {row['p50_ms']:.1f} ms | {row['p95_ms']:.1f} ms | {row['n']} |")
    lines += ["", "| K turns | | bytes / turn | events / turn | actions / turn | runs | ms / turn |",
              "|---:|---|---:|---:|---:|---:|---:|"]
    for turns, pair in results["cost"].items():
        k = int(turns)
        for kind, row in pair.items():
            lines.append(f"| {k} | {kind} | {row['bytes'] / k:,.0f} | {row['events'] / k:.1f} | {row['actions'] / k:.1f} "
                         f"| {row['runs']:.0f} | {row['s'] / k * 1000:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    asyncio.run(main())

#!/usr/bin/env python
"""Benchmark: wall time, worker CPU and history size per agent-loop iteration.

One iteration = one model call + one tool call (a trivial `add`). Everything is
measured in ONE process run, with the variants interleaved repetition by
repetition, so the reported ratios are not skewed by load that changes over the
run (other people's tests on the same machine). This is a benchmark, not a test:
it asserts nothing about speed, it prints a Markdown report on stdout.

    .venv/bin/python bench/loop_iterations.py            # about 2 minutes
    .venv/bin/python bench/loop_iterations.py --reps 7 --iterations 40 --concurrent 0

Tables: per-iteration wall time and CPU (worker+client process, dev server);
where the time goes per activity round (server event times + worker clock);
history size and its growth (N=20, N=80, 1 KB tool results); rein worker
options under load (concurrent runs).

Variants (see bench/README.md):
  local           rein.local.loop in-process (Agent(engine="local")), no Temporal
  rein/tuned      AgentWorkflow on rein.durable.embedded_server.start_dev_server() (TUNED_DYNAMIC_CONFIG)
  rein/untuned    AgentWorkflow on a dev server started without the dynamic-config flags
  raw/<server>    bench/raw_loop.py: a minimal workflow looping over two trivial
                  activities, default converter and worker settings
  ..., no eager   the same worker with disable_eager_activity_execution=True: every
                  activity goes through the transfer queue and matching, as on a
                  cluster where system.enableActivityEagerExecution is off
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

import temporalio  # noqa: E402
from raw_loop import ENTRIES, RAW_WORKFLOW, RawLoop, note_activity_entry, raw_model, raw_tool  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402
from temporalio.client import Client, WorkflowHistory  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

import rein  # noqa: E402
from rein import Agent, Completion, LoopConfig, Message, StreamChunk, ToolCall, Usage  # noqa: E402
from rein.core.contract import WORKFLOW_TYPE  # noqa: E402
from rein.core.log import disable_logging  # noqa: E402
from rein.durable.embedded_server import DevServer, start_dev_server, temporal_binary  # noqa: E402

REIN_QUEUE = "bench-rein"
RAW_QUEUE = "bench-raw"
NO_EAGER = "-no-eager"
PAD_BYTES = 1024
CONFIG = LoopConfig(max_iterations=100_000, max_tokens=None, timeout_s=None, detect_loops=False)


# ---------------------------------------------------------------- the scripted agent


class ScriptedProvider:
    """Stateless: the answer depends only on the conversation it is given.

    The first user message says `iterations=N`; while fewer than N tool results
    are in the conversation it asks for `add(a=k, b=1)`, then it answers in text.
    Stateless means concurrent runs and Temporal retries cannot desynchronise it.
    """

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        note_activity_entry()
        prompt = next(m.content for m in messages if m.role == "user")
        n = int(re.search(r"iterations=(\d+)", prompt).group(1))  # type: ignore[union-attr]
        done = sum(1 for m in messages if m.role == "tool")
        usage = Usage(input_tokens=1, output_tokens=1)
        if done < n:
            call = ToolCall(id=f"call_{done}", name="add", arguments={"a": done, "b": 1})
            return Completion(
                message=Message(role="assistant", content="", tool_calls=[call]), finish_reason="tool_calls", usage=usage
            )
        return Completion(message=Message(role="assistant", content=f"done after {done} tool calls"),
                          finish_reason="stop", usage=usage)

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        c = await self.complete(messages, tools)
        if c.message.content:
            yield StreamChunk(type="text", text=c.message.content)
        if c.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=c.message.tool_calls)
        yield StreamChunk(type="done", finish_reason=c.finish_reason, usage=c.usage)


async def add(a: int, b: int) -> int:
    """Add two integers."""
    note_activity_entry()
    return a + b


async def add_1k(a: int, b: int) -> str:
    """Add two integers (the answer is padded to 1 KB, like a verbose tool)."""
    note_activity_entry()
    return (f"{a + b} ").ljust(PAD_BYTES, "x")


def make_agents() -> dict[str, Agent]:
    provider = ScriptedProvider()
    agents = {
        "bench-add": Agent(provider=provider, tools=[add], config=CONFIG, name="bench-add"),
        "bench-add-1k": Agent(provider=provider, tools=[rein.tool(add_1k, name="add")], config=CONFIG,
                              name="bench-add-1k"),
    }
    return agents


# ---------------------------------------------------------------- servers


def start_custom_server(dynamic: dict[str, str], extra_args: list[str] | None = None) -> DevServer:
    """`temporal server start-dev` as rein.durable.embedded_server starts it, but with the given dynamic config only."""
    return start_dev_server(dynamic_config=dynamic, extra_args=extra_args)


@dataclass
class Site:
    """One dev server with a rein worker and a raw-baseline worker connected to it."""

    name: str
    server: DevServer
    rein_client: Client | None = None
    raw_client: Client | None = None
    workers: list[Worker] = field(default_factory=list)
    tasks: list[asyncio.Task] = field(default_factory=list)

    async def start(self, agents: dict[str, Agent]) -> None:
        # Retry the first connection: the port listens slightly before the frontend is ready.
        for attempt in range(100):
            try:
                self.rein_client = await Client.connect(self.server.address, data_converter=pydantic_data_converter)
                break
            except Exception:
                if attempt == 99:
                    raise
                await asyncio.sleep(0.1)
        self.raw_client = await Client.connect(self.server.address)
        self.workers = []
        for suffix, options in (("", {}), (NO_EAGER, {"disable_eager_activity_execution": True})):
            self.workers += [
                rein.create_worker(self.rein_client, agents=agents, task_queue=REIN_QUEUE + suffix, **options),
                Worker(self.raw_client, task_queue=RAW_QUEUE + suffix, workflows=[RawLoop],
                       activities=[raw_model, raw_tool], **options),
            ]
        self.tasks = [asyncio.create_task(w.run()) for w in self.workers]

    async def stop(self) -> None:
        try:
            await asyncio.gather(*(w.shutdown() for w in self.workers))
        finally:
            self.server.stop()


# ---------------------------------------------------------------- runs


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    n: int
    handle: Any = None
    server_cpu_s: float = 0.0


def proc_cpu_s(pid: int) -> float:
    """utime + stime of another process (Linux), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measured(n: int, body: Callable[[], Awaitable[Any]], server: DevServer | None = None) -> Sample:
    s0 = proc_cpu_s(server.process.pid) if server else 0.0
    c0, t0 = time.process_time(), time.perf_counter()
    handle = await body()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    s1 = proc_cpu_s(server.process.pid) if server else 0.0
    return Sample(wall, cpu, n, handle, s1 - s0)


def local_runner(agent: Agent) -> Callable[[int], Awaitable[Sample]]:
    async def run(n: int) -> Sample:
        async def body() -> None:
            result = await agent.arun(f"iterations={n}")
            check_rein_result(result.model_dump(mode="json"), n)

        return await measured(n, body)

    return run


def rein_runner(site: Site, agent: str = "bench-add", queue: str = REIN_QUEUE) -> Callable[[int], Awaitable[Sample]]:
    async def run(n: int) -> Sample:
        async def body() -> Any:
            assert site.rein_client is not None
            handle = await site.rein_client.start_workflow(
                WORKFLOW_TYPE, {"agent": agent, "prompt": f"iterations={n}"},
                id=f"bench-rein-{uuid.uuid4().hex[:10]}", task_queue=queue,
            )
            check_rein_result(await handle.result(), n)
            return handle

        return await measured(n, body, site.server)

    return run


def raw_runner(
    site: Site, pad: int = 0, send_conversation: bool = True, queue: str = RAW_QUEUE
) -> Callable[[int], Awaitable[Sample]]:
    async def run(n: int) -> Sample:
        async def body() -> Any:
            assert site.raw_client is not None
            handle = await site.raw_client.start_workflow(
                RAW_WORKFLOW,
                {"iterations": n, "pad": pad, "send_conversation": send_conversation, "prompt": f"iterations={n}"},
                id=f"bench-raw-{uuid.uuid4().hex[:10]}", task_queue=queue,
            )
            text = await handle.result()
            assert text == f"done after {n} tool calls", text
            return handle

        return await measured(n, body, site.server)

    return run


def check_rein_result(result: dict[str, Any], n: int) -> None:
    assert result["stop_reason"] == "done", result["stop_reason"]
    assert result["output"] == f"done after {n} tool calls", result["output"]
    if "steps" in result:  # a full RunResult (rein's client); a raw handle returns the slim RunOutcome
        assert sum(1 for s in result["steps"] if s["kind"] == "tool") == n
    else:
        assert result["iterations"] == n + 1, result["iterations"]


# ---------------------------------------------------------------- where the time goes

SEGMENTS = {
    "activity dispatch": "workflow task completed (server) → activity code starts (worker)",
    "activity run + completion": "activity code starts → ActivityTaskCompleted recorded",
    "workflow task dispatch": "ActivityTaskCompleted → next WorkflowTaskStarted (transfer queue, matching, poll)",
    "workflow task processing": "WorkflowTaskStarted → WorkflowTaskCompleted (worker activation + respond RPC)",
}


def time_segments(history: WorkflowHistory) -> dict[str, list[float]]:
    """Per activity round, from server event times and the worker's activity-entry clock (same host)."""
    events = list(history.events)
    by_id = {e.event_id: e for e in events}

    def t(e: Any) -> float:
        return e.event_time.ToNanoseconds() / 1e9

    segments: dict[str, list[float]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            continue
        scheduled = by_id[e.activity_task_completed_event_attributes.scheduled_event_id]
        attrs = scheduled.activity_task_scheduled_event_attributes
        wft_done = by_id[attrs.workflow_task_completed_event_id]
        entry = ENTRIES.get((history.workflow_id, attrs.activity_id))
        started = next((x for x in events[i + 1:] if x.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED), None)
        done = next((x for x in events[i + 1:] if x.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), None)
        if entry is None or started is None or done is None:
            continue
        segments["activity dispatch"].append(entry - t(wft_done))
        segments["activity run + completion"].append(t(e) - entry)
        segments["workflow task dispatch"].append(t(started) - t(e))
        segments["workflow task processing"].append(t(done) - t(started))
    return segments


def bytes_by_event_type(history: WorkflowHistory) -> dict[str, int]:
    import json

    sizes: dict[str, int] = defaultdict(int)
    for event in json.loads(history.to_json())["events"]:
        sizes[event["eventType"].removeprefix("EVENT_TYPE_")] += len(json.dumps(event, separators=(",", ":")))
    return sizes


# ---------------------------------------------------------------- report


def ms(x: float) -> str:
    return f"{x * 1000:.1f}" if x < 0.1 else f"{x * 1000:.0f}"


def fmt_bytes(b: float) -> str:
    return f"{b / 1e6:.2f} MB" if b >= 1e6 else f"{b / 1e3:.1f} KB"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=20, help="iterations per timed run (default 20)")
    parser.add_argument("--reps", type=int, default=5, help="timed runs per variant (default 5)")
    parser.add_argument("--history", type=int, nargs="*", default=[20, 80],
                        help="iteration counts for the history-size runs (default 20 80)")
    parser.add_argument("--concurrent", type=int, default=10,
                        help="runs started at once for the worker-options table (0 skips it; default 10)")
    parser.add_argument("--skip-no-eager", action="store_true", help="skip the variants without eager activities")
    args = parser.parse_args()
    disable_logging()
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

    n, reps = args.iterations, args.reps
    began = time.perf_counter()
    load_before = os.getloadavg()
    agents = make_agents()

    log("starting dev servers ...")
    sites = {"tuned": Site("tuned", start_dev_server()), "untuned": Site("untuned", start_custom_server({}))}
    try:
        for site in sites.values():
            await site.start(agents)

        local_agent = Agent(provider=ScriptedProvider(), tools=[add], config=CONFIG, name="bench-local", engine="local")
        variants: dict[str, Callable[[int], Awaitable[Sample]]] = {"local (rein.local.loop, no Temporal)": local_runner(local_agent)}
        for name in sites:
            variants[f"rein / {name} server"] = rein_runner(sites[name])
        for name in sites:
            variants[f"raw Temporal loop / {name} server"] = raw_runner(sites[name])
        if not args.skip_no_eager:
            for name in sites:
                variants[f"rein / {name} server, no eager activities"] = rein_runner(
                    sites[name], queue=REIN_QUEUE + NO_EAGER)
            for name in sites:
                variants[f"raw Temporal loop / {name} server, no eager activities"] = raw_runner(
                    sites[name], queue=RAW_QUEUE + NO_EAGER)

        log("warming up ...")
        for run in variants.values():
            await run(2)
            await run(0)

        samples: dict[str, list[Sample]] = {k: [] for k in variants}
        fixed: dict[str, list[Sample]] = {k: [] for k in variants}
        for rep in range(reps):
            log(f"repetition {rep + 1}/{reps} ...")
            for name, run in variants.items():
                samples[name].append(await run(n))
                fixed[name].append(await run(0))

        log("time breakdown ...")
        breakdown: dict[str, dict[str, list[float]]] = {}
        for name, ss in samples.items():
            if ss[0].handle is None:
                continue
            merged: dict[str, list[float]] = defaultdict(list)
            for sample in ss:
                for key, values in time_segments(await sample.handle.fetch_history()).items():
                    merged[key] += values
            breakdown[name] = merged

        log("history runs ...")
        history_rows = []
        tuned = sites["tuned"]
        history_variants = [
            ("rein, 1 KB tool results", rein_runner(tuned, "bench-add-1k")),
            ("raw, 1 KB results, conversation sent to model", raw_runner(tuned, PAD_BYTES, True)),
            ("raw, 1 KB results, model gets iteration only", raw_runner(tuned, PAD_BYTES, False)),
        ]
        for label, run in history_variants:
            for hn in args.history:
                s = await run(hn)
                history = await s.handle.fetch_history()
                size = len(history.to_json().encode())
                history_rows.append((label, hn, size, len(history.events), s, bytes_by_event_type(history)))

        concurrency_rows: dict[str, list[Sample]] = {}
        if args.concurrent:
            log(f"{args.concurrent} concurrent runs per worker configuration ...")
            configs = {
                "create_worker defaults": {},
                "max_concurrent_workflow_task_polls=2": {"max_concurrent_workflow_task_polls": 2},
                f"max_cached_workflows={args.concurrent // 2} (fewer than the active runs)":
                    {"max_cached_workflows": args.concurrent // 2},
            }
            runners = {}
            for i, (label, options) in enumerate(configs.items()):
                queue = f"{REIN_QUEUE}-c{i}"
                worker = rein.create_worker(tuned.rein_client, agents=agents, task_queue=queue, **options)
                tuned.workers.append(worker)
                tuned.tasks.append(asyncio.create_task(worker.run()))
                runners[label] = rein_runner(tuned, queue=queue)
                concurrency_rows[label] = []
                await runners[label](1)
            for rep in range(2):
                for label, run in runners.items():
                    if rep and "max_cached" in label:
                        continue  # slow (every task replays its history): one batch is enough

                    async def batch(run=run) -> None:
                        await asyncio.gather(*(run(n) for _ in range(args.concurrent)))

                    concurrency_rows[label].append(await measured(n * args.concurrent, batch, tuned.server))
    finally:
        for site in sites.values():
            try:
                await site.stop()
            except Exception as exc:  # noqa: BLE001
                log(f"stopping {site.name}: {exc}")
    elapsed = time.perf_counter() - began
    load_after = os.getloadavg()

    # ------------------------------------------------------------ print
    temporal_version = subprocess.run([temporal_binary(), "--version"], capture_output=True, text=True).stdout.strip()
    print(f"## Loop iteration benchmark ({datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z})\n")
    print(f"- host: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"temporalio {temporalio.__version__}, {temporal_version}")
    print(f"- {reps} runs of N={n} iterations per variant, interleaved; an iteration is one model call "
          f"+ one tool call; the fixed cost is a run with N=0 (start, one text answer, completion)")
    print(f"- load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f}; total bench time {elapsed:.0f} s\n")

    ref = statistics.median(s.wall_s / s.n for s in samples["rein / tuned server"])
    print("| variant | ms / iteration (median) | min | fixed cost per run, ms (median) "
          "| worker+client CPU ms / iteration (median) | server CPU ms / iteration (median) | vs rein/tuned |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, ss in samples.items():
        per = [s.wall_s / s.n for s in ss]
        cpu = [s.cpu_s / s.n for s in ss]
        server_cpu = [s.server_cpu_s / s.n for s in ss]
        f = statistics.median(s.wall_s for s in fixed[name])
        server_col = ms(statistics.median(server_cpu)) if ss[0].handle is not None else "–"
        print(f"| {name} | {ms(statistics.median(per))} | {ms(min(per))} | {ms(f)} "
              f"| {ms(statistics.median(cpu))} | {server_col} | {statistics.median(per) / ref:.2f}x |")

    print("\nWhere the time goes, per activity round (an iteration is two rounds: model, tool); "
          "means over all rounds of the timed runs, ms:\n")
    print("| variant | " + " | ".join(SEGMENTS) + " | sum per round |")
    print("|---|" + "---:|" * (len(SEGMENTS) + 1))
    for name, segs in breakdown.items():
        meds = [statistics.fmean(segs[k]) if segs.get(k) else float("nan") for k in SEGMENTS]
        print(f"| {name} | " + " | ".join(ms(m) for m in meds) + f" | {ms(sum(meds))} |")
    print()
    for key, meaning in SEGMENTS.items():
        print(f"- {key}: {meaning}")

    print("\nHistory size (tuned server, one run each; CPU is worker+client process time):\n")
    print("| variant | N | history JSON | events | bytes / iteration | ms / iteration | CPU ms / iteration |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, hn, size, events, s, _ in history_rows:
        print(f"| {label} | {hn} | {fmt_bytes(size)} | {events} | {fmt_bytes(size / hn)} "
              f"| {ms(s.wall_s / hn)} | {ms(s.cpu_s / hn)} |")
    # Quadratic extrapolation from the two largest runs per variant: size ≈ b·N + c·N².
    print()
    for label in dict.fromkeys(r[0] for r in history_rows):
        pts = sorted((r[1], r[2]) for r in history_rows if r[0] == label)
        if len(pts) < 2:
            continue
        (n1, s1), (n2, s2) = pts[-2], pts[-1]
        c = (s2 / n2 - s1 / n1) / (n2 - n1)
        b = s1 / n1 - c * n1
        limit = 50 * 1024 * 1024
        if c > 0:
            reach = (-b + (b * b + 4 * c * limit) ** 0.5) / (2 * c)
        else:
            reach = limit / b
        print(f"- {label}: size ≈ {b / 1e3:.1f} KB·N + {c:.0f} B·N² → 50 MB history limit near N ≈ {reach:.0f}")

    if concurrency_rows:
        print(f"\nWorker options under load: {args.concurrent} runs of N={n} started at once (tuned server, "
              "best of 2 batches; one batch for the small cache):\n")
        print("| rein worker | batch wall s | iterations / s | worker+client CPU ms / iteration "
              "| server CPU ms / iteration |")
        print("|---|---:|---:|---:|---:|")
        for label, ss in concurrency_rows.items():
            best = min(ss, key=lambda x: x.wall_s)
            print(f"| {label} | {best.wall_s:.2f} | {best.n / best.wall_s:.0f} | {ms(best.cpu_s / best.n)} "
                  f"| {ms(best.server_cpu_s / best.n)} |")

    biggest = max(r[1] for r in history_rows)
    rows = {r[0]: r for r in history_rows if r[1] == biggest}
    kinds = sorted({k for r in rows.values() for k in r[5]}, key=lambda k: -max(r[5].get(k, 0) for r in rows.values()))
    print(f"\nHistory bytes per iteration by event type, N={biggest} (compact JSON of each event):\n")
    print("| event type | " + " | ".join(rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for kind in kinds:
        print(f"| {kind} | " + " | ".join(fmt_bytes(r[5].get(kind, 0) / biggest) for r in rows.values()) + " |")


if __name__ == "__main__":
    asyncio.run(main())

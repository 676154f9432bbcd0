#!/usr/bin/env python
"""Benchmark: rein's AgentWorkflow against a raw Temporal floor, on one dev server, in one run.

The floor (`LeanFloor` in bench/floor.py) is the least any Temporal program can record for the same
workload: per iteration one "model" activity and one "tool" activity returning a padded
result, temporalio's default converter, continue-as-new when Temporal suggests it. rein
runs the same workload: a scripted model calls a tool that returns the same padded result.
Every figure is reported as rein / floor, medians over the repetitions, variants interleaved
repetition by repetition so load changes on the machine hit both alike. Not a test: it
asserts nothing, it writes bench/lean_results.json, a Markdown table and bench/lean.png.

    python bench/lean.py                       # the README's figures (~25 minutes on 2 cores)
    python bench/lean.py --quick               # a smoke run (~2 minutes)

Needs matplotlib for the plot (`pip install 'rein[bench]'`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
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

from floor import LeanFloor, LeanFloorSandboxed, floor_model, floor_tool  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

import rein  # noqa: E402
from rein import Agent, Completion, LoopConfig, Message, ToolCall, Usage  # noqa: E402
from rein.client import ReinClient  # noqa: E402
from rein.core.log import disable_logging  # noqa: E402
from rein.durable.embedded_server import start_dev_server  # noqa: E402
from rein.temporal.converter import rein_data_converter  # noqa: E402

HERE = Path(__file__).resolve().parent
CONFIG = LoopConfig(max_iterations=1_000_000, max_tokens=None, timeout_s=None, detect_loops=False)
ACTIONS = {
    # What Temporal Cloud bills as an action, per event (local activities: one per marker here).
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_MARKER_RECORDED,
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    EventType.EVENT_TYPE_TIMER_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
}


# ---------------------------------------------------------------- the floor: bench/floor.py


# ---------------------------------------------------------------- rein's side


class Scripted:
    """Stateless: `n=N pad=P` in the prompt; reads the count from the last tool result (O(1) per call)."""

    async def complete(self, messages: list[Message], tools: Any = None, **kw: Any) -> Completion:
        prompt = next(m.content for m in messages if m.role == "user")
        n = int(prompt.split("n=")[1].split()[0])
        pad = int(prompt.split("pad=")[1].split()[0])
        last = messages[-1]
        done = int(last.content.split(":", 1)[0]) if last.role == "tool" else 0
        usage = Usage(input_tokens=1, output_tokens=1)
        if done >= n:
            return Completion(message=Message(role="assistant", content=f"done after {done}"), finish_reason="stop", usage=usage)
        call = ToolCall(id=f"c{done}", name="make", arguments={"n": done, "pad": pad})
        return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls", usage=usage)

    async def stream(self, messages: list[Message], tools: Any = None, **kw: Any):  # pragma: no cover
        yield


async def make(n: int, pad: int) -> str:
    """The padded tool result. Async like the floor's `floor.tool`: a sync tool runs in a worker thread,
    which neither side of the comparison should pay for a string."""
    return (str(n + 1) + ":").ljust(pad, "x")


make_local = rein.tool(name="make", local=True)(make)


def tuned(agent: Agent) -> Agent:
    """`agent` with a model timeout of its own (not LoopConfig's default)."""
    return Agent(provider=agent.provider, tools=list(agent.registry), name=agent.name,
                 config=agent.config.model_copy(update={"model_timeout_s": 120}))


def stepped(agent: Agent) -> Agent:
    """`agent` with a middleware that does nothing: each step runs on the worker, its first too."""
    copy = Agent(provider=agent.provider, tools=list(agent.registry), name=agent.name, config=agent.config)

    @copy.before_model
    async def noop(ctx: Any) -> None:
        return None

    return copy


# ---------------------------------------------------------------- measuring


async def chain_histories(client: Client, workflow_id: str, first_run: str) -> list[Any]:
    histories, run = [], first_run
    while run:
        history = await client.get_workflow_handle(workflow_id, run_id=run).fetch_history()
        histories.append(history)
        last = history.events[-1]
        run = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
            else None
        )
    return histories


def shape(histories: list[Any]) -> dict[str, float]:
    events = [e for h in histories for e in h.events]
    return {
        "bytes": sum(e.ByteSize() for e in events),
        "events": len(events),
        "actions": sum(e.event_type in ACTIONS for e in events),
        "runs": len(histories),
    }


class Bench:
    def __init__(self, address: str):
        self.address = address

    async def start(self) -> None:
        self.rein_client = await Client.connect(self.address, data_converter=rein_data_converter())
        self.raw_client = await Client.connect(self.address)
        self.agents = [
            Agent(provider=Scripted(), tools=[make], name="bench", config=CONFIG),
            Agent(provider=Scripted(), tools=[make_local], name="bench-local", config=CONFIG),
        ]
        self.workers = [
            rein.create_worker(self.rein_client, agents=self.agents, task_queue="bench-rein"),
            rein.create_worker(self.rein_client, agents=self.agents, task_queue="bench-rein-unsandboxed", sandboxed=False),
            rein.create_worker(self.rein_client, agents=[stepped(a) for a in self.agents], task_queue="bench-rein-stepped"),
            rein.create_worker(self.rein_client, agents=[tuned(a) for a in self.agents], task_queue="bench-rein-tuned"),
            Worker(self.raw_client, task_queue="bench-floor", workflows=[LeanFloor, LeanFloorSandboxed],
                   activities=[floor_model, floor_tool]),
        ]
        self.tasks = [asyncio.create_task(w.run()) for w in self.workers]
        self.rein = ReinClient(self.rein_client, "bench-rein")
        self.rein_unsandboxed = ReinClient(self.rein_client, "bench-rein-unsandboxed")
        self.rein_stepped = ReinClient(self.rein_client, "bench-rein-stepped")
        self.rein_tuned = ReinClient(self.rein_client, "bench-rein-tuned")

    async def stop(self) -> None:
        await asyncio.gather(*(w.shutdown() for w in self.workers))

    async def one(self, variant: str, n: int, pad: int, shape_of: bool = True, wf_id: str = "") -> dict[str, float]:
        """One run of `variant`: floor, floor-sandboxed, rein, rein-unsandboxed, rein-local, rein-stepped (the agent
        with a no-op middleware: its first step runs on the worker), rein-tuned (a model timeout of its own), or
        rein-plain / rein-stepped-plain
        (AgentWorkflow started by a plain Temporal client: no start-time search attributes)."""
        wf_id = wf_id or f"{variant}-{n}-{pad}-{uuid.uuid4().hex[:8]}"
        began = time.perf_counter()
        if variant.startswith("floor"):
            client = self.raw_client
            floor = LeanFloorSandboxed if variant == "floor-sandboxed" else LeanFloor
            handle = await client.start_workflow(floor.run, {"n": n, "pad": pad}, id=wf_id, task_queue="bench-floor")
            result = await handle.result()
            assert result == f"done after {n}", result
        elif variant in ("rein-plain", "rein-stepped-plain"):
            client = self.raw_client
            queue = "bench-rein-stepped" if variant == "rein-stepped-plain" else "bench-rein"
            handle = await client.start_workflow(
                "AgentWorkflow", {"agent": "bench", "prompt": f"n={n} pad={pad} go"}, id=wf_id, task_queue=queue
            )
            outcome = await handle.result()
            assert outcome["output"] == f"done after {n}", outcome
        else:
            client = self.rein_client
            agent = "bench-local" if variant == "rein-local" else "bench"
            runs = {"rein-unsandboxed": self.rein_unsandboxed, "rein-stepped": self.rein_stepped,
                    "rein-tuned": self.rein_tuned}.get(variant, self.rein)
            handle = await runs.start(agent, f"n={n} pad={pad} go", run_id=wf_id, stream=False)
            outcome = await handle.result()
            assert outcome.output == f"done after {n}", outcome
        elapsed = time.perf_counter() - began
        sample = {"s": elapsed}
        if shape_of:
            sample.update(shape(await chain_histories(client, wf_id, handle.result_run_id)))
        return sample

    async def throughput(self, variant: str, concurrent: int, at_least: int = 20) -> float:
        """Runs/s of 3-iteration runs, `concurrent` in flight at a time, at least `at_least` runs (so that
        one concurrent run is 20 runs one after another, not a single run's time)."""
        runs = max(concurrent, at_least)
        slots = asyncio.Semaphore(concurrent)

        async def one() -> None:
            async with slots:
                await self.one(variant, 3, 1024, shape_of=False)

        began = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(runs)))
        return runs / (time.perf_counter() - began)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small N and few repetitions (smoke run)")
    parser.add_argument("--short", action="store_true", help="only short runs: N = 1, 3, 10 and the runs/s, --reps each")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated N/pad entries (e.g. 10000/1024) added to the saved results")
    args = parser.parse_args()
    disable_logging()
    quick = args.quick
    sizes = [(1, 3), (3, 3), (10, 3), (100, 3), (1000, 1), (10_000, 1)] if not quick else [(1, 2), (3, 2), (10, 2), (100, 1)]
    if args.short:
        sizes = [(1, args.reps), (3, args.reps), (10, args.reps)]
    pads = [1024, 10 * 1024]
    concurrency = [(1, args.reps), (100, args.reps), (1000, 1 if not args.short else args.reps)] if not quick else [(1, 2), (100, 1)]
    server = start_dev_server()
    bench = Bench(server.address)
    results: dict[str, Any] = {"sizes": {}, "throughput": {}, "local": {}}
    out = HERE / ("lean_results_quick.json" if quick else "lean_results_short.json" if args.short else "lean_results.json")

    def save() -> None:  # after every figure: a long run interrupted still leaves what it measured
        out.write_text(json.dumps(results, indent=1) + "\n")

    if args.only and out.exists():
        results = json.loads(out.read_text())
    try:
        await bench.start()
        if not args.only:
            await measure_local_and_throughput(bench, results, args.reps, concurrency, save)
        # The longest run last: an interrupted benchmark still has the rest.
        plan = [(n, pad, reps) for pad in pads for n, reps in sizes if n < 10_000]
        plan += [(n, 1024, reps) for n, reps in sizes if n >= 10_000]  # 10,000 x 10 KB left out (time)
        if args.only:
            plan = [(int(e.split("/")[0]), int(e.split("/")[1]), 1) for e in args.only.split(",")]
        for n, pad, reps in plan:
            samples: dict[str, list[dict[str, float]]] = {
                "rein": [], "rein-plain": [], "rein-stepped": [], "rein-stepped-plain": [], "floor": [], "floor-sandboxed": []}
            for _ in range(reps):
                for variant in samples:
                    samples[variant].append(await bench.one(variant, n, pad))
            row = {v: {k: median([s[k] for s in ss]) for k in ss[0]} for v, ss in samples.items()}
            results["sizes"][f"{n}/{pad}"] = row
            save()
            print(f"N={n} pad={pad}: {json.dumps(row)}", flush=True)
    finally:
        await bench.stop()
        server.stop()
    save()
    print(report(results))
    plot(results, HERE / ("lean_quick.png" if quick else "lean_short.png" if args.short else "lean.png"))


async def measure_local_and_throughput(bench: Bench, results: dict[str, Any], reps: int, concurrency: list, save: Any) -> None:
    local: dict[str, list[float]] = {v: [] for v in ("rein-local", "rein", "floor-sandboxed", "rein-unsandboxed", "floor")}
    for _ in range(reps):
        for variant in local:
            local[variant].append((await bench.one(variant, 100, 1024, shape_of=False))["s"] / 100)
    results["local"] = {v: median(xs) for v, xs in local.items()}
    save()
    print(f"ms/iteration at N=100: {json.dumps(results['local'])}", flush=True)
    for runs, n_reps in concurrency:
        tput: dict[str, list[float]] = {v: [] for v in ("rein", "rein-stepped", "floor-sandboxed", "rein-unsandboxed", "floor")}
        for _ in range(n_reps):
            for variant in tput:
                tput[variant].append(await bench.throughput(variant, runs))
        results["throughput"][str(runs)] = {v: median(xs) for v, xs in tput.items()}
        save()
        print(f"{runs} concurrent: {json.dumps(results['throughput'][str(runs)])}", flush=True)


def plain(row: dict[str, Any]) -> str:
    """The run started by a plain Temporal client (older results have none)."""
    p, f = row.get("rein-plain"), row["floor"]
    if not p:
        return "—"
    return (f"{p['s'] / f['s']:.2f}×, {p['bytes'] / f['bytes']:.2f}×, "
            f"{p['actions']:.0f} / {f['actions']:.0f} (+{p['actions'] - f['actions']:.0f})")


def stepped_cells(row: dict[str, Any]) -> str:
    """The agent with a middleware, its first step on the worker (ReinClient / plain client): time, bytes,
    actions per run against the floor (older results have none)."""
    f = row["floor"]
    cells = []
    for variant in ("rein-stepped", "rein-stepped-plain"):
        r = row.get(variant)
        if not r:
            return "—"
        cells.append(f"{r['s'] / f['s']:.2f}×, {r['bytes'] / f['bytes']:.2f}×, +{r['actions'] - f['actions']:.0f}")
    return " / ".join(cells)


def sandboxed(row: dict[str, Any]) -> str:
    """rein's time against the floor with temporalio's default sandbox, as both run by default (older results have none)."""
    r, f = row["rein"], row.get("floor-sandboxed")
    return f"**{r['s'] / f['s']:.2f}×**" if f else "—"


def report(results: dict[str, Any]) -> str:
    lines = [
        "| N | tool output | ms/iteration (rein / floor) | time against the sandboxed floor "
        "| history bytes per iteration | events per iteration "
        "| actions per iteration | plain-client start: ms, bytes, actions per run (rein / floor) "
        "| an agent with middleware (its first step on the worker), ReinClient / plain client: time, bytes, actions "
        "per run against the floor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, row in results["sizes"].items():
        n, pad = (int(x) for x in key.split("/"))
        r, f = row["rein"], row["floor"]
        lines.append(
            f"| {n:,} | {pad // 1024} KB | {1000 * r['s'] / n:.1f} / {1000 * f['s'] / n:.1f} = **{r['s'] / f['s']:.2f}×** "
            f"| {sandboxed(row)} "
            f"| {r['bytes'] / n:,.0f} / {f['bytes'] / n:,.0f} = **{r['bytes'] / f['bytes']:.2f}×** "
            f"| {r['events'] / n:.1f} / {f['events'] / n:.1f} = **{r['events'] / f['events']:.2f}×** "
            f"| {r['actions'] / n:.2f} / {f['actions'] / n:.2f} = **{r['actions'] / f['actions']:.2f}×** "
            f"| {plain(row)} | {stepped_cells(row)} |"
        )
    loc = results["local"]
    lines += [
        "",
        "ms per iteration, N = 100, 1 KB outputs. Defaults: rein's `create_worker` (sandboxed) against a plain",
        "temporalio `Worker` (sandboxed); unsandboxed: `create_worker(sandboxed=False)` against an unsandboxed floor.",
        "",
        "| workers | rein | rein, `@tool(local=True)` | floor (two activities) |",
        "|---|---|---|---|",
        f"| defaults (sandboxed) | {1000 * loc['rein']:.1f} (**{loc['rein'] / loc['floor-sandboxed']:.2f}×**) "
        f"| {1000 * loc['rein-local']:.1f} (**{loc['rein-local'] / loc['floor-sandboxed']:.2f}×**) | {1000 * loc['floor-sandboxed']:.1f} |",
        f"| unsandboxed | {1000 * loc['rein-unsandboxed']:.1f} (**{loc['rein-unsandboxed'] / loc['floor']:.2f}×**) "
        f"| {1000 * loc['rein-local']:.1f} vs this floor: **{loc['rein-local'] / loc['floor']:.2f}×** | {1000 * loc['floor']:.1f} |",
        "",
        "| concurrent 3-iteration runs | rein / floor runs/s, defaults (sandboxed) | with middleware / sandboxed floor "
        "| rein / floor runs/s, unsandboxed |",
        "|---|---|---|---|",
    ]
    for runs, row in results["throughput"].items():
        stepped_cell = (f"{row['rein-stepped']:.1f} = **{row['rein-stepped'] / row['floor-sandboxed']:.2f}×**"
                        if "rein-stepped" in row else "—")
        lines.append(
            f"| {int(runs):,} | {row['rein']:.1f} / {row['floor-sandboxed']:.1f} = **{row['rein'] / row['floor-sandboxed']:.2f}×** "
            f"| {stepped_cell} "
            f"| {row['rein-unsandboxed']:.1f} / {row['floor']:.1f} = **{row['rein-unsandboxed'] / row['floor']:.2f}×** |"
        )
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot (pip install 'rein[bench]')")
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for pad in (1024, 10 * 1024):
        keys = [k for k in results["sizes"] if k.endswith(f"/{pad}")]
        ns = [int(k.split("/")[0]) for k in keys]
        for variant, style in (("rein", "-o"), ("floor", "--s")):
            rows = [results["sizes"][k][variant] for k in keys]
            axes[0].plot(ns, [r["bytes"] / n for r, n in zip(rows, ns, strict=True)], style, label=f"{variant}, {pad // 1024} KB")
            axes[1].plot(ns, [1000 * r["s"] / n for r, n in zip(rows, ns, strict=True)], style, label=f"{variant}, {pad // 1024} KB")
    for ax, title in ((axes[0], "history bytes per iteration"), (axes[1], "ms per iteration")):
        ax.set_xscale("log")
        ax.set_xlabel("iterations per run (N)")
        ax.set_title(title)
        ax.legend(fontsize=8)
    runs = list(results["throughput"])
    bars = (("rein", "rein"), ("floor-sandboxed", "floor"), ("rein-unsandboxed", "rein, unsandboxed"), ("floor", "floor, unsandboxed"))
    for k, (key, label) in enumerate(bars):
        axes[2].bar([i + (k - 1.5) * 0.2 for i in range(len(runs))], [results["throughput"][r][key] for r in runs], 0.2, label=label)
    axes[2].set_xticks(range(len(runs)), [f"{int(r):,}" for r in runs])
    axes[2].set_xlabel("concurrent 3-iteration runs")
    axes[2].set_title("completed runs per second")
    axes[2].legend(fontsize=8)
    fig.suptitle("rein vs a raw Temporal floor (same dev server, same run; medians)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())

#!/usr/bin/env python
"""Where does a rein worker spend CPU per loop iteration? (a benchmark companion, not a test)

    .venv/bin/python bench/profile_worker.py            # ~1 minute
    .venv/bin/python bench/profile_worker.py --reps 7 --no-cprofile

One tuned dev server (rein.durable.embedded_server.TUNED_DYNAMIC_CONFIG, plus a metrics port),
several workers in this process on separate task queues, the same scripted
agent as bench/loop_iterations.py, runs interleaved repetition by repetition:

  rein                     rein.create_worker defaults (ReinPlugin: the sandbox with rein's passthrough)
  rein, unsandboxed        create_worker(..., sandboxed=False), i.e. ReinPlugin(sandboxed=False)
  rein, sandbox passthrough all modules
                           the sandbox, but no module is re-imported per run
  rein, no search attrs    the same workflow and activities, but the activities are told the
                           server has no rein search attributes, so the workflow upserts none
  rein, no eager activities  create_worker(..., disable_eager_activity_execution=True)
  raw                      bench/raw_loop.py, default worker
  raw, unsandboxed         the same with UnsandboxedWorkflowRunner

For each: wall and CPU per iteration, CPU split by thread (the event-loop thread
runs activities, the client and the SDK's Python glue; workflow-task threads run
the workflow code in the sandbox; the rest is the SDK's Rust core), the dev
server's CPU, and the server RPCs of one run (from the server's /metrics). Then
cProfile of the Python threads for the default rein worker, and the count of
sandbox round trips per iteration (rein, rein without upserts, raw).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import cProfile
import pstats
import re
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

from loop_iterations import (  # noqa: E402
    check_rein_result,
    make_agents,
    ms,
    proc_cpu_s,
    start_custom_server,
)
from raw_loop import RAW_WORKFLOW, RawLoop, raw_model, raw_tool  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.worker import UnsandboxedWorkflowRunner, Worker  # noqa: E402
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions  # noqa: E402

import rein  # noqa: E402
from rein.core.contract import WORKFLOW_TYPE  # noqa: E402
from rein.core.log import disable_logging  # noqa: E402
from rein.durable.embedded_server import TUNED_DYNAMIC_CONFIG, free_port  # noqa: E402


class ProfiledExecutor(concurrent.futures.ThreadPoolExecutor):
    """A workflow-task executor that knows its threads and can cProfile them."""

    def __init__(self, max_workers: int = 4):
        self.profilers: list[cProfile.Profile] = []
        self.profiling = False
        self.cpu_s = 0.0
        """CPU time (time.thread_time) spent in submitted work: workflow activations."""
        self._lock = threading.Lock()
        super().__init__(max_workers=max_workers)

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        profiling = self.profiling

        def measured():
            profiler = cProfile.Profile() if profiling else None
            c0 = time.thread_time()
            if profiler:
                profiler.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                if profiler:
                    profiler.disable()
                    self.profilers.append(profiler)
                with self._lock:
                    self.cpu_s += time.thread_time() - c0

        return super().submit(measured)


@dataclass
class Variant:
    name: str
    client: Client
    task_queue: str
    kind: str  # "rein" or "raw"
    executor: ProfiledExecutor
    worker: Worker | None = None
    rows: dict[int, list[dict[str, float]]] = field(default_factory=lambda: defaultdict(list))
    rpcs: dict[str, float] = field(default_factory=dict)

    async def run(self, n: int) -> Any:
        wid = f"prof-{uuid.uuid4().hex[:10]}"
        if self.kind == "rein":
            handle = await self.client.start_workflow(
                WORKFLOW_TYPE, {"agent": "bench-add", "prompt": f"iterations={n}"}, id=wid, task_queue=self.task_queue)
            check_rein_result(await handle.result(), n)
        else:
            handle = await self.client.start_workflow(
                RAW_WORKFLOW, {"iterations": n, "prompt": ""}, id=wid, task_queue=self.task_queue)
            await handle.result()
        return handle


ALL = True
"""Count RPCs of every server role (frontend, history, matching), not only the frontend's."""


def scrape(metrics_port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    counts: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        if line.startswith("service_requests{") and (ALL or 'service_name="frontend"' in line):
            op = re.search(r'operation="([^"]+)"', line).group(1)  # type: ignore[union-attr]
            if ALL:
                op = re.search(r'service_name="([^"]+)"', line).group(1) + ":" + op  # type: ignore[union-attr]
            counts[op] += float(line.rsplit(" ", 1)[1])
    return counts


CATEGORIES = [
    ("workflow sandbox", ("temporalio/worker/workflow_sandbox",)),
    ("pydantic", ("pydantic/", "pydantic_core")),
    ("temporalio converter", ("temporalio/converter", "temporalio/contrib/pydantic")),
    ("protobuf", ("google/protobuf",)),
    ("temporalio worker/workflow", ("temporalio/",)),
    ("rein (rein/, workflows/, activities/)", ("/rein/", "/workflows/", "/activities/")),
    ("asyncio / stdlib", ("/lib/python3",)),
]


def categorize(filename: str) -> str:
    for name, needles in CATEGORIES:
        if any(n in filename for n in needles):
            return name
    if filename == "~":
        return "builtins (C functions, not attributed)"
    return "other"


def report_profile(stats: pstats.Stats, iterations: int, title: str) -> None:
    raw = stats.stats  # type: ignore[attr-defined]
    by_cat: dict[str, float] = defaultdict(float)
    total = 0.0
    for (filename, _line, fn), (_cc, _nc, tt, _ct, _callers) in raw.items():
        if "select.epoll" in fn:  # the event loop waiting for I/O: idle, not work
            continue
        by_cat[categorize(filename)] += tt
        total += tt
    print(f"\n### cProfile, {title}: own time by area ({iterations} iterations; cProfile inflates absolute numbers)\n")
    print("| area | ms / iteration | share |")
    print("|---|---:|---:|")
    for cat, tt in sorted(by_cat.items(), key=lambda kv: -kv[1]):
        print(f"| {cat} | {ms(tt / iterations)} | {tt / total:.0%} |")

    wanted = [
        ("workflows/agent.py", "_publish"), ("workflows/agent.py", "_call_model"), ("workflows/agent.py", "_run_tool"),
        ("workflows/agent.py", "_snapshot"), ("workflows/agent.py", "run"),
        ("activities/agents.py", "call_model"), ("activities/agents.py", "run_tool"),
        ("activities/agents.py", "messages_for"), ("activities/calls.py", "heartbeating"),
        ("rein/core/machine.py", "next_action"), ("rein/core/machine.py", "apply_completion"),
        ("rein/core/machine.py", "apply_tool_results"), ("rein/core/summaries.py", "details_for"),
        ("rein/blueprint/tools.py", "execute_tool"),
        ("temporalio/contrib/pydantic.py", "to_payload"), ("temporalio/contrib/pydantic.py", "from_payload"),
        ("temporalio/converter.py", "to_payloads"), ("temporalio/converter.py", "from_payloads"),
        ("temporalio/worker/workflow_sandbox/_runner.py", "activate"),
        ("temporalio/worker/workflow_sandbox/_in_sandbox.py", "activate"),
        ("temporalio/worker/_workflow_instance.py", "activate"),
        ("temporalio/worker/_workflow.py", "_handle_activation"),
        ("temporalio/worker/_activity.py", "_execute_activity"),
        ("temporalio/worker/_activity.py", "_handle_start_activity_task"),
        ("temporalio/worker/workflow_sandbox/_importer.py", "_import"),
        ("temporalio/worker/workflow_sandbox/_restrictions.py", "__getattribute__"),
    ]
    print(f"\n{title}: cumulative time of selected functions, ms / iteration:\n")
    print("| function | calls / iteration | cumulative ms / iteration |")
    print("|---|---:|---:|")
    for file_part, fn_name in wanted:
        calls = cum = 0.0
        for (filename, _line, fn), (_cc, nc, _tt, ct, _callers) in raw.items():
            if fn == fn_name and filename.endswith(file_part):
                calls += nc
                cum += ct
        if calls:
            print(f"| `{file_part}:{fn_name}` | {calls / iterations:.1f} | {ms(cum / iterations)} |")

    print(f"\n{title}: top 20 functions by own time:\n")
    print("| function | calls / iteration | own ms / iteration |")
    print("|---|---:|---:|")
    top = sorted(((k, v) for k, v in raw.items() if "select.epoll" not in k[2]), key=lambda kv: -kv[1][2])[:20]
    for (filename, line, fn), (_cc, nc, tt, _ct, _callers) in top:
        short = re.sub(r".*/site-packages/", "", filename)
        short = re.sub(r".*/work/main/", "", short)
        short = re.sub(r".*/lib/python3\.\d+/", "", short)
        print(f"| `{short}:{line} {fn}` | {nc / iterations:.1f} | {ms(tt / iterations)} |")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-cprofile", action="store_true")
    args = parser.parse_args()
    disable_logging()
    n = args.iterations
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

    metrics_port = free_port()
    server = start_custom_server(TUNED_DYNAMIC_CONFIG, ["--metrics-port", str(metrics_port)])
    variants: list[Variant] = []
    try:
        for attempt in range(100):
            try:
                rein_client = await Client.connect(server.address, data_converter=pydantic_data_converter)
                break
            except Exception:
                if attempt == 99:
                    raise
                await asyncio.sleep(0.1)
        raw_client = await Client.connect(server.address)
        agents = make_agents()

        def add_variant(name: str, kind: str, build) -> None:
            executor = ProfiledExecutor()
            queue = f"prof-{len(variants)}"
            v = Variant(name, rein_client if kind == "rein" else raw_client, queue, kind, executor)
            v.worker = build(v.client, queue, executor)
            variants.append(v)

        from rein.activities import AgentActivities
        from rein.temporal.plugin import sandbox_runner
        from rein.workflows import AgentWorkflow

        def no_search_attributes(client: Client, queue: str, executor: Any) -> Worker:
            acts = AgentActivities(dict(agents), None)
            return Worker(client, task_queue=queue, workflows=[AgentWorkflow],
                          activities=acts.definitions(), workflow_runner=sandbox_runner(None),
                          workflow_task_executor=executor)

        add_variant("rein", "rein", lambda c, q, e: rein.create_worker(c, agents, task_queue=q, workflow_task_executor=e))
        add_variant("rein, unsandboxed", "rein", lambda c, q, e: rein.create_worker(
            c, agents, task_queue=q, workflow_task_executor=e, sandboxed=False))
        add_variant("rein, sandbox passthrough all modules", "rein", lambda c, q, e: rein.create_worker(
            c, agents, task_queue=q, workflow_task_executor=e, workflow_runner=SandboxedWorkflowRunner(
                restrictions=SandboxRestrictions.default.with_passthrough_all_modules())))
        add_variant("rein, no search attrs", "rein", no_search_attributes)
        add_variant("rein, no eager activities", "rein", lambda c, q, e: rein.create_worker(
            c, agents, task_queue=q, workflow_task_executor=e, disable_eager_activity_execution=True))
        add_variant("raw", "raw", lambda c, q, e: Worker(
            c, task_queue=q, workflows=[RawLoop], activities=[raw_model, raw_tool], workflow_task_executor=e))
        add_variant("raw, unsandboxed", "raw", lambda c, q, e: Worker(
            c, task_queue=q, workflows=[RawLoop], activities=[raw_model, raw_tool], workflow_task_executor=e,
            workflow_runner=UnsandboxedWorkflowRunner()))
        tasks = [asyncio.create_task(v.worker.run()) for v in variants]  # type: ignore[union-attr]  # noqa: F841

        log("warming up ...")
        for v in variants:
            await v.run(2)
            await v.run(0)
        all_workflow_executors = [x.executor for x in variants]
        for rep in range(args.reps):
            log(f"repetition {rep + 1}/{args.reps} ...")
            for v in variants:
                for size in (n, 0):
                    wf0 = sum(e.cpu_s for e in all_workflow_executors)
                    srv0 = proc_cpu_s(server.process.pid)
                    c0, m0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
                    await v.run(size)
                    wall, cpu, loop_s = time.perf_counter() - t0, time.process_time() - c0, time.thread_time() - m0
                    wf_s = sum(e.cpu_s for e in all_workflow_executors) - wf0
                    v.rows[size].append({"wall": wall, "cpu": cpu, "loop": loop_s, "wf": wf_s,
                                         "rest": cpu - loop_s - wf_s, "server": proc_cpu_s(server.process.pid) - srv0})

        log("counting RPCs ...")

        def settled() -> dict[str, float]:
            before = scrape(metrics_port)
            for _ in range(10):
                time.sleep(1.1)  # the server publishes its metrics about once a second
                after = scrape(metrics_port)
                if after == before:
                    return after
                before = after
            return before

        for v in variants:
            rpc0 = settled()
            await v.run(n)
            rpc1 = settled()
            v.rpcs = {op: rpc1.get(op, 0) - rpc0.get(op, 0) for op in set(rpc0) | set(rpc1)}

        keys = ["loop", "wf", "rest", "cpu", "server"]
        print(f"## Worker CPU ({args.reps} runs of N={n} and of N=0 per worker, interleaved, tuned dev server)\n")
        print("Marginal cost per iteration = (run with N iterations - run with N=0) / N, medians; "
              "the fixed cost per run is the N=0 run (start, describe, one text answer, completion).\n")
        print("| worker | wall ms / it. | CPU ms / it.: event-loop thread | workflow-task threads "
              "| other threads (SDK core) | process total | dev server | fixed CPU ms per run: process | dev server |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for v in variants:
            def marginal(k: str, v: Any = v) -> float:
                return (statistics.median(r[k] for r in v.rows[n]) - statistics.median(r[k] for r in v.rows[0])) / n
            fixed = {k: statistics.median(r[k] for r in v.rows[0]) for k in keys}
            print(f"| {v.name} | {ms(marginal('wall'))} | " + " | ".join(ms(marginal(k)) for k in keys)
                  + f" | {ms(fixed['cpu'])} | {ms(fixed['server'])} |")
        ops = sorted({k for v in variants for k in v.rpcs})
        print(f"\nServer RPCs in one run of N={n} (service:operation, from the dev server's /metrics "
              "`service_requests`; polls count when they return):\n")
        print("| RPC | " + " | ".join(v.name for v in variants) + " |")
        print("|---|" + "---:|" * len(variants))
        for op in ops:
            vals = [v.rpcs.get(op, 0) for v in variants]
            if any(vals):
                print(f"| {op} | " + " | ".join(f"{x:.0f}" for x in vals) + " |")

        if not args.no_cprofile:
            v = variants[0]
            log("profiling the default rein worker ...")
            v.executor.profiling = True
            main_profiler = cProfile.Profile()
            runs = args.reps
            main_profiler.enable()
            for _ in range(runs):
                await v.run(n)
            main_profiler.disable()
            v.executor.profiling = False
            loop_stats = pstats.Stats(main_profiler)
            report_profile(loop_stats, runs * n, "event-loop thread (activities, client, SDK glue)")
            wf_stats = pstats.Stats(v.executor.profilers[0])
            for p in v.executor.profilers[1:]:
                wf_stats.add(p)
            report_profile(wf_stats, runs * n, "workflow-task threads (sandboxed AgentWorkflow)")

            # The SDK asks the sandboxed workflow for a serialization context for each payload it
            # encodes or decodes on the event-loop thread; in the sandbox each ask is an exec().
            print("\nSandbox round trips on the event-loop thread (per iteration, N=0 runs subtracted):\n")
            print("| worker | `_run_code` (exec in the sandbox) | of which get_serialization_context "
                  "| get_external_store_context |")
            print("|---|---:|---:|---:|")
            targets = [v] + [x for x in variants if x.name in ("rein, no search attrs", "raw")]
            for target in targets:
                counts = {}
                for size in (n, 0):
                    prof = cProfile.Profile()
                    prof.enable()
                    for _ in range(runs):
                        await target.run(size)
                    prof.disable()
                    st = pstats.Stats(prof).stats  # type: ignore[attr-defined]
                    run_code = [val for key, val in st.items()
                                if key[2] == "_run_code" and key[0].endswith("workflow_sandbox/_runner.py")]
                    by_caller: dict[str, float] = defaultdict(float)
                    for val in run_code:
                        for caller, cval in val[4].items():
                            by_caller[caller[2]] += cval[1]
                    counts[size] = (sum(val[1] for val in run_code), by_caller)
                per = lambda key=None, counts=counts: ((counts[n][0] - counts[0][0]) if key is None  # noqa: E731
                                                       else (counts[n][1][key] - counts[0][1][key])) / (runs * n)
                print(f"| {target.name} | {per():.1f} | {per('get_serialization_context'):.1f} "
                      f"| {per('get_external_store_context'):.1f} |")
    finally:
        for v in variants:
            if v.worker is not None:
                try:
                    await v.worker.shutdown()
                except Exception:  # noqa: BLE001
                    pass
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())

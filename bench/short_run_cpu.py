"""Worker CPU per short run: rein against a raw Temporal loop, and rein without each per-run saving.

    python bench/short_run_cpu.py --n 1 --runs 100 --reps 3

One dev server; every variant has its own worker in this process and runs `--runs` runs of `--n`
iterations (a model call and a tool call each, then the answer) one after another, variants
interleaved repetition by repetition. Per run: the CPU of the workflow-task threads (the workflow
code in the sandbox: a thread pool that counts `time.thread_time`), of the whole process (client
and worker share it), and wall time. Prints a Markdown table; asserts nothing.

  rein                      rein.create_worker defaults (sandboxed)
  raw                       bench/raw_loop.py's RawLoop on a default (sandboxed) worker
  rein, exec per context    temporalio's own sandbox instance: one `exec` per payload sequence to
                            find its serialization context (what rein did before 0.5)
  rein, adapters per run    TypeAdapters built per run's payload converter, as temporalio's
                            pydantic contrib does (what rein did before 0.5)
  rein, workflows/ re-imported
                            AgentWorkflow's package re-imported in every run's sandbox (before 0.4)
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import resource
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

from loop_iterations import check_rein_result, make_agents  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402
from raw_loop import RAW_WORKFLOW, RawLoop, raw_model, raw_tool  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner  # noqa: E402

import rein  # noqa: E402
import rein.temporal.sandbox as sandbox  # noqa: E402
from rein.core.contract import WORKFLOW_TYPE  # noqa: E402
from rein.core.log import disable_logging  # noqa: E402
from rein.temporal import converter  # noqa: E402
from rein.testing import start_local  # noqa: E402

REIMPORTED = tuple(m for m in sandbox.SANDBOX_PASSTHROUGH if m != "rein.workflows") + tuple(
    f"rein.workflows.{m}" for m in ("state", "options", "visibility", "continuation", "children", "identity",
                                    "decisions", "waiting", "stages", "readers", "worker_steps", "loop"))
"""The 0.4.0-rc passthrough list: the workflow body's modules passed through, the package re-imported."""


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The workflow-task thread pool, counting the CPU its threads spend in activations."""

    def __init__(self) -> None:
        super().__init__(max_workers=4)
        self.cpu_s = 0.0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        def measured() -> Any:
            began = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.cpu_s += time.thread_time() - began

        return super().submit(measured)


class TemporalioSandbox(SandboxedWorkflowRunner):
    """temporalio's runner as it is: a subclass, so rein's sandbox_runner keeps it as chosen."""


@contextmanager
def adapters_per_run(on: bool) -> Iterator[None]:
    """Route rein's converter back to the contrib's per-converter adapter cache."""
    if not on:
        yield
        return
    converter._ProcessCachedJSON.from_payload = _per_converter_from_payload  # type: ignore[method-assign]
    try:
        yield
    finally:
        converter._ProcessCachedJSON.from_payload = _SHARED_FROM_PAYLOAD  # type: ignore[method-assign]


_SHARED_FROM_PAYLOAD = converter._ProcessCachedJSON.from_payload


def _per_converter_from_payload(self: Any, payload: Any, type_hint: Any = None) -> Any:
    """The contrib's way: every converter builds its own adapters, rein's types included."""
    if self._own_adapters is None:
        self._own_adapters = functools.lru_cache(maxsize=1024)(TypeAdapter)
    return self._own_adapters(Any if type_hint is None else type_hint).validate_json(payload.data)


class Variant:
    def __init__(self, name: str, client: Client, kind: str, build: Callable[[Client, str, Any], Worker],
                 adapters_per_run: bool = False) -> None:
        self.name, self.client, self.kind, self.adapters_per_run = name, client, kind, adapters_per_run
        self.queue = f"short-{uuid.uuid4().hex[:6]}"
        self.executor = CountingExecutor()
        self.worker = build(client, self.queue, self.executor)
        self.rows: list[tuple[float, float, float]] = []

    async def run(self, n: int) -> None:
        wid = f"{self.queue}-{uuid.uuid4().hex[:8]}"
        if self.kind == "rein":
            handle = await self.client.start_workflow(
                WORKFLOW_TYPE, {"agent": "bench-add", "prompt": f"iterations={n}"}, id=wid, task_queue=self.queue)
            check_rein_result(await handle.result(), n)
        else:
            handle = await self.client.start_workflow(
                RAW_WORKFLOW, {"iterations": n, "prompt": ""}, id=wid, task_queue=self.queue)
            await handle.result()

    async def batch(self, n: int, runs: int) -> None:
        with adapters_per_run(self.adapters_per_run):
            wf0, began = self.executor.cpu_s, time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_SELF)
            for _ in range(runs):
                await self.run(n)
            after = resource.getrusage(resource.RUSAGE_SELF)
            wall = time.perf_counter() - began
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        self.rows.append(((self.executor.cpu_s - wf0) / runs * 1000, cpu / runs * 1000, wall / runs * 1000))


async def main(n: int, runs: int, reps: int) -> None:
    disable_logging()
    env = await start_local()
    rein_client = await Client.connect(env.client.service_client.config.target_host,
                                       data_converter=converter.rein_data_converter())
    raw_client = await Client.connect(env.client.service_client.config.target_host)
    agents = make_agents()

    def rein_worker(**kwargs: Any) -> Callable[[Client, str, Any], Worker]:
        return lambda c, q, e: rein.create_worker(c, agents, task_queue=q, workflow_task_executor=e, **kwargs)

    def reimported(c: Client, q: str, e: Any) -> Worker:
        saved, sandbox.SANDBOX_PASSTHROUGH = sandbox.SANDBOX_PASSTHROUGH, REIMPORTED  # read as the worker is built
        try:
            return rein_worker()(c, q, e)
        finally:
            sandbox.SANDBOX_PASSTHROUGH = saved

    variants = [
        Variant("rein", rein_client, "rein", rein_worker()),
        Variant("raw", raw_client, "raw", lambda c, q, e: Worker(
            c, task_queue=q, workflows=[RawLoop], activities=[raw_model, raw_tool], workflow_task_executor=e)),
        Variant("rein, exec per context", rein_client, "rein", rein_worker(workflow_runner=TemporalioSandbox())),
        Variant("rein, adapters per run", rein_client, "rein", rein_worker(), adapters_per_run=True),
        Variant("rein, workflows/ re-imported", rein_client, "rein", reimported),
    ]
    tasks = [asyncio.create_task(v.worker.run()) for v in variants]
    try:
        for v in variants:
            for _ in range(5):
                await v.run(n)  # warm: first runs import and build what later runs reuse
        for rep in range(reps):
            print(f"repetition {rep + 1}/{reps} ...", file=sys.stderr, flush=True)
            for v in variants:
                await v.batch(n, runs)
    finally:
        await asyncio.gather(*(v.worker.shutdown() for v in variants))
        del tasks
        await env.shutdown()

    raw = variants[1]
    med = lambda v, i: statistics.median(r[i] for r in v.rows)  # noqa: E731
    print(f"\n{runs} runs of N = {n} per repetition, medians of {reps} repetitions, ms per run:\n")
    print("| variant | workflow-task threads CPU | process CPU | wall | process CPU vs raw |")
    print("|---|---:|---:|---:|---:|")
    for v in variants:
        print(f"| {v.name} | {med(v, 0):.1f} | {med(v, 1):.1f} | {med(v, 2):.1f} | {med(v, 1) / med(raw, 1):.2f}× |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1, help="iterations (model call + tool call) per run")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.runs, args.reps))

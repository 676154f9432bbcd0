#!/usr/bin/env python
"""One repetition of the issue-33 item-7 comparison for ONE rein tree (run under that tree's venv).

    python bench/compare_builds.py --tree /path/to/a/checkout --label new --reps 2 --out rep-new-1.json

One dev server (start_dev_server, as bench/lean.py), in this process:
  rein            rein.create_worker defaults (stock-or-rein sandbox, lean start), ReinClient.start
  floor-sandboxed bench/floor.py LeanFloorSandboxed on a plain temporalio Worker (stock sandbox)
  floor           bench/floor.py LeanFloor (unsandboxed)
Each worker has its own workflow-task thread pool counting thread CPU. Timed: N = 3 and N = 80
(1 KB tool results), variants interleaved rep by rep; per run: wall, process CPU (client + worker,
one process), workflow-task thread CPU, dev-server CPU. Exact shapes (one run each): N = 1, 3, 80
(ReinClient and plain client), and an N = 1 run whose agent asks (permission="ask"), approved once.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import resource
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

p = argparse.ArgumentParser()
p.add_argument("--tree", required=True)
p.add_argument("--label", required=True)
p.add_argument("--reps", type=int, default=2)
p.add_argument("--reps3", type=int, default=8)
p.add_argument("--out", required=True)
p.add_argument("--shapes", action="store_true")
args = p.parse_args()

sys.path[:0] = [args.tree, str(Path(args.tree) / "bench")]
from floor import LeanFloor, LeanFloorSandboxed, floor_model, floor_tool  # noqa: E402
from lean import CONFIG, Scripted, chain_histories, make, shape  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

import rein  # noqa: E402
from rein import Agent  # noqa: E402
from rein.client import ReinClient  # noqa: E402

try:  # this build's layout, or a build from before rein/ had layer folders (27084f6)
    from rein.core.log import disable_logging  # noqa: E402
    from rein.durable.embedded_server import start_dev_server  # noqa: E402
except ImportError:
    from rein.log import disable_logging  # type: ignore[no-redef]  # noqa: E402
    from rein.server import start_dev_server  # type: ignore[no-redef]  # noqa: E402
from rein.temporal.converter import rein_data_converter  # noqa: E402

assert rein.__file__.startswith(args.tree), rein.__file__
import rein.workflows  # noqa: E402

assert rein.workflows.__file__.startswith(args.tree), rein.workflows.__file__

TICK = os.sysconf("SC_CLK_TCK")


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=4)
        self.cpu_s = 0.0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *a: Any, **kw: Any):  # type: ignore[override]
        def measured() -> Any:
            began = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                with self._lock:
                    self.cpu_s += time.thread_time() - began
        return super().submit(measured)


def proc_cpu(pid: int) -> float:
    total = 0.0
    for t in [pid] + children(pid):
        try:
            f = open(f"/proc/{t}/stat").read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / TICK
        except OSError:
            pass
    return total


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main() -> None:
    disable_logging()
    server = start_dev_server()
    spid = server.process.pid
    rc = await Client.connect(server.address, data_converter=rein_data_converter())
    raw = await Client.connect(server.address)
    ex = {k: CountingExecutor() for k in ("rein", "floor-sandboxed", "floor", "ask")}
    agent = Agent(provider=Scripted(), tools=[make], name="bench", config=CONFIG)
    ask = Agent(provider=Scripted(), tools=[make], name="bench-ask", config=CONFIG.model_copy(update={"permission": "ask"}))
    workers = [
        rein.create_worker(rc, agents=[agent], task_queue="q-rein", workflow_task_executor=ex["rein"]),
        rein.create_worker(rc, agents=[ask], task_queue="q-ask", workflow_task_executor=ex["ask"]),
        Worker(raw, task_queue="q-floor-sb", workflows=[LeanFloorSandboxed], activities=[floor_model, floor_tool],
               workflow_task_executor=ex["floor-sandboxed"]),
        Worker(raw, task_queue="q-floor", workflows=[LeanFloor], activities=[floor_model, floor_tool],
               workflow_task_executor=ex["floor"]),
    ]
    tasks = [asyncio.create_task(w.run()) for w in workers]  # noqa: F841  (kept alive while the bench runs)
    runner = ReinClient(rc, "q-rein")
    asker = ReinClient(rc, "q-ask")
    info: dict[str, Any] = {"label": args.label, "tree": args.tree, "rein": rein.__file__,
                            "workflows": rein.workflows.__file__, "load_before": os.getloadavg()}

    async def one(variant: str, n: int, pad: int = 1024) -> tuple[str, Any, Client]:
        wid = f"{variant}-{n}-{uuid.uuid4().hex[:8]}"
        if variant.startswith("floor"):
            wf = LeanFloorSandboxed if variant == "floor-sandboxed" else LeanFloor
            q = "q-floor-sb" if variant == "floor-sandboxed" else "q-floor"
            h = await raw.start_workflow(wf.run, {"n": n, "pad": pad}, id=wid, task_queue=q)
            assert await h.result() == f"done after {n}"
            return wid, h, raw
        if variant == "rein-plain":
            h = await raw.start_workflow("AgentWorkflow", {"agent": "bench", "prompt": f"n={n} pad={pad} go"},
                                         id=wid, task_queue="q-rein")
            assert (await h.result())["output"] == f"done after {n}"
            return wid, h, raw
        h = await runner.start("bench", f"n={n} pad={pad} go", run_id=wid, stream=False)
        assert (await h.result()).output == f"done after {n}"
        return wid, h, rc

    async def timed(variant: str, n: int) -> dict[str, float]:
        c0, w0, s0, t0 = self_cpu(), ex[variant].cpu_s, proc_cpu(spid), time.perf_counter()
        await one(variant, n)
        t1, c1, w1, s1 = time.perf_counter(), self_cpu(), ex[variant].cpu_s, proc_cpu(spid)
        return {"wall_ms": 1000 * (t1 - t0), "cpu_ms": 1000 * (c1 - c0), "wft_ms": 1000 * (w1 - w0),
                "server_ms": 1000 * (s1 - s0)}

    async def asked_run() -> dict[str, Any]:
        wid = f"ask-{uuid.uuid4().hex[:8]}"
        h = await asker.start("bench-ask", "n=1 pad=1024 go", run_id=wid, stream=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            hist = await rc.get_workflow_handle(wid).fetch_history()
            if any(e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES and b"waiting_approval" in
                   e.SerializeToString() for e in hist.events):
                break
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("never waited")
        await asker.approve(wid)
        assert (await h.result()).output == "done after 1"
        return events(await chain_histories(rc, wid, h.result_run_id))

    def events(histories: list[Any]) -> dict[str, Any]:
        s = shape(histories)
        kinds: dict[str, int] = {}
        for hh in histories:
            for e in hh.events:
                k = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
                kinds[k] = kinds.get(k, 0) + 1
        markers = [e.marker_recorded_event_attributes.marker_name for hh in histories for e in hh.events
                   if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
        return {**s, "kinds": kinds, "markers": markers}

    out: dict[str, Any] = {"info": info, "timed": {}, "shapes": {}}
    try:
        for v in ("rein", "floor-sandboxed", "floor", "rein-plain"):
            for _ in range(3):
                await one(v, 3)
        await one("rein", 10)
        if args.shapes:
            for n in (1, 3, 80):
                for v in ("rein", "rein-plain", "floor"):
                    wid, h, c = await one(v, n)
                    out["shapes"][f"{v}/{n}"] = events(await chain_histories(c, wid, h.result_run_id))
            out["shapes"]["ask/1"] = await asked_run()
            os.environ["REIN_UI_WAIT_TIMER"] = "1"  # 27084f6's opt-in waiting timer (retired, no effect, in 19a14b7)
            try:
                out["shapes"]["ask-timer-env/1"] = await asked_run()
            finally:
                del os.environ["REIN_UI_WAIT_TIMER"]
        variants = ("rein", "floor-sandboxed", "floor")
        for n, reps in ((80, args.reps), (3, args.reps3)):
            res: dict[str, list] = {v: [] for v in variants}
            for r in range(reps):
                order = variants if r % 2 == 0 else variants[::-1]
                for v in order:
                    res[v].append(await timed(v, n))
            out["timed"][str(n)] = res
            print(f"[{args.label}] N={n} done", file=sys.stderr, flush=True)
    finally:
        await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
        server.stop()
    info["load_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(out, indent=1))


asyncio.run(main())

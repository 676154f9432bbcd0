"""Peer: pydantic-ai durable agent on Temporal vs the lean floor, one dev server (rein's, new tree)."""

import argparse
import asyncio
import json
import os
import resource
import sys
import time
import uuid
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--tree", default="/work/bench-new")
p.add_argument("--reps", type=int, default=2)
p.add_argument("--reps3", type=int, default=8)
p.add_argument("--out", required=True)
p.add_argument("--peer", default="pai")
a = p.parse_args()
sys.path[:0] = [str(Path(__file__).parent), a.tree, a.tree + "/bench"]
import lean  # noqa
from lean import chain_histories, shape
from floor import LeanFloorSandboxed, floor_model, floor_tool
from temporalio.client import Client
from temporalio.worker import Worker
from rein.durable.embedded_server import start_dev_server

if a.peer == "pai":
    from peer_pai import PeerPAI as Peer
    from pydantic_ai.durable_exec.temporal import PydanticAIPlugin as Plugin

    acts = []
else:
    from peer_oa import PeerOA as Peer
    from peer_oa import Provider, make
    from temporalio.openai_agents import OpenAIAgentsPlugin

    def Plugin():  # noqa: N802  (used as the class name above)
        return OpenAIAgentsPlugin(model_provider=Provider())

    acts = [make]


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main():
    server = start_dev_server()
    raw = await Client.connect(server.address)
    pc = await Client.connect(server.address, plugins=[Plugin()])
    ws = [
        Worker(pc, task_queue="q-pai", workflows=[Peer], activities=acts),
        Worker(raw, task_queue="q-floor-sb", workflows=[LeanFloorSandboxed], activities=[floor_model, floor_tool]),
    ]
    tasks = [asyncio.create_task(w.run()) for w in ws]  # noqa: F841  (kept alive while the bench runs)
    out = {"timed": {}, "shapes": {}, "load_before": os.getloadavg()}

    async def one(v, n):
        wid = f"{v}-{n}-{uuid.uuid4().hex[:8]}"
        if v == "pai":
            h = await pc.start_workflow(Peer.run, f"n={n} pad=1024 go", id=wid, task_queue="q-pai")
            c = pc
        else:
            h = await raw.start_workflow(LeanFloorSandboxed.run, {"n": n, "pad": 1024}, id=wid, task_queue="q-floor-sb")
            c = raw
        r = await h.result()
        assert r == f"done after {n}", r
        return wid, h, c

    try:
        for v in ("pai", "floor-sandboxed"):
            for _ in range(3):
                await one(v, 3)
        for n in (1, 3, 80):
            for v in ("pai", "floor-sandboxed"):
                wid, h, c = await one(v, n)
                out["shapes"][f"{v}/{n}"] = shape(await chain_histories(c, wid, h.result_run_id))
        for n, reps in ((80, a.reps), (3, a.reps3)):
            res = {"pai": [], "floor-sandboxed": []}
            for r in range(reps):
                for v in ("pai", "floor-sandboxed") if r % 2 == 0 else ("floor-sandboxed", "pai"):
                    c0, t0 = cpu(), time.perf_counter()
                    await one(v, n)
                    res[v].append({"wall_ms": 1000 * (time.perf_counter() - t0), "cpu_ms": 1000 * (cpu() - c0)})
            out["timed"][str(n)] = res
    finally:
        await asyncio.gather(*(w.shutdown() for w in ws), return_exceptions=True)
        server.stop()
    out["load_after"] = os.getloadavg()
    Path(a.out).write_text(json.dumps(out, indent=1))


asyncio.run(main())

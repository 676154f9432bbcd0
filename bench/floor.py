"""The raw Temporal floor bench/lean.py measures rein against: two activities per iteration.

Per iteration one "model" activity and one "tool" activity returning the padded result,
temporalio's default converter, continue-as-new when Temporal suggests it. Two workflow
types with the same loop: `LeanFloor` unsandboxed (the cheapest any Temporal program can
be) and `LeanFloorSandboxed` with temporalio's default sandbox (what a plain `Worker`
runs). Its own module, so the sandboxed one re-imports only these few lines per run.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import activity, workflow


@activity.defn(name="floor.model")
async def floor_model(request: dict[str, Any]) -> dict[str, Any]:
    i = request["i"]
    return {"text": f"done after {i}"} if i >= request["n"] else {"tool": "make", "n": i}


@activity.defn(name="floor.tool")
async def floor_tool(request: dict[str, Any]) -> str:
    return (str(request["n"] + 1) + ":").ljust(request["pad"], "x")


async def loop(request: dict[str, Any]) -> str:
    i, timeout = request.get("i", 0), timedelta(seconds=60)
    while True:
        if workflow.info().is_continue_as_new_suggested():
            workflow.continue_as_new({**request, "i": i})
        call = await workflow.execute_activity(floor_model, {"i": i, "n": request["n"]}, start_to_close_timeout=timeout)
        if "text" in call:
            return call["text"]
        await workflow.execute_activity(floor_tool, {**call, "pad": request["pad"]}, start_to_close_timeout=timeout)
        i += 1


@workflow.defn(name="LeanFloor", sandboxed=False)
class LeanFloor:
    @workflow.run
    async def run(self, request: dict[str, Any]) -> str:
        return await loop(request)


@workflow.defn(name="LeanFloorSandboxed")
class LeanFloorSandboxed:
    @workflow.run
    async def run(self, request: dict[str, Any]) -> str:
        return await loop(request)

"""A raw Temporal baseline for bench/loop_iterations.py: no rein, default data converter.

`RawLoop` runs `iterations` rounds of two trivial activities ("model" then
"tool"), then one closing "model" call, which is the same command sequence as
an AgentWorkflow run that makes N tool calls and then answers. With
`send_conversation` the "model" activity receives the conversation so far, as a
real agent's model call must (that is what makes agent histories grow
quadratically); without it, only the iteration number.

Kept in its own module so the workflow sandbox can re-import it.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

RAW_WORKFLOW = "RawLoop"

ENTRIES: dict[tuple[str, str], float] = {}
"""(workflow id, activity id) → wall-clock time the activity's code began (for the time breakdown)."""


def note_activity_entry() -> None:
    """Record when this activity's code started running; no-op outside an activity."""
    try:
        info = activity.info()
    except RuntimeError:
        return
    ENTRIES[(info.workflow_id, info.activity_id)] = time.time()


@activity.defn(name="bench.raw_model")
async def raw_model(request: dict[str, Any]) -> dict[str, Any]:
    note_activity_entry()
    i = request["iteration"]
    if i >= request["iterations"]:
        return {"text": f"done after {i} tool calls"}
    return {"tool": "add", "a": i, "b": 1}


@activity.defn(name="bench.raw_tool")
async def raw_tool(request: dict[str, Any]) -> str:
    note_activity_entry()
    total = str(request["a"] + request["b"])
    pad = request.get("pad", 0)
    return total if not pad else (total + " ").ljust(pad, "x")


@workflow.defn(name=RAW_WORKFLOW)
class RawLoop:
    @workflow.run
    async def run(self, request: dict[str, Any]) -> str:
        n = request["iterations"]
        pad = request.get("pad", 0)
        send = request.get("send_conversation", True)
        conversation: list[Any] = [request.get("prompt", "")]
        timeout = timedelta(seconds=30)
        i = 0
        while True:
            call = await workflow.execute_activity(
                raw_model,
                {"iteration": i, "iterations": n, "conversation": conversation if send else []},
                start_to_close_timeout=timeout,
            )
            if "text" in call:
                return call["text"]
            result = await workflow.execute_activity(
                raw_tool, {"a": call["a"], "b": call["b"], "pad": pad}, start_to_close_timeout=timeout
            )
            conversation += [call, result]
            i += 1

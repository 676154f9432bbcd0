"""What a run's result says, in the shapes tests compare."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rein import RunResult


def tool_messages(result: dict) -> dict[str, str]:
    """{tool_call_id: content} of the tool results in a run's result (as a plain dict)."""
    return {m["tool_call_id"]: m["content"] for m in result["session"]["messages"] if m["role"] == "tool"}


def engine_view(result: RunResult) -> dict[str, Any]:
    """What must be equal across engines, frozen (local runs mutate their Session later)."""
    return {
        "status": result.status,
        "output": result.output,
        "data": result.data.model_copy() if isinstance(result.data, BaseModel) else result.data,
        "stop_reason": result.stop_reason,
        "usage": result.usage.model_dump(),
        "steps": [(s.kind, s.summary, s.is_error) for s in result.steps],
        "indices": [s.index for s in result.steps],
        "messages": [m.model_dump() for m in result.session.messages],
        # the wait's id is a durable run's identity (as its run_id), never the in-process engine's
        "interrupt": result.interrupt.model_dump(exclude={"wait"}) if result.interrupt else None,
    }

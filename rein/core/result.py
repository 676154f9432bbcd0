"""What a run reports: RunResult, its Steps, and the Interrupt it may stop at."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from rein.core.ir import ToolCall, Usage
from rein.core.session import Session


class Step(BaseModel):
    """One model call or one tool execution, for observation and replay."""

    index: int
    kind: Literal["model", "tool", "agent"]
    """`agent`: the agent's definition changed under a durable run (rein.core.agent_identity; summary says how)."""
    summary: str
    tool_calls: list[ToolCall] | None = None
    is_error: bool | None = None
    duration_s: float | None = None
    usage: Usage | None = None


class Interrupt(BaseModel):
    """Why a run paused and what it waits for."""

    type: Literal["need_approval", "need_input", "error"]
    tool_call: ToolCall | None = None
    message: str = ""
    wait: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The wait's id in a durable run (rein.core.waits): a decision that names it is refused once the run waits on
    something else. None in-process and from builds before wait ids."""


class RunResult(BaseModel):
    status: Literal["done", "interrupted"]
    output: str | None
    data: Any = None
    """Agents with an output type: the validated final result (an instance of the type for
    `Agent.run` callers, its JSON value in a durable run's raw result)."""
    stop_reason: str = "done"
    usage: Usage = Field(default_factory=Usage)
    elapsed_s: float | None = None
    interrupt: Interrupt | None = None
    run_id: str | None = None
    """The Temporal workflow id of a durable run (None for in-process runs)."""
    steps: list[Step] = Field(default_factory=list)
    session: Session
    """Last, so that a result read in the Temporal UI starts with what matters."""

    def __str__(self) -> str:
        return self.output or ""

"""Session: the whole state of one run, data only. All logic lives in rein.core.machine."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

from rein.core.ir import Message, ToolCall, Usage


class Stage(str, Enum):
    CALL_MODEL = "call_model"
    RUN_TOOLS = "run_tools"
    DONE = "done"


class Decision(BaseModel):
    """A human's answer to an approval request, kept for the audit trail."""

    tool_call_id: str
    approved: bool
    approver: str = ""
    reason: str = ""
    answer: str | None = None
    """For a pending `ask_human` call: the person's answer, used as the tool result."""
    via: str = Field(default="", exclude_if=lambda v: not v)
    """Through what it came: `inbox`, `rule r3` (a rule decided), `timeout`; empty: a plain decision."""
    at: str = Field(default="", exclude_if=lambda v: not v)
    """When the run took it (ISO 8601, workflow time); empty in-process and before rein 0.4's inbox."""
    batch: int = Field(default=0, ge=0, exclude_if=lambda v: not v)
    """The pending batch it was made for (Session.batch then): a decision never carries over to a later batch,
    whose calls may repeat the ids (LiteLLM's `call_0`, `call_1`... in every turn)."""


class Session(BaseModel):
    messages: list[Message] = Field(default_factory=list)
    stage: Stage = Stage.CALL_MODEL
    pending_tool_calls: list[ToolCall] = Field(default_factory=list)
    iteration: int = 0
    usage: Usage = Field(default_factory=Usage)
    repeat_count: int = 0
    last_signature: str | None = None
    done: bool = False
    stop_reason: str | None = None
    decisions: list[Decision] = Field(default_factory=list)
    """Approve/deny decisions, in the order they were made (rein addition)."""
    run_id: str | None = None
    """The durable run (workflow id) this Session belongs to, set by the workflow; None in-process.
    `Agent.resume` signals that run from any process while it is still running (rein addition)."""
    output_json: str | None = None
    """The validated final result as JSON, for agents with an output type."""
    output_failures: int = 0
    """Invalid final answers this turn; more than `LoopConfig.output_retries` ends the run."""
    batch: int = Field(default=0, ge=0, exclude_if=lambda v: not v)
    """How many batches of tool calls the model has asked for: the pending batch's number (rein addition).
    Decisions are bound to it (Decision.batch); a Session of an earlier rein counts from 0."""

"""The Temporal contract: names and data shapes shared by workflow, activities and clients.

Activity, signal, query and search-attribute names are permanent data: runs
in flight and ops tooling depend on them. Everything here is pure pydantic,
safe to import inside the workflow sandbox.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rein.config import LoopConfig
from rein.ir import Message, ToolCall, ToolSpec, Usage
from rein.result import Interrupt, Step
from rein.session import Session

WORKFLOW_TYPE = "AgentWorkflow"
DEFAULT_TASK_QUEUE = "rein"

DESCRIBE_AGENT = "rein.describe_agent"
CALL_MODEL = "rein.call_model"
RUN_TOOL = "rein.run_tool"

WAIT_UPDATE = "rein.wait"
"""Internal update rein's own client uses to wait until a run pauses or ends."""

SEARCH_ATTRIBUTES = {
    "ReinAgent": "Keyword",
    "ReinStatus": "Keyword",
    "ReinIterations": "Int",
    "ReinTokens": "Int",
}

RunStatus = Literal[
    "running", "waiting_approval", "waiting_input", "waiting_retry", "done", "cancelled", "failed"
]

WAITING_STATUS: dict[str, RunStatus] = {
    "need_approval": "waiting_approval",
    "need_input": "waiting_input",
    "error": "waiting_retry",
}


class _Lenient(BaseModel):
    """Inputs from the outside world: unknown fields are ignored, not fatal."""

    model_config = ConfigDict(extra="ignore")


class RunCarry(BaseModel):
    """What a run hands to its continuation when it continues-as-new (internal).

    The conversation travels as the input's `session`; the step log stays with the run
    that made it (the `steps` query of each run in the chain serves it).
    """

    step_count: int = 0
    """Steps recorded by earlier runs of the chain: this run's first step index."""
    active_s: float = 0.0
    pause: int = 0
    ignored_signals: int = 0
    first_step: int = 0
    """Index of the first step this run recorded (earlier ones are in `continued_from`)."""
    continued_from: str | None = None
    """Run id of the run this one continued as new from."""
    sent_messages: int = 0
    sent_digest: str | None = None
    """Chain digest of the first `sent_messages` messages (None: send them all again)."""
    produced: list[str] = Field(default_factory=list)
    """Hashes of messages the worker produced that no model call has referred to yet."""
    input_tools: list[str] = Field(default_factory=list)
    """Tools whose calls are questions for a person (known before the agent is described again)."""
    interrupt: Interrupt | None = None
    """The interrupt the run was waiting on when it continued as new."""
    wait_deadline: float | None = None
    """When the approval wait in progress times out (workflow time, seconds)."""


class AgentInput(_Lenient):
    """Workflow input. A raw client needs only `agent` and `prompt`."""

    agent: str = Field(min_length=1)
    prompt: str | None = None
    session: Session | None = None
    config: dict[str, Any] | None = None
    """LoopConfig field overrides for this run."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    continue_as_new_after: int | None = Field(default=None, ge=20)
    """History length after which the run continues as a new run (default: when Temporal suggests it)."""
    carry: RunCarry | None = None

    def model_post_init(self, _context: Any) -> None:
        if self.prompt is None and self.session is None:
            raise ValueError("give a 'prompt', a 'session' to resume, or both")


class ToolInfo(BaseModel):
    spec: ToolSpec
    retries: int = 0
    timeout_s: float | None = None
    asks_human: bool = False
    local: bool = False
    """Run as a local activity (`@tool(local=True)`)."""


class AgentDescription(BaseModel):
    """What the worker knows about an agent, recorded once at the start of a run."""

    name: str
    model: str
    system: str | None = None
    config: LoopConfig
    tools: list[ToolInfo] = Field(default_factory=list)
    search_attributes: list[str] = Field(default_factory=list)
    """The rein search attributes the server has; the workflow upserts only these."""
    max_payload_bytes: int = 1_500_000
    """The largest payload the worker's converter can record (its external store's limit)."""


class ModelCallInput(BaseModel):
    """Only what the worker does not hold yet, so history grows linearly with the run.

    `new_messages` continue the conversation from `first_index`; an entry that is a string
    is the hash (rein.digest) of a message this worker produced (a model reply, a tool
    result) and keeps in its cache. `digest` is the chain digest of the whole conversation:
    the worker uses its cache only when it matches, else reads the conversation back with
    the `session` query.
    """

    agent: str
    iteration: int
    new_messages: list[Message | str]
    first_index: int = 0
    """Position of new_messages[0] in the conversation."""
    total: int = 0
    """Length of the conversation after new_messages."""
    digest: str = ""
    run_id: str = ""
    workflow_run_id: str = ""
    stream: bool = False
    """Stream chunks to an in-process listener when one is registered for this run."""


class ToolCallInput(BaseModel):
    agent: str
    call: ToolCall
    run_id: str = ""


class DescribeInput(BaseModel):
    agent: str


# ------------------------------------------------------------ signals (lenient)


class DecisionSignal(_Lenient):
    """Payload of `approve` and `deny`; a null tool_call_id targets the whole pending batch."""

    tool_call_id: str | None = None
    approver: str = ""
    reason: str = ""

    @field_validator("approver", "reason", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value


class AnswerSignal(_Lenient):
    text: str
    approver: str = ""

    @field_validator("approver", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value


class CancelSignal(_Lenient):
    reason: str = ""


class RunOutcome(BaseModel):
    """The workflow's result (and the `rein.wait` update's): small whatever the run's length.

    The conversation and the step log are served by the `session` and `steps` queries;
    rein's client turns an outcome into a full RunResult with them.
    """

    status: Literal["done", "interrupted"]
    output: str | None
    stop_reason: str = "done"
    usage: Usage = Field(default_factory=Usage)
    elapsed_s: float | None = None
    interrupt: Interrupt | None = None
    run_id: str | None = None
    iterations: int = 0
    step_count: int = 0
    """Steps over the whole run (all runs of a continue-as-new chain)."""
    message_count: int = 0


class WaitRequest(BaseModel):
    after_pause: int = 0
    """Return once the run has paused (or ended) more times than this."""
    steps_from: int = 0


class RunStatusView(BaseModel):
    """Result of the `status` query."""

    status: RunStatus
    stage: str
    iteration: int
    usage: Usage
    interrupt: Interrupt | None
    pending_tool_calls: list[ToolCall]
    stop_reason: str | None
    pause: int = 0
    ignored_signals: int = 0
    first_step: int = 0
    """Index of the first step this run recorded (earlier ones are in `continued_from`)."""
    continued_from: str | None = None
    """Run id of the run this one continued as new from."""

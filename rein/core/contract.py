"""The Temporal contract: names and data shapes shared by workflow, activities and clients.

Activity, signal, query and search-attribute names are permanent data: runs
in flight and ops tooling depend on them. Everything here is pure pydantic,
safe to import inside the workflow sandbox. Long by design: every wire name and
shape in one place, so a change to what travels is seen in one file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_serializer, model_validator
from temporalio.common import SearchAttributeKey
from temporalio.contrib.workflow_streams import WorkflowStreamState

from rein.core import shared_state
from rein.core.compaction import CompactionTrigger
from rein.core.config import LoopConfig
from rein.core.errors import validation_text
from rein.core.evals import EvalPlan
from rein.core.ir import Completion, Message, ToolCall, ToolSpec, Usage
from rein.core.result import Interrupt, Step
from rein.core.search_names import SEARCH_ATTRIBUTES  # noqa: F401  (public here: the contract's names)
from rein.core.session import Session
from rein.core.threads import ThreadState

WORKFLOW_TYPE = "AgentWorkflow"
DESCRIBE_WORKFLOW_TYPE = "ReinDescribeAgent"
"""A short workflow a client starts to learn an agent's tools from a worker (forks into another agent)."""
SCHEDULED_MESSAGE_TYPE = "ReinScheduledMessage"
"""What a schedule with a thread starts: it sends the schedule's prompt to the thread (rein.durable.schedules)."""
REPLAY_CHECK_WORKFLOW_TYPE = "ReinReplayCheck"
"""What a promotion and `rein deployment set-current`/`rollback` start, pinned to a build: does it replay these runs?"""
REPLAY_CHECK = "rein.replay_check"
"""Its activity: a worker of that build replays runs' histories with its own code (rein.temporal.promotion)."""
DEFAULT_TASK_QUEUE = "rein"
FORK_MEMO = "rein.fork"
"""A fork's lineage {"of", "run", "at_step", "edits", "by"}: its memo key, and its input metadata's."""


def agent_task_queue(agent: str) -> str:
    """The agent's own task queue: every rein process serving the agent polls it (`rein.<name>`).

    Runs started by `Agent.run` live here, so they reach only workers that know the agent,
    and any later process serving it (a script, `worker.py`) continues them.
    """
    return f"{DEFAULT_TASK_QUEUE}.{agent}"


def model_queue(model: str) -> str:
    """The activity task queue of a provider's model calls when a worker routes them (`rein.model.openai`
    for `openai/gpt-4o`): `rein limits set --model` rate-limits it for the whole fleet."""
    provider = model.split("/", 1)[0] if "/" in model else model
    return f"{DEFAULT_TASK_QUEUE}.model.{provider or 'default'}"


DESCRIBE_AGENT = "rein.describe_agent"
AGENT_CHANGED = "AgentChanged"
"""The error type of a model or tool call a worker refused because its definition of the agent differs
from the run's (its details: the worker's AgentDescription). Nothing was run."""
PAYLOAD_TOO_LARGE = "PayloadTooLarge"
"""The error type of a call whose result is too large to record (activities raise it non-retryable)."""
CALL_MODEL = "rein.call_model"
RUN_TOOL = "rein.run_tool"
COMPACT = "rein.compact"
NOTIFY_WAITING = "rein.notify_waiting"
"""The activity that tells people a run waits (the worker's REIN_WAITING_WEBHOOK), retried until delivered
or the wait ends (rein.workflows.inbox)."""
CLOSE_CANCELED = "rein.close_canceled"
"""Local activity: a run ended by the `cancel` signal or update asks Temporal to cancel it, so it closes
CANCELED (Temporal closes a workflow as CANCELED only once cancellation was requested)."""

PASS_DECISION = "rein.pass_decision"
"""Local activity: a decision update sent to a run whose agent-as-tool child waits is that child's update,
sent by the parent's worker; its answer (or refusal) is the parent's (rein.workflows.decisions)."""

WAIT_UPDATE = "rein.wait"
"""Internal update rein's own client uses to wait until a run pauses or ends."""
CHILD_SIGNAL = "rein.child"
"""Internal signal from an agent-as-tool child run to its parent: `{"call_id", "status"}`."""
BUDGET_SIGNAL = "rein.budget"
"""Internal signal from a parent run to its agent-as-tool children: the family's budget is spent."""
STREAM_SIGNAL = "rein.stream"
"""Internal signal (older clients sent it on subscribing): from now on, model calls publish their text live."""
READERS_QUERY = "rein.readers"
"""Internal query the model activity asks while the model answers: how many stream polls are in flight."""
RECORD_QUERY = "rein.record"
"""Internal query rein's client rebuilds a RunResult with: `{"session", "status", "steps"}` (the `session`,
`status` and `steps` queries' answers, steps from `start`) in one round trip instead of three."""

APPROVE_UPDATE = "rein.approve"
DENY_UPDATE = "rein.deny"
ANSWER_UPDATE = "rein.answer"
RETRY_UPDATE = "rein.retry"
CANCEL_UPDATE = "rein.cancel"
"""Validated updates: the same decisions as the signals, but a misfit is rejected to the caller."""
TOOL_RESULTS_UPDATE = "rein.tool_results"
"""Validated update: the results of client tool calls a thread's turn waits for (ToolResults; rein.web.agui)."""
DECISION_UPDATES = {"approve": APPROVE_UPDATE, "deny": DENY_UPDATE, "answer": ANSWER_UPDATE,
                    "retry": RETRY_UPDATE, "cancel": CANCEL_UPDATE}
"""Each decision signal's validated update: what every rein client sends (the signals stay for ops tooling)."""

MAX_ITERATIONS = 100_000
MAX_TOKENS = 2**53
"""Counters beyond this are not believable; they would also overflow the Int search attributes."""
MAX_SECONDS = 10 * 366 * 86400
"""Ten years: longer durations overflow Python's timedelta or Temporal's protobuf Duration."""
MAX_ID = 256
MAX_NAME = 256
MAX_REASON = 8_000
MAX_ANSWER = 200_000

_KEY_KINDS = {"Keyword": SearchAttributeKey.for_keyword, "Int": SearchAttributeKey.for_int, "Double": SearchAttributeKey.for_float}
SEARCH_KEYS: dict[str, Any] = {name: _KEY_KINDS[kind](name) for name, kind in SEARCH_ATTRIBUTES.items()}
"""The typed key of each of rein's search attributes: built here once, for the workflow and every client."""
PROBLEMS = "TemporalReportedProblems"
PROBLEMS_KEY = SearchAttributeKey.for_keyword_list(PROBLEMS)
"""Temporal's own attribute on a run whose workflow tasks keep failing (`rein list --stuck`, `rein status`)."""

RunStatus = Literal[
    "running", "waiting_approval", "waiting_input", "waiting_retry", "done", "cancelled", "failed", "stuck", "idle"
]
"""`stuck`: a bug in rein's own activity code holds the run up until a fixed build takes it (rein.core.failures);
a run whose workflow task fails keeps the last status it published (`rein list --stuck` shows both).
`idle`: a thread between turns, waiting for its next message (rein.core.threads)."""

WAITING_STATUS: dict[str, RunStatus] = {
    "need_approval": "waiting_approval",
    "need_input": "waiting_input",
    "error": "waiting_retry",
}


class _Lenient(BaseModel):
    """Inputs from the outside world: unknown fields are ignored, not fatal."""

    model_config = ConfigDict(extra="ignore")


class RunCarry(BaseModel):
    """The part of a run's state that outlives its history: the workflow reads and changes these
    fields in place (`RunState.carry`), and the same model is its continuation's input when it
    continues as new (internal: a run started by a client with a `carry` fails at once).

    The conversation travels as the input's `session`; the step log stays with the run
    that made it (the `steps` query of each run in the chain serves it).
    """

    step_count: int = Field(default=0, ge=0, le=2**62)
    """Steps recorded by earlier runs of the chain: this run's first step index."""
    active_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    pause: int = Field(default=0, ge=0, le=2**31)
    ignored_signals: int = Field(default=0, ge=0, le=2**62)
    sent_messages: int = Field(default=0, ge=0, le=2**31)
    sent_digest: str | None = Field(default=None, max_length=64)
    """Chain digest of the first `sent_messages` messages (None: send them all again)."""
    produced: list[str] = Field(default_factory=list, max_length=10_000)
    """Hashes of messages the worker produced that no model call has referred to yet."""
    input_tools: list[str] = Field(default_factory=list, max_length=10_000)
    """Tools whose calls are questions for a person (known before the agent is described again)."""
    interrupt: Interrupt | None = None
    """The interrupt the run was waiting on when it continued as new."""
    wait_deadline: float | None = Field(default=None, allow_inf_nan=False)
    """When the approval wait in progress times out (workflow time, seconds)."""
    conversation: str = Field(default="", max_length=64, exclude_if=lambda v: not v)
    agent_version: str = Field(default="", max_length=64, exclude_if=lambda v: not v)
    """The fingerprint of the definition the run followed; a successor described differently says so."""
    approval_tools: list[str] = Field(default_factory=list, max_length=10_000, exclude_if=lambda v: not v)
    permission: str = Field(default="", max_length=8, exclude_if=lambda v: not v)
    """The approval rules the run followed, kept when the successor's definition is looser (rein.core.agent_identity)."""
    thread: ThreadState | None = Field(default=None, exclude_if=lambda v: v is None)
    """A thread's turns, waiting messages and receipts (rein.core.threads); None for a run."""


class AgentInput(_Lenient):
    """Workflow input. A raw client needs only `agent` and `prompt`."""

    agent: str = Field(min_length=1)
    prompt: str | None = None
    session: Session | None = None
    config: dict[str, Any] | None = None
    """LoopConfig field overrides for this run."""
    model: str | None = Field(default=None, min_length=1, max_length=MAX_NAME, exclude_if=lambda v: v is None)
    """This run's model instead of the agent's (a LiteLLM id, e.g. "openai/gpt-4o-mini"): the agent's
    LiteLLM provider settings with this model. Only for agents that allow it (client_overrides "model")."""
    first_step: int = Field(default=0, ge=0, le=2**62, exclude_if=lambda v: not v)
    """The index of this run's first step (a fork at step 7 starts at 8: it continues the original's count)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    continue_as_new_after: int | None = Field(default=None, ge=20)
    """History length after which the run continues as a new run (default: when Temporal suggests it)."""
    carry: RunCarry | None = None
    stream: bool = False
    """Model calls publish text deltas live to the run's stream (also turned on by STREAM_SIGNAL)."""
    stream_state: WorkflowStreamState | None = None
    """The run's stream, handed over on continue-as-new (internal)."""
    parent_call: str | None = None
    """Set when this run is an agent-as-tool call of a parent AgentWorkflow: that tool call's id.
    The run then tells its parent when it waits for a person and when it goes on."""
    thread: bool = Field(default=False, exclude_if=lambda v: not v)
    """A thread (rein.core.threads): the run takes its messages through `rein.send`, one turn each, and
    waits between turns instead of ending. `prompt`, if given, is its first message."""
    state: Any = Field(default=None, exclude_if=lambda v: v is None)
    """A thread's shared state to start from (rein.core.shared_state: a fork's, as its original held it)."""
    eval: EvalPlan | None = Field(default=None, exclude_if=lambda v: v is None)
    """A what-if run (`rein eval`, rein.core.evals): the recorded run's calls, reused instead of run again."""

    def model_post_init(self, _context: Any) -> None:
        if self.prompt is None and self.session is None and not self.thread:
            raise ValueError("give a 'prompt', a 'session' to resume, or both")

    @field_validator("state")
    @classmethod
    def _state_fits(cls, state: Any) -> Any:
        """A thread's starting state: JSON of at most MAX_STATE_BYTES (rein.core.shared_state)."""
        if state is not None:
            shared_state.check(state)
        return state

    @field_validator("session")
    @classmethod
    def _believable_session(cls, session: Session | None) -> Session | None:
        """Counters a run could really have reached; pending call ids that identify one call each."""
        if session is None:
            return None
        bounds = {
            "iteration": (session.iteration, MAX_ITERATIONS),
            "repeat_count": (session.repeat_count, MAX_ITERATIONS),
            "usage.input_tokens": (session.usage.input_tokens, MAX_TOKENS),
            "usage.output_tokens": (session.usage.output_tokens, MAX_TOKENS),
        }
        for name, (value, limit) in bounds.items():
            if not 0 <= value <= limit:
                raise ValueError(f"session.{name} must be between 0 and {limit}, got {value}")
        ids = [c.id for c in session.pending_tool_calls]
        if len(set(ids)) != len(ids):
            raise ValueError("session.pending_tool_calls has two calls with the same id")
        return session


class ToolInfo(BaseModel):
    spec: ToolSpec
    retries: int = 0
    timeout_s: float | None = None
    asks_human: bool = False
    local: bool = False
    """Run as a local activity (`@tool(local=True)`)."""
    requires_approval: bool = False
    """Asks a person before every call, whatever the run's `permission`."""
    replay: Literal["recorded", "run"] = Field(default="recorded", exclude_if=lambda v: v == "recorded")
    """In a what-if run (`rein eval`): a call the recorded run did not make runs (`run`: safe to run
    again) or ends the run there (`recorded`, the default)."""
    agent: str | None = None
    """Set for an agent used as a tool (`Agent.as_tool`): the call runs that agent as a child run."""
    spec_digest: str = Field(default="", exclude_if=lambda v: not v)
    """Set where the spec is recorded by name only (AgentDescription.recorded): the whole spec's digest,
    so a run still tells when a tool changed its parameters (rein.core.agent_identity)."""

    def same_spec(self, other: ToolInfo) -> bool:
        """Whether both describe the tool with the same spec (by digest where one is recorded by name only)."""
        if self.spec_digest or other.spec_digest:
            return (self.spec_digest or spec_digest(self.spec)) == (other.spec_digest or spec_digest(other.spec))
        return self.spec == other.spec


def spec_digest(spec: ToolSpec) -> str:
    """A tool spec's short digest (rein.core.agent_identity's fingerprint length)."""
    text = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


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
    middleware: bool = Field(default=False, exclude_if=lambda v: not v)
    """The agent has middleware, hooks or event handlers: each step runs them on the worker."""
    compaction: CompactionTrigger | None = Field(default=None, exclude_if=lambda v: v is None)
    """The agent compacts its conversation when this trigger is due (activity rein.compact)."""
    client_overrides: list[str] = Field(default_factory=list)
    """LoopConfig fields a client's `config` may loosen (the agent opted in); others may only tighten.
    "model": a client may switch the run's model (AgentInput.model)."""
    model_queue: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The task queue model calls are scheduled on (the worker routes them; None: the run's queue)."""
    version: str = Field(default="", max_length=64, exclude_if=lambda v: not v)
    """The definition's fingerprint (rein.core.agent_identity): model, system prompt, tools and their flags, config.
    Runs send it with each model and tool call; a worker whose definition differs refuses the call
    (AGENT_CHANGED) and the run takes the new definition by the rule in docs/deploys.md."""
    close_canceled: bool = Field(default=False, exclude_if=lambda v: not v)
    timed_counters: bool = Field(default=False, exclude_if=lambda v: not v)
    """Retired flags, still written (True) for the previous build's workflow code, which reads them from a
    description this build's worker records on a mixed queue; this build's workflow reads neither (it
    always closes a cancelled run CANCELED and refreshes counters by time). Drop them a landing later."""
    notify_retry_s: float = Field(default=0.0, ge=0, exclude_if=lambda v: not v)
    """The worker has a webhook for waiting runs (REIN_WAITING_WEBHOOK): the first retry's delay in seconds;
    0: none (the run schedules no notice). Not part of the agent's fingerprint: the worker's deployment choice."""
    in_flight: Literal["stricter", "current"] = Field(default="stricter", exclude_if=lambda v: v == "stricter")
    """How runs in flight take this definition when it changed under them (`Agent(in_flight=...)`):
    "stricter" keeps the stricter of the old and new approval rules; "current" takes the new ones as they are."""

    def recorded(self, whole: Collection[str] = ()) -> dict[str, Any]:
        """This description as a run's first call records it (FirstReply): what the run acts on. A tool
        keeps its name and flags, not its schema: the worker calls the model and holds the schemas of the
        tools in its code; only those named in `whole` (listed from MCP servers) keep their specs whole,
        as the history is then the only record of what a server offered the run. What equals its default
        is left out (about 200 bytes a run), so the defaults are recorded data: never change one."""
        data = self.model_dump(mode="json", exclude_defaults=True, exclude={"tools", "config"})
        # Defaults left out (tests/test_contract.py pins them); a limit turned off is recorded as null.
        data["config"] = self.config.model_dump(mode="json", exclude_defaults=True)
        data["tools"] = [
            ({"spec": t.spec.model_dump(mode="json")} if t.spec.name in whole
             else {"spec": {"name": t.spec.name}, "spec_digest": t.spec_digest or spec_digest(t.spec)})
            | t.model_dump(mode="json", exclude_defaults=True, exclude={"spec", "spec_digest"})  # flags, always
            for t in self.tools
        ]
        return data


class FirstCall(BaseModel):
    """Marks a run's first model call that also describes the agent (rein.workflows.start): the run
    does not know its agent yet, so the worker checks the client's input against it before it calls
    the model, and records the description with the reply (FirstReply)."""

    config: dict[str, Any] = Field(default_factory=dict, exclude_if=lambda v: not v)
    """The client's LoopConfig overrides (AgentInput.config), as sent."""


class ModelCallInput(BaseModel):
    """Only what the worker does not hold yet, so history grows linearly with the run.

    `new_messages` continue the conversation from `first_index`; an entry that is a string
    is the hash (rein.core.digest) of a message this worker produced (a model reply, a tool
    result) and keeps in its cache. `digest` is the chain digest of the whole conversation:
    the worker uses its cache only when it matches, else reads the conversation back with
    the `session` query.
    """

    agent: str
    new_messages: list[Message | str] = Field(default_factory=list, exclude_if=lambda v: not v)
    produced: int = Field(default=0, exclude_if=lambda v: not v)
    """After new_messages, this many messages the worker produced: its last model reply, then
    that reply's tool results in call order (a count instead of a reference each)."""
    first_index: int = Field(default=0, exclude_if=lambda v: not v)
    """Position of new_messages[0] in the conversation; plain model calls leave it out (older
    workflow code sent it): the chain digest says where the messages continue."""
    total: int = 0
    """Length of the conversation after the new messages (left out of history: first_index +
    len(new_messages) + produced)."""
    digest: str = Field(default="", exclude_if=lambda v: not v)
    run_id: str = Field(default="", exclude_if=lambda v: not v)
    workflow_run_id: str = Field(default="", exclude_if=lambda v: not v)
    """Both default to the calling workflow's (activity.info()); the history need not repeat them."""
    stream: bool = Field(default=False, exclude_if=lambda v: not v)
    """Publish the answer's text deltas and tool calls live from the start (a reader was there when
    the call was scheduled); otherwise the worker publishes once a reader turns up (READERS_QUERY)."""
    stream_source: str = Field(default="", exclude_if=lambda v: not v)
    """Names this model call on the stream (the same across its retries; see rein.core.events.StreamEvent)."""
    asked_stream: bool | None = Field(default=None, exclude_if=lambda v: v is None)
    """Whether the run's caller asked for a stream (the answer is then the provider's `stream()`, else its
    `complete()`: docs/streaming.md). Sent only when it differs from `stream` (a reader, not the caller,
    wants the text live): None means as `stream` says, which is also what builds before it sent."""
    conversation: str = Field(default="", max_length=64, exclude_if=lambda v: not v)
    """Changes whenever the run rewrites its conversation (compaction, middleware), so a
    worker never serves a cached copy from before the rewrite."""
    step: StepRequest | None = Field(default=None, exclude_if=lambda v: v is None)
    """Agents with middleware: run the whole step, middleware included (result: StepOutcome)."""
    model: str = Field(default="", exclude_if=lambda v: not v)
    """The run's model override (AgentInput.model); empty: the agent's own model."""
    version: str = Field(default="", max_length=64, exclude_if=lambda v: not v)
    """The fingerprint of the agent definition the run follows (AgentDescription.version)."""
    start: FirstCall | None = Field(default=None, exclude_if=lambda v: v is None)
    """The run's first call, which describes the agent (result: FirstReply); the system prompt is the worker's."""
    tools: list[ToolSpec] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Client tools offered beside the agent's own in this call (a thread's turn brought them: rein.core.threads)."""

    @model_validator(mode="after")
    def _derive_total(self) -> ModelCallInput:
        if not self.total:
            self.total = self.first_index + len(self.new_messages) + self.produced
        return self

    @field_serializer("new_messages", mode="wrap")
    def _messages_without_nulls(self, value: list[Message | str], handler: Any, info: Any) -> Any:
        # Unset message fields (tool_calls, tool_call_id) stay out of the history; the worker
        # reads them back as the same Message (same rein.core.digest hash).
        if info.mode != "json":
            return handler(value)
        return [m if isinstance(m, str) else m.model_dump(mode="json", exclude_none=True) for m in value]

    @model_serializer(mode="wrap")
    def _omit_derived_total(self, handler: Any) -> Any:
        # Every field at its default stays out of the history; so does `total` when it follows from the rest.
        data = handler(self)
        if isinstance(data, dict) and data.get("total") == self.first_index + len(self.new_messages) + self.produced:
            data.pop("total")
        return data


class ModelReply(Completion):
    """A plain model call's result as the workflow reads it: the Completion, and whether the worker
    already put it on the run's stream (a reader was there), so the workflow does not repeat it."""

    published: bool = False


class FirstReply(BaseModel):
    """The result of a run's first call (ModelCallInput.start): the agent as the worker describes it
    and, unless the worker left the call to the run (see AgentActivities.call_model), the reply."""

    agent: AgentDescription
    reply: ModelReply | None = None


def recorded_reply(result: Any) -> Any:
    """The model's reply in a recorded `rein.call_model` result, for readers of history: a lean start's
    first call nests it beside the agent (FirstReply; None when the worker only described the agent)."""
    if isinstance(result, dict) and "agent" in result:
        return result.get("reply")
    return result


class StepRequest(BaseModel):
    """A whole step of an agent with middleware, run by the worker inside the middleware.

    `state` is the Session without its messages; the messages travel like a model
    call's (only those the worker has not seen).
    """

    state: Session
    config: LoopConfig
    elapsed_s: float = 0.0
    input_tools: list[str] = Field(default_factory=list)
    approval_tools: list[str] = Field(default_factory=list)
    """The run's view of which tools ask a person and which need approval (as recorded at its start)."""
    new_messages: list[Message] = Field(default_factory=list)
    first_index: int = 0
    total: int = 0
    run_id: str = ""
    workflow_run_id: str = ""
    conversation: str = ""


ModelCallInput.model_rebuild()
"""It refers to StepRequest, defined after it. Left incomplete, pydantic rebuilt its schema for every
TypeAdapter (~0.4 ms), and the SDK builds one per activity (a new payload converter per context)."""


class StepOutcome(BaseModel):
    """What a middleware step did: the Session it left (as a patch), its Steps, any interrupt."""

    keep: int
    """The first `keep` messages are unchanged; `tail` replaces the rest."""
    tail: list[Message] = Field(default_factory=list)
    state: Session
    """The Session's other fields (its `messages` are empty)."""
    steps: list[Step] = Field(default_factory=list)
    interrupt: Interrupt | None = None
    conversation: str | None = None
    """A new conversation token when the step rewrote earlier messages (see ModelCallInput)."""

    @classmethod
    def between(
        cls, before: list[Message], after: Session, steps: list[Step], interrupt: Interrupt | None, new_token: str
    ) -> StepOutcome:
        keep = 0
        limit = min(len(before), len(after.messages))
        while keep < limit and before[keep] == after.messages[keep]:
            keep += 1
        return cls(
            keep=keep,
            tail=after.messages[keep:],
            state=after.model_copy(update={"messages": []}),
            steps=steps,
            interrupt=interrupt,
            conversation=new_token if keep < len(before) else None,
        )

    def session_from(self, before: Session) -> Session:
        return self.state.model_copy(update={"messages": before.messages[: self.keep] + self.tail})


class CompactResult(BaseModel):
    messages: list[Message] | None = None
    """The compacted conversation, or None when the strategy left it as it was."""
    conversation: str = ""
    """The conversation token from now on (see ModelCallInput)."""


class ToolCallInput(BaseModel):
    """The tool call to run: by reference (`ref`) when the worker produced the model's reply that
    holds it, else whole (`call`: steps with middleware, and activities scheduled by older workflow
    code). A worker that does not hold the referenced call reads it back from the workflow."""

    agent: str
    call: ToolCall | None = Field(default=None, exclude_if=lambda v: v is None)
    ref: str = Field(default="", max_length=64, exclude_if=lambda v: not v)
    """rein.core.digest `ref` of `call_hash(call)`."""
    run_id: str = Field(default="", exclude_if=lambda v: not v)
    """Defaults to the calling workflow's id (activity.info())."""
    step: StepRequest | None = Field(default=None, exclude_if=lambda v: v is None)
    """Agents with middleware: run the whole tool stage (all pending calls), middleware included."""
    version: str = Field(default="", max_length=64, exclude_if=lambda v: not v)
    """The fingerprint of the agent definition the run follows (AgentDescription.version)."""
    state_version: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    """A thread's call: the version of its shared state (rein.core.shared_state; 0: never set) when the call was
    scheduled. A tool that reads `ToolContext.state` gets the value with the `rein.state` query (None: not a thread)."""
    state: Any = Field(default=None, exclude_if=lambda v: v is None)
    """The state itself, for a local activity (its input is not recorded, and it cannot query the run it holds)."""
    key_batch: int = Field(default=0, ge=0, exclude_if=lambda v: not v)
    """Set when an earlier model answer of the run used the call's id too: its idempotency key names the batch
    (rein.core.machine.idempotency_key)."""

    @model_validator(mode="after")
    def _call_or_ref(self) -> ToolCallInput:
        if self.call is None and not self.ref:
            raise ValueError("a tool call input needs `call` or `ref`")
        return self


class DescribeInput(BaseModel):
    agent: str


class ScheduledMessage(BaseModel):
    """ReinScheduledMessage's input: the thread, the agent it starts with, the message."""

    thread_id: str = Field(min_length=1, max_length=MAX_NAME)
    agent: str = Field(min_length=1, max_length=MAX_NAME)
    text: str = Field(min_length=1)
    attributes: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v)
    """rein's search attributes (ReinAgent, ReinTenant...) for the thread when this message starts it."""


class WaitingNotice(BaseModel):
    """NOTIFY_WAITING's input: which run waits, and its waiting memo (rein.core.inbox.WaitingMemo)."""

    run_id: str
    agent: str = ""
    tenant: str | None = None
    namespace: str = ""
    waiting: dict[str, Any] = Field(default_factory=dict)


class CloseCanceledInput(BaseModel):
    reason: str = ""


# ------------------------------------------------------------ signals (lenient)


MAX_NAMED_CALLS = 256
"""Call ids one decision may name."""
NamedId = Annotated[str, Field(min_length=1, max_length=MAX_ID)]


class DecisionSignal(_Lenient):
    """Payload of `approve` and `deny`. A decision names what it decides: `wait` (the wait the sender saw, refused
    once the run waits on another) and `tool_call_ids` (exactly these calls, each one the run waits on). Naming
    neither, as a raw `temporal workflow signal` may: `tool_call_id` (one pending call), or null for every
    undecided call of the pending batch."""

    tool_call_id: str | None = Field(default=None, max_length=MAX_ID)
    tool_call_ids: list[NamedId] | None = Field(default=None, max_length=MAX_NAMED_CALLS)
    wait: NamedId | None = None
    approver: str = Field(default="", max_length=MAX_NAME)
    reason: str = Field(default="", max_length=MAX_REASON)
    tenant: str | None = Field(default=None, max_length=MAX_NAME)
    """The tenant the sender verified the approver for (rein serve's sign-in): the run refuses a decision
    for another tenant than its own. None: unscoped (an operator with the namespace's access)."""
    via: str = Field(default="", max_length=MAX_NAME)
    """Ignored since rein-client-provenance (kept so that earlier senders still parse): a run records "decided by a
    rule" only from its own rule check. Runs recorded before that patch took it as sent."""
    rule: str = Field(default="", max_length=32)
    """Ignored as `via` is (earlier builds let a decision naming a rule skip the approver check)."""

    @field_validator("approver", "reason", "via", "rule", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value


class AnswerSignal(_Lenient):
    text: str = Field(max_length=MAX_ANSWER)
    approver: str = Field(default="", max_length=MAX_NAME)
    tenant: str | None = Field(default=None, max_length=MAX_NAME)
    """As DecisionSignal.tenant."""
    via: str = Field(default="", max_length=MAX_NAME)
    """Ignored, as DecisionSignal.via."""
    wait: NamedId | None = None
    """The wait the sender answers (DecisionSignal.wait)."""

    @field_validator("approver", "via", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value


class CancelSignal(_Lenient):
    reason: str = Field(default="", max_length=MAX_REASON)

    @field_validator("reason", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value


class RetrySignal(_Lenient):
    """Payload of `retry`: nothing to say (an empty object, or none); `tenant` and `wait` as DecisionSignal's."""

    tenant: str | None = Field(default=None, max_length=MAX_NAME)
    wait: NamedId | None = None


class ToolResultEntry(_Lenient):
    tool_call_id: str = Field(min_length=1, max_length=MAX_ID)
    content: str = Field(max_length=MAX_ANSWER)


class ToolResults(_Lenient):
    """Payload of `rein.tool_results`: client tool calls' results, all taken or none (one wait ends once)."""

    results: list[ToolResultEntry] = Field(min_length=1, max_length=64)
    approver: str = Field(default="", max_length=MAX_NAME)
    wait: NamedId | None = None
    """The wait the results answer (DecisionSignal.wait)."""


class ToolResultsTaken(BaseModel):
    """What `rein.tool_results` answers: the call ids it took, and the thread's stream offset when it took them
    (what the turn does next is on the stream from there)."""

    answered: list[str]
    offset: int = 0


DECISION_FOR_CHILD = "DecisionForChild"
"""How builds before PASS_DECISION refused a decision update while the run's agent-as-tool child waited: its
details name the child run, where rein's client sends the decision (so the caller hears the child's answer)."""


class PassDecisionInput(BaseModel):
    """A decision update to pass to a waiting agent-as-tool child run (PASS_DECISION)."""

    run_id: str
    update: str
    payload: dict[str, Any] = Field(default_factory=dict)


class RunOutcome(BaseModel):
    """The workflow's result (and the `rein.wait` update's): small whatever the run's length.

    The conversation and the step log are served by the `session` and `steps` queries;
    rein's client turns an outcome into a full RunResult with them.
    """

    status: Literal["done", "interrupted"]
    output: str | None
    data: Any = None
    """Agents with an output type: the validated final result's JSON value."""
    stop_reason: str = "done"
    usage: Usage = Field(default_factory=Usage)
    elapsed_s: float | None = None
    interrupt: Interrupt | None = None
    run_id: str | None = None
    iterations: int = 0
    step_count: int = 0
    """Steps over the whole run (all runs of a continue-as-new chain)."""
    message_count: int = 0
    turn: int = Field(default=0, exclude_if=lambda v: not v)
    """A thread's turn this outcome is of (0: not a thread)."""
    turn_first_step: int = Field(default=0, exclude_if=lambda v: not v)
    """The index of that turn's first step."""
    diverged: str = Field(default="", exclude_if=lambda v: not v)
    """A what-if run that ended at a call its recorded run did not make: where and which (rein.core.evals)."""

    @field_serializer("usage")
    def _usage(self, usage: Usage) -> dict[str, Any]:
        return usage.model_dump(exclude_none=True)  # no `"cost_usd": null` for models without a price

    @field_serializer("elapsed_s")
    def _elapsed(self, elapsed: float | None) -> float | None:
        return round(elapsed, 3) if elapsed is not None else None  # milliseconds: 13 bytes fewer


class WaitRequest(BaseModel):
    after_pause: int = Field(default=0, ge=0, le=2**31)
    """Return once the run has paused (or ended) more times than this."""
    steps_from: int = Field(default=0, ge=0, le=2**31)
    turn: int = Field(default=0, ge=0, le=2**62, exclude_if=lambda v: not v)
    """A thread: answer with this turn's outcome once it has ended (a later turn may be under way by then)."""


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
    stuck: str = ""
    """While the status is `stuck`: what is held up, and the bug's message."""
    turn: int = 0
    """A thread's turns started so far (0: not a thread)."""
    wait: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The id of the wait the run is in (rein.core.waits; also `interrupt.wait`); None when it waits for nobody."""
    waiting_on: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    """The ids of the pending calls that wait is for (what a decision naming none decides)."""


# ------------------------------------------------------------ config overrides from clients


class ConfigOverrides(BaseModel):
    """A client's `config`: known LoopConfig fields only, each within bounds a run can live with."""

    model_config = ConfigDict(extra="forbid")

    max_iterations: int = Field(default=None, ge=1, le=MAX_ITERATIONS)  # type: ignore[assignment]
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    max_cost_usd: float | None = Field(default=None, ge=0, le=1e9, allow_inf_nan=False)
    thread_max_tokens: int | None = Field(default=None, ge=0, le=2**62)
    thread_max_cost_usd: float | None = Field(default=None, ge=0, le=1e9, allow_inf_nan=False)
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    detect_loops: bool = None  # type: ignore[assignment]
    repeat_threshold: int = Field(default=None, ge=1, le=MAX_ITERATIONS)  # type: ignore[assignment]
    permission: Literal["allow", "ask", "deny"] = None  # type: ignore[assignment]
    approval_timeout_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    model_attempts: int = Field(default=None, ge=1, le=100)  # type: ignore[assignment]
    model_timeout_s: float = Field(default=None, gt=0, le=86_400, allow_inf_nan=False)  # type: ignore[assignment]
    heartbeat_timeout_s: float = Field(default=None, gt=0, le=86_400, allow_inf_nan=False)  # type: ignore[assignment]
    model_retry_interval_s: float = Field(default=None, gt=0, le=3_600, allow_inf_nan=False)  # type: ignore[assignment]
    approvers: list[str] | None = Field(default=None, max_length=1000)
    output_retries: int = Field(default=None, ge=0, le=100)  # type: ignore[assignment]


_PERMISSION_RANK = {"allow": 0, "ask": 1, "deny": 2}


def _at_most(new: float | None, old: float | None) -> bool:
    """None is unlimited: `new` may lower a limit, never raise or remove it."""
    return old is None or (new is not None and new <= old)


def _loosened(name: str, new: Any, old: Any) -> bool:
    if name == "permission":
        return _PERMISSION_RANK[new] < _PERMISSION_RANK[old]
    if name in ("max_iterations", "max_tokens", "max_cost_usd", "thread_max_tokens", "thread_max_cost_usd", "timeout_s",
                "repeat_threshold"):
        return not _at_most(new, old)
    if name == "detect_loops":
        return old and not new
    if name == "approvers":
        return old is not None and (new is None or not set(new) <= set(old))
    return False  # approval_timeout_s, model_attempts, model_timeout_s, heartbeat_timeout_s, model_retry_interval_s: operational


def apply_overrides(base: LoopConfig, raw: Any, may_loosen: Any = ()) -> LoopConfig:
    """`base` with a client's overrides; raises ValueError for unknown keys, out-of-bound values,
    or a loosening of safety (`permission`, breakers, `approvers`) the agent did not opt into."""
    overrides = ConfigOverrides.model_validate(raw)
    # in LoopConfig's field order, not the set's (which varies with hash seeding): a stable error text
    given = {name: getattr(overrides, name) for name in ConfigOverrides.model_fields if name in overrides.model_fields_set}
    free = set(may_loosen)
    looser = [
        name for name, value in given.items()
        if "*" not in free and name not in free and _loosened(name, value, getattr(base, name))
    ]
    if looser:
        raise ValueError(
            "a client may tighten but not loosen " + ", ".join(
                f"{name} ({getattr(base, name)!r} -> {given[name]!r})" for name in looser
            ) + "; the agent can allow it with Agent(client_overrides=[...])"
        )
    return base.model_copy(update=given)


def run_config(agent: AgentDescription, model: str | None, overrides: Any) -> LoopConfig:
    """The LoopConfig a run follows: the agent's, with the client's overrides and model switch checked.
    Raises ValueError with the whole reason (the run and the worker's first call say it the same way)."""
    try:
        check_model_switch(agent, model)
    except ValueError as exc:
        raise ValueError(f"Invalid model override: {exc}") from None
    if not overrides:
        return agent.config
    try:
        return apply_overrides(agent.config, overrides, agent.client_overrides)
    except ValueError as exc:  # pydantic's ValidationError is one
        raise ValueError(f"Invalid config override: {validation_text(exc, 'payload')}") from None


MODEL_OVERRIDE = "model"
"""The `client_overrides` name that lets a client switch a run's model (AgentInput.model)."""


def check_model_switch(agent: AgentDescription, model: str | None) -> None:
    """Raise ValueError when `model` switches the agent's model and the agent did not allow it.

    Off by default: the new model runs with the agent's provider settings (its api_base, its key)
    and at its price, so the agent's author opts in with `client_overrides=["model"]`."""
    if model is None or model == agent.model:
        return
    if MODEL_OVERRIDE not in agent.client_overrides and "*" not in agent.client_overrides:
        raise ValueError(
            f"agent {agent.name!r} does not let a client switch its model ({agent.model} -> {model}); "
            'the agent can allow it with Agent(client_overrides=["model"])'
        )

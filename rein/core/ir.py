"""The internal representation: the only data types that flow through rein.

Vendor formats are translated into these at the provider boundary. All are
pydantic models, so they cross process, JSON and Temporal boundaries unchanged.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, model_serializer, model_validator


class ToolCall(BaseModel):
    """One tool invocation the model asked for; arguments are already parsed."""

    id: str
    name: str
    arguments: dict[str, Any]
    arguments_error: str | None = None
    """Set when the model's argument JSON could not be read; the call then runs nothing and
    the model gets an error result naming the problem (never the tool's defaults)."""

    @model_serializer(mode="wrap")
    def _omit_no_error(self, handler: Any) -> Any:
        """Well-formed calls serialise as before (same history bytes, same vendor payloads)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("arguments_error") is None:
            data.pop("arguments_error", None)
        return data


def parse_tool_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """A model's argument JSON as (arguments, None), or ({}, what is wrong with it)."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        shown = raw if len(raw) <= 200 else raw[:200] + "…"
        return {}, f"the arguments are not valid JSON ({exc}): {shown}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None


class ToolResult(BaseModel):
    """The outcome of one tool call; errors are results, fed back to the model."""

    tool_call_id: str
    content: str
    is_error: bool = False
    state_patch: list[dict[str, Any]] | None = None
    """The tool's change to its thread's shared state (RFC 6902, rein.core.shared_state); None: no change."""

    @model_serializer(mode="wrap")
    def _omit_no_patch(self, handler: Any) -> Any:
        """Results without a state change serialise as before (same history bytes)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("state_patch") is None:
            data.pop("state_patch", None)
        return data


class Message(BaseModel):
    """One conversation message, shaped like the OpenAI / LiteLLM format."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning: str | None = None
    """An assistant message's reasoning, as the model told it (LiteLLM's `reasoning_content`): kept for people to
    read (the stream, AG-UI's REASONING events, the AI SDK's reasoning parts), never sent to a model again."""

    @model_serializer(mode="wrap")
    def _omit_no_reasoning(self, handler: Any) -> Any:
        """Messages without reasoning serialise as before (same history bytes, same digests)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("reasoning") is None:
            data.pop("reasoning", None)
        return data


class Usage(BaseModel):
    """Token and cost counters; `+` sums them, keeping cost None only when both are."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: object) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=cost,
        )


class OutputCheck(BaseModel):
    """The verdict on a final answer when the agent has an output type (see rein.blueprint.output)."""

    tool_call_id: str | None = None
    """The `final_result` call that carried the answer; None for a plain-text answer."""
    data_json: str | None = None
    """The validated value as JSON, when the answer is valid."""
    error: str | None = None
    """What the model is told when it is not."""


FinishReason = Literal["stop", "tool_calls", "length", "error"]


class Completion(BaseModel):
    """One full model answer: what a CALL_MODEL stage produces."""

    message: Message
    usage: Usage = Field(default_factory=Usage)
    finish_reason: FinishReason
    output: OutputCheck | None = None
    """Set by the worker for agents with an output type; the state machine acts on it."""
    model: str | None = None
    """Which model answered, when a fallback chain chose one (shown in the activity's result)."""

    @model_serializer(mode="wrap")
    def _omit_unset_model(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("model") is None:
            data.pop("model", None)
        return data

    def compact(self) -> dict[str, Any]:
        """The JSON an activity records: the reply's fields at top level (no `message` wrapper),
        defaults left out, and what `_implied` restores."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        message = data.pop("message")
        if message.get("role") == "assistant":
            del message["role"]
        if self.finish_reason == "tool_calls" and self.message.tool_calls:
            del data["finish_reason"]
        return {**message, **data}

    @model_validator(mode="before")
    @classmethod
    def _implied(cls, data: Any) -> Any:
        if isinstance(data, dict) and "message" not in data:  # the flat recorded form (`compact`)
            message = {k: data[k] for k in _MESSAGE_FIELDS if k in data}
            data = {k: v for k, v in data.items() if k not in _MESSAGE_FIELDS}
            data["message"] = message
        if isinstance(data, dict) and isinstance(data.get("message"), dict):
            message = data["message"]
            if "role" not in message:
                data = {**data, "message": {**message, "role": "assistant"}}
            if "finish_reason" not in data and message.get("tool_calls"):
                data = {**data, "finish_reason": "tool_calls"}
        return data


_MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "reasoning")
"""Message fields a recorded Completion holds at top level (none is a Completion field)."""


class ToolSpec(BaseModel):
    """A tool definition as the model sees it; `parameters` is a JSON Schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    """Both empty in a run's recorded description (AgentDescription.recorded): the worker holds them."""


class StreamChunk(BaseModel):
    """An incremental piece of a streamed run; observation only, never state.

    `text`, `tool_calls` and `done` are what a model stream yields (and `Agent.astream`); `reasoning` is the
    model's reasoning as it comes (`text` holds it), before its answer.
    A durable run's stream (`rein.client.ReinClient.stream`) also carries the run's events:
    `step` (a Step recorded; `name` is its kind, `data` the Step), `interrupt` (the run
    pauses; `data` is the Interrupt) and `event` (`name` and `data` from middleware/hooks).
    """

    type: Literal["text", "tool_calls", "done", "step", "interrupt", "event", "reasoning"]
    text: str = ""
    tool_calls: list[ToolCall] | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    name: str | None = None
    data: dict[str, Any] | None = None


class StreamFold:
    """Folds a provider's `StreamChunk`s into the `Completion` they stand for.

    The one rule every streaming path uses (the in-process `astream`, the durable
    model-call activity, `BackendProvider.complete`): text is joined (and reasoning, apart), the last
    `tool_calls` chunk wins and makes the finish reason `tool_calls`, the `done`
    chunk brings usage and a finish reason (anything outside the Completion's
    set counts as `stop`). `add` says whether a chunk is worth passing on to
    observers (non-empty text, tool calls); `done` chunks never are.
    """

    __slots__ = ("_parts", "_reasoning", "_tool_calls", "_finish", "_usage")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._reasoning: list[str] = []
        self._tool_calls: list[ToolCall] | None = None
        self._finish = "stop"
        self._usage = Usage()

    def add(self, chunk: StreamChunk) -> bool:
        if chunk.type in ("text", "reasoning"):
            if chunk.text:
                (self._parts if chunk.type == "text" else self._reasoning).append(chunk.text)
                return True
        elif chunk.type == "tool_calls":
            if chunk.tool_calls:
                self._tool_calls = list(chunk.tool_calls)
                return True
        elif chunk.type == "done":
            self._finish = chunk.finish_reason or "stop"
            self._usage = chunk.usage or Usage()
        return False

    def completion(self) -> Completion:
        text = "".join(self._parts)
        reasoning = "".join(self._reasoning) or None
        if self._tool_calls:
            message = Message(role="assistant", content=text, tool_calls=self._tool_calls, reasoning=reasoning)
            return Completion(message=message, finish_reason="tool_calls", usage=self._usage)
        finish = self._finish if self._finish in ("stop", "tool_calls", "length", "error") else "stop"
        message = Message(role="assistant", content=text, reasoning=reasoning)
        return Completion(message=message, finish_reason=finish, usage=self._usage)  # type: ignore[arg-type]

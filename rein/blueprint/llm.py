r"""A vendor-neutral LLM layer: content parts, streaming deltas and the backend protocol.

This mirrors the ``feishu.agent.llm`` API so that any backend written against it
(an object with a ``stream(*, messages, tools=(), system=None, **kwargs)`` method
yielding :data:`StreamChunk` values) can be plugged into rein through
:class:`rein.blueprint.providers.backend.BackendProvider`.

Pure Python and stdlib only, with no I/O at import time, so it can be imported
inside a Temporal workflow sandbox.

It is a view over rein's IR (`rein.core.ir`): the last section holds every
conversion between the two (messages, tools, streamed chunks, usage, stop
reasons), the only place where they meet. `rein.core.ir` is imported by those
functions when they run, so importing this module stays stdlib-only.

Two shapes of tool call exist on purpose:

* :class:`ToolUsePart` is a content block of an assistant message; its
  ``arguments`` are an already parsed ``dict``.
* :class:`ToolCall` is what streamed :class:`ToolCallDelta` fragments merge into;
  its ``arguments`` are the complete JSON *string*, parsed later by the caller.

:func:`merge_tool_call_deltas` is a rein addition (in feishu the merging lives in
``feishu.agent.loop.accumulate_stream``): it folds deltas by ``index``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, Protocol, Union, runtime_checkable

if TYPE_CHECKING:
    from rein.core import ir

__all__ = [
    "ContentPart",
    "LlmBackend",
    "Message",
    "MessageStop",
    "Role",
    "StopReason",
    "StreamChunk",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "ToolCallDelta",
    "ToolResultPart",
    "ToolSpec",
    "ToolUsePart",
    "merge_tool_call_deltas",
    "finish_reason_for",
    "parse_arguments",
    "to_ir_stream",
    "to_ir_usage",
    "to_llm_messages",
    "to_llm_tools",
]


# ---------------------------------------------------------------- content parts


@dataclass(slots=True)
class TextPart:
    r"""
    A piece of plain text inside a message (消息中的一段纯文本内容).

    Examples:
        >>> TextPart(text="你好").text
        '你好'
    """

    text: str


@dataclass(slots=True)
class ToolUsePart:
    r"""
    One tool call made by the model, as a content block of an assistant message.

    ``arguments`` is the already parsed argument dict; unlike :class:`ToolCall`,
    it is a ``dict`` and not a JSON string still to be parsed.

    Examples:
        >>> part = ToolUsePart(id="call_1", name="weather", arguments={"city": "上海"})
        >>> part.name
        'weather'
        >>> part.arguments
        {'city': '上海'}
    """

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class ToolResultPart:
    r"""
    The result of running a tool, sent back to the model in a ``role="tool"`` message.

    ``tool_call_id`` must match the ``id`` of the :class:`ToolUsePart` that
    triggered the run. When the tool failed, set ``is_error`` to ``True`` so the
    model can adapt.

    Examples:
        >>> ok = ToolResultPart(tool_call_id="call_1", content="晴")
        >>> ok.is_error
        False
        >>> err = ToolResultPart(tool_call_id="call_1", content="超时", is_error=True)
        >>> err.is_error
        True
    """

    tool_call_id: str
    content: str
    is_error: bool = False


Role = Literal["user", "assistant", "tool"]
"""Message roles; the system prompt is not a message but the backend's ``system`` argument."""

ContentPart = Union[TextPart, ToolUsePart, ToolResultPart]
"""Any content block a :class:`Message` may hold."""


@dataclass(slots=True)
class Message:
    r"""
    One conversation message: a role plus a list of content parts.

    ``role`` is one of ``user``, ``assistant`` or ``tool``; ``content`` is a list
    of :data:`ContentPart`, which adapters translate into each vendor's format.

    Examples:
        >>> msg = Message(role="user", content=[TextPart(text="你好")])
        >>> msg.role
        'user'
        >>> msg.content[0].text
        '你好'
    """

    role: Role
    content: list[ContentPart]


@dataclass(slots=True)
class ToolSpec:
    r"""
    A vendor-neutral tool declaration the model uses to decide whether to call it.

    ``input_schema`` is the JSON Schema of the arguments. Adapters translate it to
    each vendor's tool format (Anthropic ``input_schema``, OpenAI
    ``function.parameters``).

    Examples:
        >>> spec = ToolSpec(
        ...     name="weather",
        ...     description="查询天气",
        ...     input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        ... )
        >>> spec.name
        'weather'
    """

    name: str
    description: str
    input_schema: dict[str, Any]


# ---------------------------------------------------------------- streaming


class StopReason(str, Enum):
    r"""
    Normalised reason why the model stopped.

    Adapters map each vendor's raw stop reason onto these members. Because the
    enum derives from ``str``, members compare equal to their string literals,
    which keeps serialisation easy.

    Examples:
        >>> StopReason.TOOL_USE == "tool_use"
        True
        >>> StopReason("end_turn") is StopReason.END_TURN
        True
    """

    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"
    REFUSAL = "refusal"
    OTHER = "other"


@dataclass(slots=True)
class TextDelta:
    r"""
    One text increment of a streamed response.

    Examples:
        >>> TextDelta(text="你").text
        '你'
    """

    text: str


@dataclass(slots=True)
class ToolCallDelta:
    r"""
    One tool-call increment of a streamed response.

    All fragments of one tool call share the same ``index``; ``id`` and ``name``
    usually appear only on the first fragment, while ``arguments`` accumulate
    into the complete JSON string. :func:`merge_tool_call_deltas` merges them
    by ``index``.

    Examples:
        >>> head = ToolCallDelta(index=0, id="c1", name="weather", arguments='{"ci')
        >>> tail = ToolCallDelta(index=0, arguments='ty":"上海"}')
        >>> head.id, tail.arguments
        ('c1', 'ty":"上海"}')
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class MessageStop:
    r"""
    End of a streamed response, carrying the stop reason and optional usage counters.

    Examples:
        >>> stop = MessageStop(stop_reason=StopReason.END_TURN, usage={"output_tokens": 12})
        >>> stop.stop_reason
        <StopReason.END_TURN: 'end_turn'>
        >>> stop.usage
        {'output_tokens': 12}
    """

    stop_reason: StopReason
    usage: dict[str, int] | None = None


StreamChunk = Union[TextDelta, ToolCallDelta, MessageStop]
"""Anything an :class:`LlmBackend` stream yields."""


@dataclass(slots=True)
class ToolCall:
    r"""
    A complete tool call, merged from streamed fragments.

    Unlike :class:`ToolUsePart`, ``arguments`` here is the complete JSON string,
    which the caller ``json.loads()`` before dispatching.

    Examples:
        >>> call = ToolCall(id="c1", name="weather", arguments='{"city":"上海"}')
        >>> call.arguments
        '{"city":"上海"}'
    """

    id: str
    name: str
    arguments: str  # complete JSON string; the loop json.loads() it


def merge_tool_call_deltas(deltas: Iterable[ToolCallDelta]) -> list[ToolCall]:
    r"""
    Merge streamed tool-call fragments by ``index`` into complete calls (rein addition).

    The first non-empty ``id`` and ``name`` seen for an index win; ``arguments``
    are concatenated in arrival order. Calls are returned sorted by ``index``. An
    index that never received an id gets ``f"call_{index}"``.

    Examples:
        >>> merge_tool_call_deltas([
        ...     ToolCallDelta(index=0, id="c1", name="weather", arguments='{"ci'),
        ...     ToolCallDelta(index=1, id="c2", name="time", arguments="{}"),
        ...     ToolCallDelta(index=0, arguments='ty":"上海"}'),
        ... ])
        [ToolCall(id='c1', name='weather', arguments='{"city":"上海"}'), ToolCall(id='c2', name='time', arguments='{}')]
    """
    ids: dict[int, str] = {}
    names: dict[int, str] = {}
    args: dict[int, list[str]] = {}
    for delta in deltas:
        i = delta.index
        args.setdefault(i, [])
        if delta.id and i not in ids:
            ids[i] = delta.id
        if delta.name and i not in names:
            names[i] = delta.name
        if delta.arguments:
            args[i].append(delta.arguments)
    return [
        ToolCall(id=ids.get(i, f"call_{i}"), name=names.get(i, ""), arguments="".join(args[i]))
        for i in sorted(args)
    ]


# ---------------------------------------------------------------- backend protocol


@runtime_checkable
class LlmBackend(Protocol):
    r"""
    The LLM backend protocol: the extension contract for custom model backends.

    ``stream`` must return an async iterator yielding :data:`StreamChunk` values.
    The protocol is ``runtime_checkable``, so ``isinstance`` tells whether an
    object has the required ``stream`` method (it does not check the signature).

    Examples:
        >>> class EchoBackend:
        ...     def stream(self, *, messages, tools=(), system=None, **kwargs):
        ...         async def gen():
        ...             yield TextDelta(text="hi")
        ...         return gen()
        >>> isinstance(EchoBackend(), LlmBackend)
        True
    """

    def stream(
        self,
        *,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        system: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[StreamChunk]:
        r"""
        Generate one model turn as a stream.

        Args:
            messages: The conversation so far.
            tools: Tool declarations the model may call this turn.
            system: The system prompt.
            **kwargs: Extra parameters passed through to the underlying model API.

        Returns:
            An async iterator yielding :data:`StreamChunk` values.
        """
        ...


# ---------------------------------------------------------------- the view over rein.core.ir


def to_llm_messages(messages: Sequence[ir.Message]) -> tuple[str | None, list[Message]]:
    r"""
    Split rein IR messages into ``(system prompt or None, messages)`` (rein addition).

    System messages join (blank line between) into the system prompt; an assistant
    message's text and tool calls become :class:`TextPart` and :class:`ToolUsePart`
    blocks; consecutive tool results share one ``role="tool"`` message (rein's
    tool messages carry no error flag, so ``is_error`` is False).
    """
    system_parts: list[str] = []
    out: list[Message] = []
    for m in messages:
        if m.role == "system":
            if m.content:
                system_parts.append(m.content)
        elif m.role == "user":
            out.append(Message(role="user", content=[TextPart(text=m.content)]))
        elif m.role == "assistant":
            parts: list[ContentPart] = []
            if m.content:
                parts.append(TextPart(text=m.content))
            for tc in m.tool_calls or []:
                parts.append(ToolUsePart(id=tc.id, name=tc.name, arguments=dict(tc.arguments)))
            if not parts:
                parts.append(TextPart(text=""))
            out.append(Message(role="assistant", content=parts))
        elif m.role == "tool":
            part = ToolResultPart(tool_call_id=m.tool_call_id or "", content=m.content)
            if out and out[-1].role == "tool":
                out[-1].content.append(part)
            else:
                out.append(Message(role="tool", content=[part]))
        else:  # pragma: no cover - rein.core.ir.Message validates the role
            raise ValueError(f"unsupported message role: {m.role!r}")
    system = "\n\n".join(system_parts) if system_parts else None
    return system, out


def to_llm_tools(tools: Sequence[ir.ToolSpec] | None) -> tuple[ToolSpec, ...]:
    """rein IR tool specs as :class:`ToolSpec` (``parameters`` becomes ``input_schema``)."""
    return tuple(ToolSpec(name=t.name, description=t.description, input_schema=dict(t.parameters)) for t in tools or ())


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """Parse a :class:`ToolCall`'s JSON argument string; empty, invalid or non-object JSON gives ``{}``.

    :func:`to_ir_stream` also records why on the call (``rein.core.ir.parse_tool_arguments``).
    """
    from rein.core.ir import parse_tool_arguments

    return parse_tool_arguments(raw)[0]


def to_ir_usage(raw: dict[str, Any] | None) -> ir.Usage:
    """Map a :class:`MessageStop` ``usage`` dict onto rein's ``Usage``.

    Understands Anthropic (``input_tokens``/``output_tokens`` plus cache counters,
    which are added to the input) and OpenAI (``prompt_tokens``/``completion_tokens``)
    names, and an optional ``cost_usd``.
    """
    from rein.core.ir import Usage

    if not raw:
        return Usage()

    def num(*keys: str) -> int:
        for k in keys:
            v = raw.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return int(v)
        return 0

    input_tokens = (
        num("input_tokens", "prompt_tokens") + num("cache_creation_input_tokens") + num("cache_read_input_tokens")
    )
    output_tokens = num("output_tokens", "completion_tokens")
    cost = raw.get("cost_usd")
    cost_usd = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd)


def _stop_reason(value: Any) -> StopReason | None:
    if value is None:
        return None
    if isinstance(value, StopReason):
        return value
    try:
        return StopReason(value)
    except ValueError:
        return StopReason.OTHER


def finish_reason_for(stop_reason: StopReason | str | None, has_tool_calls: bool) -> str:
    """rein's ``finish_reason`` for a stop reason (None: the stream had no :class:`MessageStop`).

    ``max_tokens`` is ``length``; any answer with tool calls is ``tool_calls``;
    ``tool_use`` without a call is ``error``; everything else is ``stop``.
    """
    reason = _stop_reason(stop_reason)
    if reason is StopReason.MAX_TOKENS:
        return "length"
    if has_tool_calls:
        return "tool_calls"
    if reason is StopReason.TOOL_USE:
        return "error"  # the model said it called a tool, but no call arrived
    return "stop"


async def to_ir_stream(chunks: AsyncIterable[Any], source: str = "the backend") -> AsyncIterator[ir.StreamChunk]:
    """A backend's stream as rein IR chunks: text as it arrives, then one ``tool_calls`` chunk (if any), then ``done``.

    :class:`ToolCallDelta` fragments are merged by index and their JSON arguments
    parsed; an already merged :class:`ToolCall` is accepted too. A stream without
    :class:`MessageStop` counts as a normal end of turn.
    """
    from rein.core.ir import StreamChunk as IrChunk
    from rein.core.ir import ToolCall as IrToolCall
    from rein.core.ir import parse_tool_arguments

    deltas: list[ToolCallDelta] = []
    whole: list[ToolCall] = []
    stop: MessageStop | None = None
    async for chunk in chunks:
        if isinstance(chunk, TextDelta):
            if chunk.text:
                yield IrChunk(type="text", text=chunk.text)
        elif isinstance(chunk, ToolCallDelta):
            deltas.append(chunk)
        elif isinstance(chunk, MessageStop):
            stop = chunk
        elif isinstance(chunk, ToolCall):  # lenient: an already merged call
            whole.append(chunk)
        else:
            raise TypeError(f"{source} yielded {type(chunk).__name__}; expected TextDelta, ToolCallDelta or MessageStop")
    calls = []
    for c in [*merge_tool_call_deltas(deltas), *whole]:
        arguments, error = parse_tool_arguments(c.arguments)
        calls.append(IrToolCall(id=c.id, name=c.name, arguments=arguments, arguments_error=error))
    if calls:
        yield IrChunk(type="tool_calls", tool_calls=calls)
    yield IrChunk(
        type="done",
        usage=to_ir_usage(stop.usage if stop else None),
        finish_reason=finish_reason_for(stop.stop_reason if stop else None, bool(calls)),
    )

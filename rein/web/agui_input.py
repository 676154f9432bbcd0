"""What an AG-UI POST asks of a thread (rein.web.agui): read from `RunAgentInput` (`ag-ui-protocol`).

An AG-UI client sends the whole conversation each time; what is new is at its end. The input's last message, if
a user's, is a new message for the thread (its id the message id: sent twice, taken once); trailing tool messages
are the results of the client tool calls the thread waits for; `resume` entries answer the interrupts that ended
the previous run (approvals, answers, a retry), each bound to the wait its interrupt id names (rein.web.resume).
Anything else is a viewer's request: the turn under way, if any.
Malformed input raises `BadInput` (HTTP 422) with why; nothing has been sent then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ag_ui.core import AssistantMessage, RunAgentInput, Tool, ToolMessage, UserMessage
from pydantic import ValidationError

from rein.core.errors import validation_text
from rein.core.ir import ToolCall, ToolSpec
from rein.core.threads import MAX_CLIENT_TOOLS, MAX_MESSAGE_CHARS, MODES, Mode
from rein.core.waits import parse_shown_id
from rein.web.resume import Answer

EMPTY_SCHEMA = {"type": "object", "properties": {}}
MAX_TOOL_SCHEMA_BYTES = 16 * 1024
"""The largest client tool (its name, description and parameters' JSON Schema, as JSON): it travels in the thread's
history with the message."""
MAX_TOOLS_BYTES = 64 * 1024
"""All of one message's client tools together, as JSON."""


class BadInput(ValueError):
    """The input cannot be taken (HTTP 422, the message says why)."""


@dataclass
class Ask:
    """What the input asks: `kind` message (`text`, `message_id`, `mode`), results (`results`), resume
    (`decisions`) or watch (nothing new)."""

    input: RunAgentInput
    kind: Literal["message", "results", "resume", "watch"]
    text: str = ""
    message_id: str = ""
    mode: Mode = "queue"
    results: dict[str, str] = field(default_factory=dict)
    shown: dict[str, ToolCall] = field(default_factory=dict)
    """The calls the results answer as the input's messages showed them (rein.web.resume.results_fit)."""
    decisions: list[Answer] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    state: Any = None
    """The state a new thread starts with (the page's, rein.web.agui's `_page_state`)."""


def json_object(body: bytes, shape: str) -> dict[str, Any]:
    """A request body's JSON object, or BadInput naming the `shape` expected (every web input reads its body so)."""
    try:
        raw = json.loads(body or b"null")
    except ValueError as exc:
        raise BadInput(f"the body is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise BadInput(f"the body must be a {shape}")
    return raw


def read(body: bytes) -> Ask:
    """The input's ask, or BadInput."""
    raw = json_object(body, "RunAgentInput JSON object (threadId, runId, messages, ...)")
    try:
        given = RunAgentInput.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(f"not a RunAgentInput: {validation_text(exc, 'input')}") from None
    if not given.thread_id.strip() or len(given.thread_id) > 200:
        raise BadInput("threadId must be 1 to 200 characters")
    tools = client_tools(given.tools or [])
    props = given.forwarded_props if isinstance(given.forwarded_props, dict) else {}
    mode: Mode = props.get("mode", "queue")
    if mode not in MODES:
        raise BadInput(f"forwardedProps.mode must be one of {', '.join(MODES)}, not {mode!r}")
    if given.resume:
        return Ask(given, "resume", decisions=[_decision(entry.interrupt_id, entry.status, entry.payload)
                                               for entry in given.resume], tools=tools)
    messages = list(given.messages)
    if messages and isinstance(messages[-1], UserMessage):
        last = messages[-1]
        return Ask(given, "message", text=_text(last.content, "the user message"), message_id=last.id, mode=mode,
                   tools=tools)
    results: dict[str, str] = {}
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.setdefault(message.tool_call_id, _text(message.content, f"the result of tool call {message.tool_call_id}"))
    if results:
        return Ask(given, "results", results=dict(reversed(results.items())), shown=_shown(messages, results),
                   tools=tools)
    return Ask(given, "watch", tools=tools)


def _shown(messages: list[Any], results: dict[str, str]) -> dict[str, ToolCall]:
    """Each answered call as the last assistant message that holds it showed it (its name and arguments)."""
    shown: dict[str, ToolCall] = {}
    for message in messages:
        for call in (getattr(message, "tool_calls", None) or []) if isinstance(message, AssistantMessage) else []:
            if call.id in results:
                try:
                    arguments = json.loads(call.function.arguments or "{}")
                except ValueError:
                    arguments = {"": call.function.arguments}  # not the arguments of any call: refused as stale
                shown[call.id] = ToolCall(id=call.id, name=call.function.name,
                                          arguments=arguments if isinstance(arguments, dict) else {"": arguments})
    return shown


def _text(content: Any, what: str) -> str:
    """A message's text: a string, or its text parts joined (other parts are refused: rein threads carry text)."""
    if isinstance(content, str):
        text = content
    else:
        parts = list(content or [])
        if any(getattr(part, "type", None) != "text" for part in parts):
            raise BadInput(f"{what} has a part that is not text: rein's threads carry text")
        text = "\n".join(str(getattr(part, "text", "")) for part in parts)
    if not text.strip():
        raise BadInput(f"{what} is empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise BadInput(f"{what} is {len(text)} characters, more than {MAX_MESSAGE_CHARS}")
    return text


def client_tools(tools: list[Tool]) -> list[ToolSpec]:
    """A page's own tools as specs, within the documented limits (count, names, schema sizes): else BadInput."""
    if len(tools) > MAX_CLIENT_TOOLS:
        raise BadInput(f"{len(tools)} tools given, at most {MAX_CLIENT_TOOLS}")
    specs, total = [], 0
    for tool in tools:
        if not tool.name or len(tool.name) > 64 or not tool.name.replace("_", "").replace("-", "").isalnum():
            raise BadInput(f"tool name {tool.name!r} must be 1 to 64 letters, digits, '_' or '-'")
        parameters = tool.parameters if tool.parameters is not None else EMPTY_SCHEMA
        if not isinstance(parameters, dict):
            raise BadInput(f"tool {tool.name!r}: parameters must be a JSON Schema object")
        size = len(json.dumps([tool.name, tool.description, parameters], separators=(",", ":")).encode())
        if size > MAX_TOOL_SCHEMA_BYTES:
            raise BadInput(f"tool {tool.name!r} is {size} bytes as JSON, more than {MAX_TOOL_SCHEMA_BYTES}")
        total += size
        if total > MAX_TOOLS_BYTES:
            raise BadInput(f"the client tools are more than {MAX_TOOLS_BYTES} bytes as JSON together")
        specs.append(ToolSpec(name=tool.name, description=tool.description or "", parameters=parameters))
    if len({s.name for s in specs}) != len(specs):
        raise BadInput("two tools have the same name")
    return specs


RETRY = "retry"
"""What a retry's interrupt id names (`rein.<wait>.retry`; `retry` alone from builds before wait ids)."""
INPUT = "input"
"""What the interrupt id of a question asked without a tool call names (`rein.<wait>.input`; earlier `input-N`)."""


def _decision(interrupt_id: str, status: str, payload: Any) -> Answer:
    """A resume entry as the answer it is, on the wait and the call its interrupt id names: `{"approve": true}`,
    `{"approve": false, "reason": ...}`, `{"answer": ...}`, a retry's interrupt resolved; a `cancelled` entry denies
    (for an approval) or is refused (nothing else can be left unanswered). An id that names no wait (an interrupt of
    a build before wait ids: the call's id, `retry`, `input-N`) answers a wait without an id only."""
    parsed = parse_shown_id(interrupt_id)
    wait, what = parsed if parsed is not None else (None, interrupt_id)
    retry = what == RETRY
    call = None if retry or what == INPUT or (parsed is None and what.startswith("input-")) else what
    if not isinstance(payload, dict):
        payload = {}
    if status == "cancelled":
        return Answer(interrupt_id, wait, call, "deny", "cancelled by the client")
    if retry:  # any resolved entry
        return Answer(interrupt_id, wait, None, "retry")
    if isinstance(payload.get("approve"), bool):
        reason = payload.get("reason")
        return Answer(interrupt_id, wait, call, "approve" if payload["approve"] else "deny",
                      reason if isinstance(reason, str) else "")
    if isinstance(payload.get("answer"), str) and payload["answer"].strip():
        return Answer(interrupt_id, wait, call, "answer", payload["answer"])
    if payload.get("retry") is True:
        return Answer(interrupt_id, wait, None, "retry")
    raise BadInput(f"resume entry for interrupt {interrupt_id!r}: its payload must be {{\"approve\": true|false, "
                   "\"reason\": ...}, {\"answer\": \"...\"} or {\"retry\": true}")

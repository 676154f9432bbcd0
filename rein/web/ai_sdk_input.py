"""What a `useChat` POST asks of a thread (rein.web.ai_sdk): read from the AI SDK's chat request body.

`DefaultChatTransport` sends `{"id", "messages", "trigger", "messageId", ...}`: the chat id (the rein thread id),
the page's whole UIMessage list, `submit-message` or `regenerate-message`, and for a submit that continues an
assistant message its id. The thread's own history wins: only the list's last message is read. A user message
there is a new message (its id the message id: sent twice, taken once); an assistant message brings the page's
answers on the calls the thread waits for, in its tool parts (an `approval-responded` part is a decision, an
`output-available` or `output-error` part of a call the thread waits for is that call's result). The page's own
tools come in the request field `tools` (`[{name, description, parameters}]`, `DefaultChatTransport`'s `body`),
the mode of a message in `mode`, a write of the thread's shared state in `state` (`{"value", "version"}`, the version
the page read). Malformed input raises `BadInput` (HTTP 422) with why; nothing was sent then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ag_ui.core import Tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rein.core.errors import validation_text
from rein.core.ir import ToolCall, ToolSpec
from rein.core.threads import MAX_MESSAGE_CHARS, Mode
from rein.core.waits import parse_shown_id, shown_id
from rein.web.agui_input import BadInput, client_tools, json_object


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class UIPart(_Loose):
    """One part of a UIMessage (text, a tool call, ...): the fields rein reads, the rest kept as sent."""

    type: str = Field(min_length=1, max_length=200)
    text: str | None = None
    tool_call_id: str | None = Field(default=None, alias="toolCallId", max_length=200)
    state: str | None = None
    output: Any = None
    error_text: str | None = Field(default=None, alias="errorText")
    approval: dict[str, Any] | None = None


class UIMessage(_Loose):
    id: str = Field(min_length=1, max_length=200)
    role: Literal["system", "user", "assistant"]
    parts: list[UIPart] = Field(default_factory=list)


class ClientTool(_Loose):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str = Field(default="", max_length=10_000)
    parameters: dict[str, Any] | None = Field(default=None, alias="inputSchema")


class PageState(_Loose):
    """A page's write of the thread's shared state: the whole value, and the version it read (rein.core.shared_state)."""

    value: Any
    version: int = Field(ge=0, le=2**62)
    """The version of the state the page read (a write on an older one is refused)."""


class ChatRequest(_Loose):
    """The body DefaultChatTransport posts (and rein's own fields: `tools`, `mode`, `state`)."""

    id: str = Field(min_length=1, max_length=200)
    messages: list[UIMessage] = Field(default_factory=list)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = Field(default=None, alias="messageId", max_length=200)
    tools: list[ClientTool] = Field(default_factory=list)
    mode: Mode = "queue"
    state: PageState | None = None


@dataclass
class Approval:
    """A page's answer to a tool approval request: the call, the wait it was asked in, yes or no and why."""

    approval_id: str
    tool_call_id: str
    wait: str | None
    """The wait's id (rein.core.waits); None for a run of a build before wait ids."""
    approved: bool
    reason: str = ""


@dataclass
class Ask:
    """What the body asks: `kind` message (`text`, `message_id`), answers (`approvals`, `outputs`), regenerate (an
    answer taken back, or a sent message edited: refused), or watch (nothing new)."""

    request: ChatRequest
    kind: Literal["message", "answers", "regenerate", "watch"]
    text: str = ""
    message_id: str = ""
    approvals: list[Approval] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    """Results the page gives for calls (its own tools' outputs, answers to questions): call id -> text."""
    shown: dict[str, ToolCall] = field(default_factory=dict)
    """The calls those results answer as the page shows them."""
    tools: list[ToolSpec] = field(default_factory=list)
    start_state: Any = None
    """The state a new thread starts with (the page's)."""

    @property
    def thread_id(self) -> str:
        return self.request.id


def approval_id(wait: str | None, tool_call_id: str) -> str:
    """The approval id rein sends for a call a wait asks about: `rein.<wait>.<tool call id>` (rein.core.waits.shown_id;
    `rein.-.<id>` from a build before wait ids). An approval that names another wait than the thread's is stale."""
    return shown_id(wait, tool_call_id)


def read(body: bytes) -> Ask:
    """The body's ask, or BadInput."""
    raw = json_object(body, 'JSON object: {"id": CHAT_ID, "messages": [...], "trigger": ...}')
    try:
        request = ChatRequest.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(f"not an AI SDK chat request: {validation_text(exc, 'body')}") from None
    tools = _tools(request.tools)
    if request.trigger == "regenerate-message":
        return Ask(request, "regenerate", tools=tools)
    if not request.messages:
        return Ask(request, "watch", tools=tools)
    last = request.messages[-1]
    if last.role == "user" and request.message_id is not None:  # useChat's edit of a message it sent before
        return Ask(request, "regenerate", tools=tools)
    if last.role == "user":
        return Ask(request, "message", text=_text(last), message_id=last.id, tools=tools)
    if last.role == "assistant":
        approvals, outputs, shown = _answers(last)
        if approvals or outputs:
            return Ask(request, "answers", approvals=approvals, outputs=outputs, shown=shown, tools=tools)
    return Ask(request, "watch", tools=tools)


def _text(message: UIMessage) -> str:
    """A user message's text: its text parts joined (other parts are refused: rein's threads carry text)."""
    kinds = {part.type for part in message.parts} - {"text", "step-start"}
    if any(not kind.startswith("data-") for kind in kinds):
        raise BadInput(f"message {message.id!r} has a part that is not text ({', '.join(sorted(kinds))}): "
                       "rein's threads carry text")
    text = "\n".join(part.text or "" for part in message.parts if part.type == "text")
    if not text.strip():
        raise BadInput(f"message {message.id!r} has no text")
    if len(text) > MAX_MESSAGE_CHARS:
        raise BadInput(f"message {message.id!r} is {len(text)} characters, more than {MAX_MESSAGE_CHARS}")
    return text


def _answers(message: UIMessage) -> tuple[list[Approval], dict[str, str], dict[str, ToolCall]]:
    """The assistant message's answered approvals, its tool outputs (which of them are new, the thread says) and
    the calls those outputs answer as the page shows them (rein.web.resume.results_fit)."""
    approvals: list[Approval] = []
    outputs: dict[str, str] = {}
    shown: dict[str, ToolCall] = {}
    for part in message.parts:
        if not part.type.startswith("tool-") and part.type != "dynamic-tool" or not part.tool_call_id:
            continue
        if part.state == "approval-responded":
            approvals.append(_approval(part))
        elif part.state == "output-available":
            outputs[part.tool_call_id] = _output_text(part.output, part.tool_call_id)
        elif part.state == "output-error":
            outputs[part.tool_call_id] = _output_text(f"Error: {part.error_text or 'the page could not run it'}",
                                                      part.tool_call_id)
        if part.tool_call_id in outputs:
            shown[part.tool_call_id] = _shown_call(part)
    return approvals, outputs, shown


def _shown_call(part: UIPart) -> ToolCall:
    """The call a tool part shows: its tool's name and the input the page holds."""
    extra = part.model_extra or {}
    name = part.type.removeprefix("tool-") if part.type != "dynamic-tool" else str(extra.get("toolName", ""))
    given = extra.get("input")
    return ToolCall(id=part.tool_call_id or "", name=name, arguments=given if isinstance(given, dict) else {"": given})


def _approval(part: UIPart) -> Approval:
    given = part.approval or {}
    raw_id, approved, reason = given.get("id"), given.get("approved"), given.get("reason")
    parsed = parse_shown_id(raw_id) if isinstance(raw_id, str) else None
    if parsed is None or not isinstance(approved, bool):
        raise BadInput(f"tool call {part.tool_call_id!r}: its approval must be {{\"id\": the approval id rein sent, "
                       "\"approved\": true|false, \"reason\": ...}")
    wait, call = parsed
    if call != part.tool_call_id:
        raise BadInput(f"approval {raw_id!r} is not for tool call {part.tool_call_id!r}")
    return Approval(str(raw_id), call, wait, approved, reason if isinstance(reason, str) else "")


def _output_text(output: Any, call_id: str) -> str:
    text = output if isinstance(output, str) else json.dumps(output)
    if len(text) > MAX_MESSAGE_CHARS:
        raise BadInput(f"the output of tool call {call_id!r} is {len(text)} characters, more than {MAX_MESSAGE_CHARS}")
    return text


def _tools(tools: list[ClientTool]) -> list[ToolSpec]:
    """The page's tools, under the same limits as AG-UI's frontend tools."""
    return client_tools([Tool(name=t.name, description=t.description, parameters=t.parameters) for t in tools])

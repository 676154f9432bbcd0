"""A thread's turn told as the AI SDK's UI message stream (`ai` 7.x, `useChat`), and its conversation as UIMessages.

The stream is framed exactly as an AG-UI run (rein.web.agui_events.TurnEvents decides what belongs to the
request, where it ends, which waits were answered already): `UiChunks` turns those events into the UI message
stream's chunks, one assistant message per turn. The chunk shapes are the `ai` package's own
(`uiMessageChunkSchema` in its source; the tests read every chunk rein sends with the real client):

| AG-UI | UI message stream |
|---|---|
| STEP_STARTED / STEP_FINISHED `model` | `start-step` / `finish-step` |
| TEXT_MESSAGE_START / CONTENT / END | `text-start` / `text-delta` / `text-end` |
| REASONING_MESSAGE_START / CONTENT / END | `reasoning-start` / `reasoning-delta` / `reasoning-end` |
| TOOL_CALL_START / ARGS / END | `tool-input-start` / `tool-input-delta` / `tool-input-available` |
| TOOL_CALL_RESULT (+ its `rein.step`) | `tool-output-available`, `tool-output-error`, or `tool-output-denied` |
| RUN_FINISHED with approvals | a `tool-approval-request` per call (`approvalId` rein.ai_sdk_input.approval_id), `finish` |
| RUN_FINISHED (turn end, a client tool's wait) | `finish` (`finishReason`, `messageMetadata.rein`) |
| RUN_ERROR | `error` |
| STATE_DELTA (a change to the thread's shared state) | a `data-state` part with the whole state and its version |
| other CUSTOM events | transient `data-rein-event` parts (`onData`) |

`ui_messages` is the thread's conversation as `UIMessage[]`: a user message per user turn, an assistant message
for what follows it, with ids that do not change (`rein-m<i>` / `rein-r<i>`, `i` the user message's place in the
conversation): the stream's `start` chunk names the same id for the turn it tells.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from rein.core import machine
from rein.core.ir import Message
from rein.core.session import Decision, Session
from rein.web.ai_sdk_input import approval_id

Chunk = dict[str, Any]
MODEL_STEP = "model"
FINISH_REASONS = {"done": "stop", "max_tokens": "length", "length": "length"}
"""A turn's stop reason as the SDK's finish reason (anything else is `other`)."""


def reply_id(user_index: int) -> str:
    """The id of the assistant message that answers the user message at `user_index` in the conversation."""
    return f"rein-r{user_index}"


def turn_message_id(data: dict[str, Any] | None) -> str:
    """The assistant message id of the turn a stream `turn` item opens (its user message's place; builds before it
    was told: the turn number)."""
    data = data or {}
    at = data.get("at")
    return reply_id(at) if isinstance(at, int) else f"rein-t{data.get('turn', 0)}"


class UiChunks:
    """AG-UI events of one request in, UI message chunks out (see the module); `asked`: the calls the request itself
    answered approvals for."""

    def __init__(self, asked: frozenset[str] = frozenset()) -> None:
        self.args: dict[str, str] = {}
        self.names: dict[str, str] = {}
        self.results: dict[str, str] = {}
        self.asked = set(asked)
        """Calls the page was asked to approve (in this stream, or answered by its request): a denial of one is
        `tool-output-denied`; any other denial (a rule's, a policy's) is an error the page never decided."""
        self.finished = False

    def __call__(self, event: BaseEvent) -> list[Chunk]:
        if isinstance(event, (StepStartedEvent, StepFinishedEvent)):
            kind = "start-step" if isinstance(event, StepStartedEvent) else "finish-step"
            return [{"type": kind}] if event.step_name == MODEL_STEP else []
        if isinstance(event, TextMessageStartEvent):
            return [{"type": "text-start", "id": event.message_id}]
        if isinstance(event, TextMessageContentEvent):
            return [{"type": "text-delta", "id": event.message_id, "delta": event.delta}]
        if isinstance(event, TextMessageEndEvent):
            return [{"type": "text-end", "id": event.message_id}]
        if isinstance(event, ReasoningMessageStartEvent):
            return [{"type": "reasoning-start", "id": event.message_id}]
        if isinstance(event, ReasoningMessageContentEvent):
            return [{"type": "reasoning-delta", "id": event.message_id, "delta": event.delta}]
        if isinstance(event, ReasoningMessageEndEvent):
            return [{"type": "reasoning-end", "id": event.message_id}]
        if isinstance(event, (ToolCallStartEvent, ToolCallArgsEvent, ToolCallEndEvent, ToolCallResultEvent)):
            return self._tool(event)
        if isinstance(event, CustomEvent):
            return self._custom(event.name, event.value)
        if isinstance(event, RunFinishedEvent):
            return self._finished(event)
        if isinstance(event, RunErrorEvent):
            self.finished = True
            return [{"type": "error", "errorText": event.message or "the thread refused the request"}]
        return []

    def _tool(self, event: ToolCallStartEvent | ToolCallArgsEvent | ToolCallEndEvent | ToolCallResultEvent) -> list[Chunk]:
        call = event.tool_call_id
        if isinstance(event, ToolCallStartEvent):
            self.names[call], self.args[call] = event.tool_call_name, ""
            return [{"type": "tool-input-start", "toolCallId": call, "toolName": event.tool_call_name}]
        if isinstance(event, ToolCallArgsEvent):
            self.args[call] = self.args.get(call, "") + event.delta
            return [{"type": "tool-input-delta", "toolCallId": call, "inputTextDelta": event.delta}]
        if isinstance(event, ToolCallEndEvent):
            return [{"type": "tool-input-available", "toolCallId": call, "toolName": self.names.get(call, ""),
                     "input": _json(self.args.get(call, ""))}]
        self.results[call] = str(event.content)  # told with its step record, which says how it went
        return []

    def _custom(self, name: str, value: Any) -> list[Chunk]:
        if name == "rein.step" and isinstance(value, dict) and value.get("tool_call_id") in self.results:
            call = str(value["tool_call_id"])
            content = self.results.pop(call)
            if not value.get("is_error"):
                return [{"type": "tool-output-available", "toolCallId": call, "output": content}]
            if content.startswith("Denied") and call in self.asked:  # rein's result for a denied call (rein.core.machine)
                return [{"type": "tool-output-denied", "toolCallId": call}]
            return [{"type": "tool-output-error", "toolCallId": call, "errorText": content}]
        if name in ("rein.step", "rein.cut", "rein.turn"):
            return []
        return [{"type": "data-rein-event", "data": {"name": name, "value": value}, "transient": True}]

    def _finished(self, event: RunFinishedEvent) -> list[Chunk]:
        self.finished = True
        outcome, result = event.outcome, event.result
        chunks: list[Chunk] = []
        reason = "other"
        if isinstance(outcome, RunFinishedInterruptOutcome):
            for interrupt in outcome.interrupts:
                chunks += self._interrupt(interrupt)
            reason = "tool-calls" if any(i.reason == "tool_approval" for i in outcome.interrupts) else "other"
        elif isinstance(outcome, RunFinishedSuccessOutcome) and outcome.pending_tool_call_ids:
            reason = "tool-calls"
        elif isinstance(result, dict):
            reason = FINISH_REASONS.get(str(result.get("stop_reason")), "other")
        metadata: dict[str, Any] = {"stopReason": result.get("stop_reason")} if isinstance(result, dict) else {}
        usage = event.usage
        if usage:
            metadata["usage"] = {"inputTokens": usage[0].input_tokens, "outputTokens": usage[0].output_tokens}
        finish: Chunk = {"type": "finish", "finishReason": reason}
        if metadata:
            finish["messageMetadata"] = {"rein": metadata}
        return [*chunks, finish]

    def _interrupt(self, interrupt: Interrupt) -> list[Chunk]:
        rein = (interrupt.metadata or {}).get("rein", {}) if isinstance(interrupt.metadata, dict) else {}
        if interrupt.reason == "tool_approval" and interrupt.tool_call_id:
            self.asked.add(interrupt.tool_call_id)
            return [{"type": "tool-approval-request", "toolCallId": interrupt.tool_call_id,
                     "approvalId": approval_id(rein.get("wait"), interrupt.tool_call_id)}]
        if interrupt.reason == "input" and interrupt.tool_call_id:
            return []  # a question the model asked with a tool: its part waits for the page's output
        return [{"type": "data-rein-interrupt", "id": interrupt.id,
                 "data": {"id": interrupt.id, "reason": interrupt.reason, "message": interrupt.message}}]


def state_part(data: dict[str, Any]) -> Chunk:
    """The thread's shared state as the `data-state` part (one per message, id `state`, replaced by each change):
    `{"version", "value"}`."""
    return {"type": "data-state", "id": "state", "data": {"version": data.get("version", 0), "value": data.get("value")}}


def ui_messages(session: Session, pending: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The conversation as UIMessages (see the module); its system prompt stays out. `pending`: the calls a wait
    asks approval for now, by call id, with their approval ids (`rein.<wait>.<call id>`). Call ids repeat across
    turns (LiteLLM's `call_0`...): each call takes the results that follow its own message and its own batch's
    decision, and only the last calls asked can be the ones asked now."""
    pending = pending or {}
    decided = iter(machine.call_decisions(session))
    messages = session.messages
    last = max((i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls), default=-1)
    out: list[dict[str, Any]] = []
    reply: dict[str, Any] | None = None
    for index, message in enumerate(messages):
        if message.role == "user":
            out.append({"id": f"rein-m{index}", "role": "user", "parts": [{"type": "text", "text": message.content}]})
            reply = None
        elif message.role == "assistant":
            if reply is None:
                user = max((i for i in range(index) if messages[i].role == "user"), default=index)
                reply = {"id": reply_id(user), "role": "assistant", "parts": []}
                out.append(reply)
            reply["parts"].append({"type": "step-start"})
            if message.reasoning:
                reply["parts"].append({"type": "reasoning", "text": message.reasoning, "state": "done"})
            if message.content:
                reply["parts"].append({"type": "text", "text": message.content, "state": "done"})
            results = _results_after(messages, index)
            for call in message.tool_calls or []:
                _, decision = next(decided, (call, None))
                asking = pending.get(call.id) if index == last and call.id not in results else None
                reply["parts"].append(_tool_part(call.id, call.name, call.arguments, results.get(call.id), decision,
                                                 asking))
    return out


def _results_after(messages: list[Message], index: int) -> dict[str, Message]:
    """The tool results that follow the assistant message at `index` (its calls' results), by call id."""
    found: dict[str, Message] = {}
    for message in messages[index + 1:]:
        if message.role != "tool":
            break
        if message.tool_call_id:
            found.setdefault(message.tool_call_id, message)
    return found


def _tool_part(call_id: str, name: str, arguments: dict[str, Any], result: Message | None, decision: Decision | None,
               asking: str | None) -> dict[str, Any]:
    """A call as a tool part; `asking`: its approval id while a wait asks approval for it (a decided call's id names
    no wait: it is history, nothing a page can answer again)."""
    part: dict[str, Any] = {"type": f"tool-{name}", "toolCallId": call_id, "input": arguments}
    approval = asking or approval_id(None, call_id)
    if result is None:
        part["state"] = "approval-requested" if asking is not None else "input-available"
        if asking is not None:
            part["approval"] = {"id": approval}
        return part
    asked = decision is not None and decision.answer is None
    if asked and decision is not None and not decision.approved:
        part.update(state="output-denied", approval={"id": approval, "approved": False, "reason": decision.reason})
    elif result.content.startswith("Denied"):  # by policy: nobody was asked
        part.update(state="output-error", errorText=result.content)
    else:
        part.update(state="output-available", output=result.content)
        if asked:
            part["approval"] = {"id": approval, "approved": True}
    return part


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text

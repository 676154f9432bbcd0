"""A thread's stream (rein.core.events) told as AG-UI events (`ag-ui-protocol`), one translator per reader.

The translation is a pure function of the stream items from an *anchor* offset: a translator started at the same
anchor turns the same items into the same events with the same ids. So every event's id names its anchor, the
stream offset of the item it came from and its place among that item's events (`anchor.offset.k`): a client that
lost its connection sends the last id it has (Last-Event-ID) and gets, from a translator rebuilt at the anchor,
every later event once (`Resumed`). An anchor is where translation starts afresh: a turn's `turn` item, or where
a run that continues a turn began (after a decision or a tool result).

Two framings: one AG-UI run (`follow=False`, a POST: it ends at the turn's end, at a wait for a person or a
client tool, or when the thread ends) and a viewer's (`follow=True`: every turn from here on, each an AG-UI run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    EventType,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessage,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import ToolCall as AgUiToolCall
from ag_ui.core.events import RunFinishedCancelledOutcome

from rein.core.events import StreamEvent, TextDeduplicator
from rein.core.ir import Message, StreamChunk
from rein.core.shared_state import STATE_EVENT, SharedState
from rein.core.waits import shown_id

MODEL_STEP = "model"
RETRY_INTERRUPT = "retry"
"""What the interrupt of a turn that waits to retry a failed model call names (`rein.<wait>.retry`; resume it with
any `resolved` entry)."""
INPUT_INTERRUPT = "input"
"""What the interrupt of a question asked without a tool call names (`rein.<wait>.input`)."""
APPROVAL_SCHEMA = {"type": "object", "properties": {"approve": {"type": "boolean"}, "reason": {"type": "string"}},
                   "required": ["approve"]}
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}

Emitted = tuple[str | None, BaseEvent]
"""An event and its id (None: an opener told again on a reconnect; it keeps the client's last id)."""


def event_id(anchor: int, offset: int, k: int) -> str:
    return f"{anchor}.{offset}.{k}"


def parse_event_id(text: str | None) -> tuple[int, int, int] | None:
    """`anchor.offset.k`, or None for anything else (an id of a client's own)."""
    try:
        anchor, offset, k = (int(part) for part in (text or "").split("."))
    except ValueError:
        return None
    return (anchor, offset, k) if min(anchor, offset, k) >= 0 else None


@dataclass
class TurnEvents:
    """Stream items in, AG-UI events out (see the module). `waiting_for`: a message id whose turn this run tells
    (until its `turn` item, nothing else is told); `answering`: the calls the run's input answers, as shown ids
    (`rein.<wait>.<call id>`: a resume's, rein.web.resume) or bare call ids (tool results): a wait for those alone is
    the input taking effect, not the run's end (a later wait for a call with a repeated id is told)."""

    thread_id: str
    run_id: str
    anchor: int
    follow: bool = False
    waiting_for: str | None = None
    answering: frozenset[str] = frozenset()
    finished: bool = False
    ended: bool = False
    """The thread itself ended (its stream's `done`)."""
    _open_run: bool = False
    _text: str | None = None
    _thinking: str | None = None
    _message: str | None = None
    _step: bool = False
    _fresh: TextDeduplicator = field(default_factory=TextDeduplicator)
    _names: dict[str, str] = field(default_factory=dict)
    _turn: int = 0
    _more: bool = False
    state_version: int = 0
    """The version of the state snapshot the client was sent: older changes on the stream are not told again."""

    def __post_init__(self) -> None:
        self._open_run = not self.follow and self.waiting_for is None

    def feed(self, offset: int, item: StreamEvent, more: bool = False) -> list[Emitted]:
        """The events of the item at `offset` (none once the run finished); `more`: a later item is known already
        (a wait it follows was answered: not an end)."""
        if self.finished:
            return []
        self._more = more
        chunk = item.chunk
        if chunk.type == "event" and chunk.name == "turn":
            self._turn_opens(offset, chunk)
        elif self.waiting_for is not None and chunk.type != "done":
            return []
        events: list[BaseEvent] = []
        if chunk.type == "done":
            events = self._done(chunk)
        elif self._open_run or self.follow:
            events = self._told(offset, item, chunk)
        return [(event_id(self.anchor, offset, k), event) for k, event in enumerate(events, start=1)]

    def _turn_opens(self, offset: int, chunk: StreamChunk) -> None:
        data = chunk.data or {}
        if self.waiting_for is not None and data.get("message_id") != self.waiting_for:
            return
        if self.follow and self._open_run:
            return  # a viewer's run is closed by its turn's end first; a turn opens only after it
        self.waiting_for = None
        self._open_run = self._open_run or not self.follow
        self.anchor = offset
        self._fresh, self._names, self._text, self._message, self._step = TextDeduplicator(), {}, None, None, False
        self._turn = int(data.get("turn") or 0)

    def _told(self, offset: int, item: StreamEvent, chunk: StreamChunk) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        if self.follow and not self._open_run and chunk.type != "event":
            events.append(self._run_started(offset))
        if chunk.type == "text":
            events += self._text_delta(item)
        elif chunk.type == "reasoning":
            events += self._reasoning_delta(item)
        elif chunk.type == "tool_calls":
            events += self._tool_calls(offset, chunk)
        elif chunk.type == "step":
            events += self._step_done(offset, chunk)
        elif chunk.type == "interrupt":
            events += self._interrupt(offset, chunk)
        elif chunk.type == "event":
            events += self._event(offset, chunk)
        return events

    def _run_started(self, offset: int) -> RunStartedEvent:
        self._open_run = True
        self.run_id = f"{self.thread_id}.{self._turn}.{offset}"
        return RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)

    def started(self) -> RunStartedEvent:
        """The run's RUN_STARTED (a POST's: it opens before any item)."""
        return RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)

    # ---------------------------------------------------------------- model output

    def _text_delta(self, item: StreamEvent) -> list[BaseEvent]:
        chunk = self._fresh(item)
        if chunk is None or not chunk.text:
            return []
        events: list[BaseEvent] = self._step_opens() + self._reasoning_ends()
        message = f"rein-{item.source or self._turn}"
        if self._text != message:
            events += self._text_ends()
            self._text = self._message = message
            events.append(TextMessageStartEvent(message_id=message, role="assistant"))
        events.append(TextMessageContentEvent(message_id=message, delta=chunk.text))
        return events

    def _reasoning_delta(self, item: StreamEvent) -> list[BaseEvent]:
        """The model's reasoning: a REASONING block with one reasoning message, before the call's text."""
        chunk = self._fresh(item)
        if chunk is None or not chunk.text:
            return []
        events: list[BaseEvent] = self._step_opens() + self._text_ends()
        message = f"rein-{item.source or self._turn}"
        if self._thinking != message:
            events += self._reasoning_ends()
            self._thinking = message
            events += [ReasoningStartEvent(message_id=message),
                       ReasoningMessageStartEvent(message_id=message, role="reasoning")]
        events.append(ReasoningMessageContentEvent(message_id=message, delta=chunk.text))
        return events

    def _reasoning_ends(self) -> list[BaseEvent]:
        if self._thinking is None:
            return []
        message, self._thinking = self._thinking, None
        return [ReasoningMessageEndEvent(message_id=message), ReasoningEndEvent(message_id=message)]

    def _tool_calls(self, offset: int, chunk: StreamChunk) -> list[BaseEvent]:
        events = self._step_opens() + self._reasoning_ends() + self._text_ends()
        parent = self._message or f"rein-{offset}"
        self._message = parent
        for call in chunk.tool_calls or []:
            if call.id in self._names:
                continue
            self._names[call.id] = call.name
            events += [ToolCallStartEvent(tool_call_id=call.id, tool_call_name=call.name, parent_message_id=parent),
                       ToolCallArgsEvent(tool_call_id=call.id, delta=json.dumps(call.arguments)),
                       ToolCallEndEvent(tool_call_id=call.id)]
        return events

    def _step_opens(self) -> list[BaseEvent]:
        if self._step:
            return []
        self._step = True
        return [StepStartedEvent(step_name=MODEL_STEP)]

    def _text_ends(self) -> list[BaseEvent]:
        if self._text is None:
            return []
        message, self._text = self._text, None
        return [TextMessageEndEvent(message_id=message)]

    def _step_done(self, offset: int, chunk: StreamChunk) -> list[BaseEvent]:
        data = chunk.data or {}
        record = CustomEvent(name="rein.step", value={k: v for k, v in data.items() if k != "content"})
        if chunk.name == "model":
            events = self._step_opens() + self._reasoning_ends() + self._text_ends() + [
                StepFinishedEvent(step_name=MODEL_STEP), record]
            self._step, self._message = False, None
            return events
        if chunk.name != "tool" or not data.get("tool_call_id"):
            return [record]
        call_id = str(data["tool_call_id"])
        name = f"tool {self._names.get(call_id) or str(data.get('summary', '')).split(' → ')[0]}"
        return [StepStartedEvent(step_name=name),
                ToolCallResultEvent(message_id=f"rein-result-{offset}-{call_id}", tool_call_id=call_id,
                                    content=str(data.get("content", "")), role="tool"),
                StepFinishedEvent(step_name=name), record]

    # ---------------------------------------------------------------- ends

    def _closing(self) -> list[BaseEvent]:
        events = self._reasoning_ends() + self._text_ends()
        if self._step:
            self._step = False
            events.append(StepFinishedEvent(step_name=MODEL_STEP))
        return events

    def _finish(self, event: BaseEvent) -> list[BaseEvent]:
        events = self._closing() + [event]
        self._open_run = False
        self.finished = not self.follow
        return events

    def _interrupt(self, offset: int, chunk: StreamChunk) -> list[BaseEvent]:
        data = chunk.data or {}
        calls = [c for c in data.get("calls") or [] if isinstance(c, dict) and c.get("id")]
        wait = data.get("wait") if isinstance(data.get("wait"), str) else None
        if self._more or (calls and all(shown_id(wait, str(c["id"])) in self.answering or str(c["id"]) in self.answering
                                        for c in calls)):
            return []  # answered already, or the next of the calls this run's input decides (being decided now)
        client = set(data.get("client_tools") or [])
        outcome: RunFinishedInterruptOutcome | RunFinishedSuccessOutcome
        if chunk.name == "need_input" and calls and all(c.get("name") in client for c in calls):
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=[str(c["id"]) for c in calls])
        else:
            outcome = RunFinishedInterruptOutcome(interrupts=_interrupts(chunk.name or "", data, calls, client, offset))
        events = self._finish(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome,
                                               usage=_usage(chunk)))
        if isinstance(outcome, RunFinishedInterruptOutcome):  # the conversation, for a client that resumes later:
            events.insert(len(events) - 1, MessagesSnapshotEvent(messages=[]))  # filled by the endpoint (a query)
        return events

    def _event(self, offset: int, chunk: StreamChunk) -> list[BaseEvent]:
        data = chunk.data or {}
        if chunk.name == "turn":
            return [] if not self.follow else [self._run_started(offset), CustomEvent(name="rein.turn", value=data)]
        if chunk.name == "turn_end":
            if not self._open_run:
                return []
            result = {"stop_reason": chunk.finish_reason or "done", "turn": data.get("turn")}
            return self._finish(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=result,
                                                 usage=_usage(chunk)))
        if chunk.name == "cut":
            self._fresh(StreamEvent(chunk=chunk))
            return self._text_ends() + [CustomEvent(name="rein.cut", value=data)]
        if chunk.name == STATE_EVENT:  # a change to the thread's shared state (rein.core.shared_state)
            version = int(data.get("version") or 0)
            if version <= self.state_version:
                return []  # the snapshot the client has holds it already
            self.state_version = version
            return [StateDeltaEvent(delta=list(data.get("patch") or []), metadata={"rein": {"stateVersion": version}})]
        return [CustomEvent(name=chunk.name or "event", value=data)]

    def _done(self, chunk: StreamChunk) -> list[BaseEvent]:
        """The thread ended (cancelled, failed): a run still open ends with it."""
        self.ended = True
        telling = self._open_run or not self.follow
        self._open_run, self.finished = False, True
        if not telling:
            return []
        if chunk.finish_reason == "failed":
            return self._closing() + [RunErrorEvent(message="the thread failed", code="ThreadFailed")]
        outcome = RunFinishedCancelledOutcome() if chunk.finish_reason == "cancelled" else None
        return self._closing() + [RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome,
                                                   result={"stop_reason": chunk.finish_reason or "done"})]


def state_snapshot(state: SharedState) -> StateSnapshotEvent:
    """The thread's shared state for a client (its version in `metadata.rein.stateVersion`)."""
    return StateSnapshotEvent(snapshot=state.value, metadata={"rein": {"stateVersion": state.version}})


def snapshot(messages: list[Message]) -> MessagesSnapshotEvent:
    """The thread's conversation as AG-UI messages (a page that opens an existing thread shows it); its system
    prompt stays out. Ids are the messages' places in the conversation."""
    told: list[Any] = []
    for number, message in enumerate(messages):
        key = f"rein-m{number}"
        if message.role == "user":
            told.append(UserMessage(id=key, content=message.content or " "))
        elif message.role == "assistant":
            if message.reasoning:
                told.append(ReasoningMessage(id=f"{key}r", role="reasoning", content=message.reasoning))
            calls = [AgUiToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=json.dumps(c.arguments)))
                     for c in message.tool_calls or []]
            told.append(AssistantMessage(id=key, content=message.content or None, tool_calls=calls or None))
        elif message.role == "tool":
            told.append(ToolMessage(id=key, content=message.content or "", tool_call_id=message.tool_call_id or ""))
    return MessagesSnapshotEvent(messages=told)


def _interrupts(kind: str, data: dict[str, Any], calls: list[dict[str, Any]], client: set[str],
                offset: int) -> list[Interrupt]:
    """One AG-UI interrupt per call the wait is for, or one for a wait without calls. Each id names the wait and
    the call (`rein.<wait>.<call id>`, `rein.<wait>.retry`, `rein.<wait>.input`: rein.core.waits.shown_id), so a
    resume answers that wait only; a run of a build before wait ids keeps the earlier ids (the call's id, `retry`,
    `input-<offset>`)."""
    wait = data.get("wait") if isinstance(data.get("wait"), str) else None

    def named(what: str, earlier: str) -> str:
        return shown_id(wait, what) if wait else earlier

    meta: dict[str, Any] = {"wait": wait} if wait else {}
    if kind == "error" or not calls:
        what = RETRY_INTERRUPT if kind == "error" else INPUT_INTERRUPT
        return [Interrupt(id=named(what, RETRY_INTERRUPT if kind == "error" else f"input-{offset}"),
                          reason="model_error" if kind == "error" else "input", message=str(data.get("message", "")),
                          response_schema=None if kind == "error" else ANSWER_SCHEMA, metadata={"rein": meta})]
    found = []
    for call in calls:
        name, arguments, call_id = str(call.get("name", "")), call.get("arguments") or {}, str(call["id"])
        rein = {"tool": name, "arguments": arguments, **meta}
        if kind == "need_approval":
            found.append(Interrupt(id=named(call_id, call_id), reason="tool_approval", tool_call_id=call_id,
                                   message=f"Approve {name}({_arguments(arguments)})?", response_schema=APPROVAL_SCHEMA,
                                   metadata={"rein": rein}))
        elif name not in client:
            question = arguments.get("question") if isinstance(arguments, dict) else None
            found.append(Interrupt(id=named(call_id, call_id), reason="input", tool_call_id=call_id,
                                   message=str(question or data.get("message", "")), response_schema=ANSWER_SCHEMA,
                                   metadata={"rein": rein}))
    return found


def _arguments(arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return ""
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in arguments.items())[:200]


def _usage(chunk: StreamChunk) -> list[TokenUsage] | None:
    usage = chunk.usage
    if usage is None or not (usage.input_tokens or usage.output_tokens):
        return None
    return [TokenUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                       total_tokens=usage.input_tokens + usage.output_tokens)]


OPENERS = {EventType.TEXT_MESSAGE_START: EventType.TEXT_MESSAGE_END, EventType.TOOL_CALL_START: EventType.TOOL_CALL_END,
           EventType.STEP_STARTED: EventType.STEP_FINISHED, EventType.RUN_STARTED: EventType.RUN_FINISHED,
           EventType.REASONING_START: EventType.REASONING_END,
           EventType.REASONING_MESSAGE_START: EventType.REASONING_MESSAGE_END}
ENDS = (EventType.RUN_FINISHED, EventType.RUN_ERROR)


def _entity(event: BaseEvent) -> tuple[str, str] | None:
    """What an event belongs to (a text message, a tool call, a step, the run), for reopening on a reconnect."""
    if event.type in (EventType.REASONING_START, EventType.REASONING_END):
        return "reasoning", str(getattr(event, "message_id", ""))
    for kind, attribute in (("message", "message_id"), ("call", "tool_call_id"), ("step", "step_name")):
        value = getattr(event, attribute, None)
        if value is not None and event.type != EventType.TOOL_CALL_RESULT:
            return kind, str(value)
    if event.type in (EventType.RUN_STARTED, EventType.RUN_FINISHED):
        return "run", ""
    return None


class Resumed:
    """The events after a client's Last-Event-ID (`anchor.offset.k`), once: earlier ones are dropped, but the openers
    among them whose entity goes on (a viewer's run, a step, a text message, a tool call) are told again (without an
    id) before the first event told, and a run end among them is told again at the end: a reconnecting client sees
    a whole run, missing nothing and repeating no content."""

    def __init__(self, after: tuple[int, int]):
        self.after = after
        self.open: dict[tuple[str, str], BaseEvent] = {}
        self.end: BaseEvent | None = None

    def __call__(self, emitted: list[Emitted]) -> list[Emitted]:
        out: list[Emitted] = []
        for event_id_, event in emitted:
            parsed = parse_event_id(event_id_)
            if parsed is not None and (parsed[1], parsed[2]) <= self.after:
                self._remember(event)
                continue
            out += [(None, opener) for opener in self.open.values()]
            self.open.clear()
            out.append((event_id_, event))
        return out

    def _remember(self, event: BaseEvent) -> None:
        key = _entity(event)
        if event.type in ENDS:
            self.end = event
            self.open.pop(("run", ""), None)
        elif key is not None and event.type in OPENERS:
            self.open[key] = event
        elif key is not None and event.type in OPENERS.values():
            self.open.pop(key, None)

    def missed_end(self) -> BaseEvent | None:
        """The run's end, when the client had it already (told again: the reconnected request is a run too)."""
        end, self.end = self.end, None
        return end

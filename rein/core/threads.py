"""Threads: one durable run per conversation, taking a message at any moment (pure: no I/O, no clock).

A thread is an AgentWorkflow run started with `thread=True`: its workflow id is the thread id, each
message arrives through the `rein.send` update (the first one starts the run: update-with-start), and
between turns the run waits at no cost. What a message does while a turn is under way is its mode:

- `queue` (default): it is the next turn's message (each queued message is a turn of its own, in order).
- `steer`: it joins the conversation before the turn's next model call; tool calls in flight finish first.
  Left over when the turn ends, it opens the next turn.
- `interrupt`: the model call in flight is cancelled (its partial text is dropped from the conversation and
  the stream marks it `cut`), then the turn goes on with the message. While the turn waits for an approval
  the pending calls are denied ("interrupted by a new message"); waiting for an answer, the message is the
  answer; waiting to retry a failed model call, it retries with the message.
- `reject`: refused while a turn is under way (`busy`); on an idle thread, it starts a turn.

The same `message_id` sent twice is taken once: the second sender gets the first one's receipt.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rein.core.config import LoopConfig
from rein.core.ir import Message, ToolSpec, Usage
from rein.core.session import Session, Stage

SEND_UPDATE = "rein.send"
STOP_UPDATE = "rein.stop_turn"
"""Stop the turn under way (a page's stop button): the thread stays and takes the next message."""
STOPPED = "stopped"
"""The stop reason of a turn a `rein.stop_turn` ended."""
THREAD_QUERY = "rein.thread"
THREAD_MEMO = "rein.thread"
"""Memo key every thread carries (`rein threads` lists runs with it), its value the thread's start time (ISO 8601;
`true` from builds before): rein's clients set it at the start, and every run it continues as new keeps it; a thread
started by a stock tool (`temporal workflow start-update-with-start`) sets it itself at its first turn."""
Mode = Literal["queue", "steer", "interrupt", "reject"]
MODES: tuple[str, ...] = ("queue", "steer", "interrupt", "reject")

MAX_MESSAGE_CHARS = 100_000
"""A message's text, at most (a longer one is refused: put documents in a tool, not the chat)."""
MAX_WAITING = 100
"""Messages waiting in a thread (queued and steering) at most; one more is refused until a turn takes some."""
KEPT_OUTCOMES = 20
"""Ended turns whose outcome a thread keeps for clients that wait for them (`ReinClient.reply`)."""
MAX_CLIENT_TOOLS = 64
"""Tools a message may bring for its turn (a web page's own tools, run by the client: rein.web.agui)."""
MAX_RECEIPTS = 1_000
"""Receipts kept for duplicate intake: a message id sent again after this many newer ones is a new message."""
TURNS_PER_RUN = 50
"""A thread continues as new at a turn boundary after this many turns in one history at the latest
(earlier when Temporal suggests it), so its history stays bounded however long the conversation."""
INTERRUPTED = "interrupted by a new message"
TURN_TRACE = "rein.thread_turn"
"""The workflow extern function rein's tracing interceptor installs: a thread calls it as each turn opens
(`"start"`) and ends (`"end"`), so each turn is a trace of its own, linked to the thread's run span."""


class SendRequest(BaseModel):
    """The `rein.send` update's argument: `{"text": ..., "mode": "queue", "message_id": null, "sender": ""}`."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    mode: Mode = "queue"
    message_id: str | None = Field(default=None, min_length=1, max_length=200)
    """The sender's id for this message (a webhook's delivery id): sent twice, it is taken once."""
    sender: str = Field(default="", max_length=200)
    stream: bool = False
    """The sender reads the turn as a stream (`astream`): its model calls answer with the provider's stream."""
    tools: list[ToolSpec] = Field(default_factory=list, max_length=MAX_CLIENT_TOOLS)
    """Client tools: offered to the model for this message's turn beside the agent's own; the client runs them
    and sends each call's result back (`rein.tool_results`), while the thread waits for it (`waiting_input`)."""


class StopRequest(BaseModel):
    """The `rein.stop_turn` update's argument: who stops the turn (recorded on what it denies)."""

    model_config = ConfigDict(extra="ignore")

    by: str = Field(default="", max_length=200)


class SendReceipt(BaseModel):
    """What `rein.send` answers: where the message went. A duplicate gets the first sender's receipt."""

    thread_id: str
    message_id: str
    mode: Mode
    turn: int
    """The turn that takes the message (1 is the thread's first)."""
    ahead: int = 0
    """Turns before this message's (the one under way included; 0: its turn is under way or starts now)."""
    pause: int = 0
    """The run's pause count when the message was taken: a client waits for the turn past it."""
    duplicate: bool = False
    joined: bool = Field(default=False, exclude_if=lambda v: not v)
    """A steer or interrupt that joined the turn under way (on an idle thread it opens the next turn)."""
    offset: int = Field(default=0, ge=0, exclude_if=lambda v: not v)
    """The thread's stream offset when the message was taken: its turn's items come at or after it."""
    waits: str = Field(default="", exclude_if=lambda v: not v)
    """A steer or interrupt that joined a turn waiting for a person: what it waited for (`need_approval`, ...). A
    steer is read once that is decided; an interrupt decides it (denies the calls, is the answer, retries). The turn's
    outcome its sender hears comes after that."""


class Waiting(BaseModel):
    """A message the thread holds for a later model call or turn."""

    message_id: str
    text: str
    mode: Mode
    sender: str = ""
    stream: bool = Field(default=False, exclude_if=lambda v: not v)
    tools: list[ToolSpec] = Field(default_factory=list, exclude_if=lambda v: not v)


class ThreadState(BaseModel):
    """A thread's part of the run's carried state (RunCarry.thread)."""

    turns: int = Field(default=0, ge=0)
    """Turns started (the one under way included)."""
    open: bool = False
    """A turn is under way."""
    queued: list[Waiting] = Field(default_factory=list)
    steering: list[Waiting] = Field(default_factory=list)
    receipts: dict[str, SendReceipt] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    """Every ended turn's usage (a turn's own is the Session's)."""
    last_output: str | None = None
    turn_first_step: int = Field(default=0, ge=0)
    """The index of the first step of the turn under way (or of the last one)."""
    ended: dict[int, dict[str, Any]] = Field(default_factory=dict)
    """The last KEPT_OUTCOMES ended turns' outcomes (RunOutcome JSON) by turn: a client waiting for its own turn
    hears it, whatever came next, a continue-as-new included."""
    client_tools: list[ToolSpec] = Field(default_factory=list, exclude_if=lambda v: not v)
    """The turn under way's client tools (its messages' `tools`): the model is offered them, the client answers them."""
    turn_offset: int = Field(default=0, ge=0, exclude_if=lambda v: not v)
    """The thread's stream offset where the turn under way (or the last one) opened: a viewer reads it from there."""
    turn_first_message: int = Field(default=0, ge=0, exclude_if=lambda v: not v)
    """The index in the conversation of the message that opened the turn under way (or the last one): the turn's
    words are those from there on (`turn_output`), never an earlier turn's."""
    stopping: str = Field(default="", max_length=200, exclude_if=lambda v: not v)
    """Who asked to stop the turn under way (`rein.stop_turn`): it ends before its next model call."""
    state: Any = Field(default=None, exclude_if=lambda v: v is None)
    """The thread's shared JSON state (rein.core.shared_state); None: never set (`{}` to its readers)."""
    state_version: int = Field(default=0, ge=0, exclude_if=lambda v: not v)
    """Changes to `state` so far: a page's write names the version it read."""


class ThreadView(BaseModel):
    """The `rein.thread` query: a thread at a glance."""

    thread_id: str
    agent: str
    status: str
    turns: int
    open: bool
    queued: list[Waiting]
    steering: list[Waiting]
    usage: Usage
    last_output: str | None = None
    turn_first_step: int = 0
    client_tools: list[str] = Field(default_factory=list)
    """The names of the turn under way's client tools."""
    turn_offset: int = 0
    offset: int = 0
    """The thread's stream offset now (its next item goes there)."""
    state: Any = Field(default_factory=dict)
    """The thread's shared state (rein.core.shared_state) and its version."""
    state_version: int = 0


class Busy(ValueError):
    """A message the thread refuses as it stands (reject while busy, too many waiting)."""


def spent(state: ThreadState, turn: Usage, config: LoopConfig | None) -> str | None:
    """Why the thread's own budget (LoopConfig.thread_max_*) is spent, counting the turn under way's `turn`; None if not."""
    if config is None:
        return None
    used = state.usage + turn if state.open else state.usage
    if config.thread_max_tokens is not None and used.total_tokens >= config.thread_max_tokens:
        return f"the thread has spent its budget of {config.thread_max_tokens} tokens"
    cost = used.cost_usd
    if config.thread_max_cost_usd is not None and cost is not None and cost >= config.thread_max_cost_usd:
        return f"the thread has spent its budget of ${config.thread_max_cost_usd:g}"
    return None


def check(state: ThreadState, request: SendRequest, budget: str | None = None) -> None:
    """Refuse what the thread cannot take now (a duplicate always fits: it gets its receipt); `budget`:
    why the thread's budget is spent, if it is."""
    if request.message_id is not None and request.message_id in state.receipts:
        return
    if budget is not None:
        raise Busy(budget)
    if request.mode == "reject" and state.open:
        raise Busy(f"busy: turn {state.turns} is under way (mode reject)")
    if len(state.queued) + len(state.steering) >= MAX_WAITING:
        raise Busy(f"{MAX_WAITING} messages already wait in this thread; send again once a turn takes them")


def take(state: ThreadState, request: SendRequest, message_id: str, thread_id: str, pause: int,
         offset: int = 0, waits: str = "") -> SendReceipt:
    """Hold the message where its mode says; its receipt (the first one's for a duplicate id). `offset`: the
    thread's stream offset now (the receipt says where the message's turn is to be read from); `waits`: what the
    turn under way waits for (a steer joining it is read once that is decided)."""
    known = state.receipts.get(message_id)
    if known is not None:
        return known.model_copy(update={"duplicate": True})
    waiting = Waiting(message_id=message_id, text=request.text, mode=request.mode, sender=request.sender,
                      stream=request.stream, tools=request.tools)
    if state.open and request.mode in ("steer", "interrupt"):
        state.steering.append(waiting)
        receipt = SendReceipt(thread_id=thread_id, message_id=message_id, mode=request.mode, turn=state.turns, pause=pause,
                              joined=True, offset=offset, waits=waits)
    else:
        state.queued.append(waiting)
        receipt = SendReceipt(thread_id=thread_id, message_id=message_id, mode=request.mode,
                              turn=state.turns + len(state.queued), ahead=len(state.queued) - 1 + state.open, pause=pause,
                              offset=offset)
    state.receipts[message_id] = receipt
    while len(state.receipts) > MAX_RECEIPTS:
        del state.receipts[next(iter(state.receipts))]
    return receipt


def next_turn(state: ThreadState) -> Waiting | None:
    """The message that opens the next turn, taken from the queue (None: wait for one)."""
    if not state.queued:
        return None
    state.turns += 1
    state.open = True
    return state.queued.pop(0)


def turn_messages(session: Session, state: ThreadState) -> list[Message]:
    """The conversation of the turn under way (or the last one): from the message that opened it on."""
    first = state.turn_first_message
    return session.messages[first:] if first <= len(session.messages) else session.messages


def turn_output(session: Session, state: ThreadState) -> str | None:
    """The turn's `output`: its final result's JSON (an agent with an output type), else its last text; None while
    it has said nothing yet (an earlier turn's words are not this turn's)."""
    if session.output_json is not None:
        return session.output_json
    return next((m.content for m in reversed(turn_messages(session, state)) if m.role == "assistant" and m.content), None)


def compacted(state: ThreadState, before: int, after: int) -> None:
    """The conversation went from `before` to `after` messages (compaction keeps its newest ones): the turn's first
    message moves with them (to the start when compaction took it in)."""
    state.turn_first_message = max(0, state.turn_first_message - max(0, before - after))


def keep_outcome(state: ThreadState, outcome: dict[str, Any]) -> None:
    """The ended turn's outcome, for its waiting clients; the oldest kept goes past KEPT_OUTCOMES."""
    state.ended[state.turns] = outcome
    for old in [turn for turn in state.ended if turn <= state.turns - KEPT_OUTCOMES]:
        del state.ended[old]


def end_turn(state: ThreadState, usage: Usage, output: str | None) -> None:
    """The turn under way ended: its usage adds to the thread's. Steering it did not take in (the turn ended
    on a budget or a failure) opens the next turn; every queued message's receipt names its turn again."""
    state.open = False
    state.stopping = ""
    state.usage = state.usage + usage
    state.last_output = output
    state.client_tools = []
    state.queued[:0] = state.steering
    state.steering = []
    for position, waiting in enumerate(state.queued, start=1):
        receipt = state.receipts.get(waiting.message_id)
        if receipt is not None:
            receipt.turn, receipt.ahead, receipt.joined, receipt.waits = state.turns + position, position - 1, False, ""


def add_client_tools(state: ThreadState, tools: list[ToolSpec], own: set[str]) -> None:
    """A message's client tools join its turn's (a name the agent's own tools or the turn already have is left out:
    the agent's tool wins, the first client tool of a name stays)."""
    taken = own | {t.name for t in state.client_tools}
    for tool in tools:
        if tool.name not in taken and len(state.client_tools) < MAX_CLIENT_TOOLS:
            state.client_tools.append(tool)
            taken.add(tool.name)


def join(session: Session, steering: list[Waiting]) -> None:
    """Steering messages join the turn under way before its next model call (a turn that had answered
    goes on: the model answers them too)."""
    session.messages += [Message(role="user", content=w.text) for w in steering]
    if session.done or session.stage == Stage.DONE:
        session.done = False
        session.stop_reason = None
        session.output_json = None
        session.stage = Stage.CALL_MODEL

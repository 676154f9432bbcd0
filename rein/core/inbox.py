"""What a waiting run tells the inbox: one small memo, written when it starts to wait, so a list of every
decision people owe is one visibility query (no describe or query per run).

Pure: the workflow builds the memo (rein.workflows.waiting), clients read it back as InboxItem
(rein.durable.inbox). Kept small (the arguments and the model's words cut to a line): a memo travels with
every list response, encrypted by the codec like any payload.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from rein.core.ir import Message, ToolCall
from rein.core.result import Interrupt

WAITING_MEMO = "rein.waiting"
LINE = 160
"""A call's arguments and the model's last words are cut to this many characters."""
MAX_CALLS = 8
"""Pending calls listed in the memo (a larger batch says how many more)."""

Kind = Literal["approval", "question", "retry"]
KINDS: dict[str, Kind] = {"need_approval": "approval", "need_input": "question", "error": "retry"}
STATUS_OF_KIND = {"approval": "waiting_approval", "question": "waiting_input", "retry": "waiting_retry"}


def cut(text: str, limit: int = LINE) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def args_line(arguments: dict[str, Any], limit: int = LINE) -> str:
    return cut(", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items()), limit)


class PendingCall(BaseModel):
    id: str
    tool: str
    args: str = ""
    """The arguments, decoded and cut to a line."""


class WaitingMemo(BaseModel):
    """The memo a waiting run carries under WAITING_MEMO (removed when the wait ends)."""

    kind: Kind
    calls: list[PendingCall] = Field(default_factory=list)
    more: int = Field(default=0, exclude_if=lambda v: not v)
    said: str = ""
    """The model's last words before it waited, cut to a line."""
    question: str = Field(default="", exclude_if=lambda v: not v)
    """A question's text, or the error a retry waits after."""
    since: str
    until: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """When the wait times out (approval_timeout_s), ISO 8601; None: never."""
    thread: bool = Field(default=False, exclude_if=lambda v: not v)
    wait: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The wait's id (rein.core.waits): a decision from the inbox names it. None from builds before wait ids."""


def waiting_memo(interrupt: Interrupt, pending: list[ToolCall], messages: list[Message], input_tools: frozenset[str],
                 since: datetime, until: datetime | None, thread: bool) -> dict[str, Any]:
    """The memo of a wait; `pending`: the calls it is for (rein.core.machine.waiting_on: a batch partly decided
    lists only the calls still undecided, which a card shows and decides)."""
    kind = KINDS[interrupt.type]
    if kind == "approval":
        calls = [c for c in pending if c.name not in input_tools]
    elif kind == "question" and interrupt.tool_call is not None:
        calls = [interrupt.tool_call]
    else:
        calls = []
    said = next((m.content for m in reversed(messages) if m.role == "assistant" and m.content), "")
    memo = WaitingMemo(
        kind=kind, calls=[PendingCall(id=c.id, tool=c.name, args=args_line(c.arguments)) for c in calls[:MAX_CALLS]],
        more=max(len(calls) - MAX_CALLS, 0), said=cut(said or ""),
        question="" if kind == "approval" else cut(interrupt.message, 400),
        since=since.isoformat(), until=until.isoformat() if until is not None else None, thread=thread,
        wait=interrupt.wait,
    )
    return memo.model_dump(mode="json")


class InboxItem(BaseModel):
    """One decision a person owes: a waiting run (or thread) as the inbox lists it."""

    run_id: str
    kind: Kind
    agent: str = ""
    tenant: str | None = None
    thread: bool = False
    calls: list[PendingCall] = Field(default_factory=list)
    more: int = 0
    said: str = ""
    question: str = ""
    since: datetime | None = None
    until: datetime | None = None
    started: datetime | None = None
    wait: str | None = None
    """The wait's id (rein.core.waits), which a decision from the inbox names; None for a run of an earlier build."""

    @property
    def tools(self) -> list[str]:
        return [c.tool for c in self.calls]

    def call_line(self) -> str:
        """The first call (and how many more), or the question, as one line."""
        if self.kind == "approval" and self.calls:
            first = self.calls[0]
            extra = len(self.calls) - 1 + self.more
            return f"{first.tool}({first.args})" + (f" +{extra} more" if extra else "")
        return self.question

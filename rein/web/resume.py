"""A page's answers to what a wait showed it (AG-UI resume entries, AI SDK approvals), as the thread's validated
decisions bound to that wait: each answer names the wait and the call it was shown (rein.core.waits.shown_id), and
one for a wait that is over is refused in one line naming what the thread waits on now, with nothing decided.

A decision update decides one wait, and one that leaves calls undecided starts the next wait (a new id) for the
rest. So a page that approves some calls of a wait and denies others is answered with the denials first, bound to
the wait shown, then the approvals, bound to the wait that follows only while the thread is still at the same model
answer (its turn and iteration) with those very calls undecided: nothing but the calls shown is ever approved.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rein.core.contract import RunStatusView
from rein.core.errors import DecisionRejected
from rein.core.ir import ToolCall
from rein.core.waits import call_text, parse_shown_id, shown_id, waiting_line
from rein.durable.delivery import DecisionQueued

if TYPE_CHECKING:
    from rein.client import ReinClient

Kind = Literal["approve", "deny", "answer", "retry"]
FITS: dict[Kind, str] = {"approve": "waiting_approval", "deny": "waiting_approval", "answer": "waiting_input",
                         "retry": "waiting_retry"}
NEXT_WAIT_S = 30.0
"""How long the approvals that follow a page's denials wait for the thread to pause again on the calls left."""


@dataclass
class Answer:
    """One answer a page gave: `key` the id it was shown (an interrupt id, an approval id), `wait` and `call` what
    that id names (wait None: a run of a build before wait ids; call None: the wait itself, a retry or a question
    asked without a tool call), `text` a denial's reason or an answer's text."""

    key: str
    wait: str | None
    call: str | None
    kind: Kind
    text: str = ""


def now_waits_on(status: RunStatusView) -> str:
    calls = [c for c in status.pending_tool_calls if not status.waiting_on or c.id in status.waiting_on]
    return waiting_line(status.interrupt, calls, status.status)


def check(status: RunStatusView, thread_id: str, answers: Sequence[Answer]) -> None:
    """Every answer fits the wait the thread is in: else DecisionRejected (one line), nothing decided."""
    for answer in answers:
        if answer.wait != status.wait:
            shown = f"wait {answer.wait}" if answer.wait else "a wait of an earlier build (no wait id)"
            raise DecisionRejected(f"stale: {answer.key} answers {shown}, which is over; thread {thread_id} now waits "
                                   f"on {now_waits_on(status)}; nothing was decided")
        waiting = set(status.waiting_on) or {c.id for c in status.pending_tool_calls}
        if status.status != FITS[answer.kind] or (answer.call is not None and answer.call not in waiting):
            raise DecisionRejected(f"{answer.key} is not pending in thread {thread_id} (unknown, or answered already); "
                                   f"it waits on {now_waits_on(status)}; nothing was decided")
    answered = [a.call for a in answers if a.kind == "answer" and a.call is not None]
    if answered and set(answered) != set(status.waiting_on[: len(answered)]):  # a run takes answers in call order
        raise DecisionRejected(f"answer the questions of thread {thread_id} in their order, from the first "
                               f"({', '.join(status.waiting_on[: len(answered)])}); nothing was decided")


def results_fit(status: RunStatusView, thread_id: str, shown: Mapping[str, ToolCall]) -> None:
    """The calls a page shows with its results (from the messages it sent) are the calls the thread waits on, name
    and arguments included: else DecisionRejected, nothing taken. Call ids repeat across turns, so a result the
    page computed for an earlier `call_0` never answers a later one. A result sent without the message that showed
    its call (another client, no history) is checked by its id alone, and every result goes bound to the wait read
    here, so the thread refuses it if it moved on meanwhile."""
    pending = {c.id: c for c in status.pending_tool_calls}
    for call_id, call in shown.items():
        if (now := pending.get(call_id)) is not None and (now.name, now.arguments) != (call.name, call.arguments):
            raise DecisionRejected(f"stale: the result of {call_text(call)} answers a call that is over; thread "
                                   f"{thread_id} now waits on {now_waits_on(status)}; nothing was taken")


def steps(answers: Sequence[Answer], order: Sequence[str] = ()) -> list[tuple[Kind, str, list[Answer]]]:
    """The updates to send, in order: denials (one per reason), approvals, answers (in the order of the calls they
    answer, `order`: the run takes an answer for its first open question), a retry."""
    denials: dict[str, list[Answer]] = {}
    for a in answers:
        if a.kind == "deny":
            denials.setdefault(a.text, []).append(a)
    out: list[tuple[Kind, str, list[Answer]]] = [("deny", reason, group) for reason, group in denials.items()]
    approvals = [a for a in answers if a.kind == "approve"]
    if approvals:
        out.append(("approve", "", approvals))
    place = {call: n for n, call in enumerate(order)}
    questions = sorted((a for a in answers if a.kind == "answer"), key=lambda a: place.get(a.call or "", -1))
    out += [("answer", a.text, [a]) for a in questions]
    if any(a.kind == "retry" for a in answers):
        out.append(("retry", "", [next(a for a in answers if a.kind == "retry")]))
    return out


def call_of(answered: str) -> str:
    """The call id of what `decide` returns (a shown id) or of a bare call id."""
    parsed = parse_shown_id(answered)
    return parsed[1] if parsed is not None else answered


async def decide(runs: ReinClient, thread_id: str, answers: Sequence[Answer], *, who: str | None,
                 update_prefix: str, status: RunStatusView | None = None) -> frozenset[str]:
    """Send the answers as decisions bound to the wait they name (module doc). Returns the calls they answered as
    shown ids (`rein.<wait>.<call>`, the waits that followed included), so a stream knows its own input's effect.
    DecisionRejected when the thread waits on something else; DecisionQueued is left for a worker to apply.
    `status`: the thread's status as the caller just read it."""
    first = status if status is not None else await runs.status(thread_id)
    check(first, thread_id, answers)
    answered: set[str] = set()
    now, todo = first, steps(answers, first.waiting_on)
    for n, (kind, text, group) in enumerate(todo):
        calls = [a.call for a in group if a.call is not None]
        if n:
            now = await _next_wait(runs, thread_id, first, now, kind, calls)
        wait = now.wait
        key = hashlib.sha256(f"{wait}|{kind}|{text}|{'|'.join(calls)}".encode()).hexdigest()[:24]
        try:
            await _send(runs, thread_id, kind, wait, calls, text, who, f"{update_prefix}-{key}")
        except DecisionQueued:  # with the server: the thread applies it when a worker takes it
            if n + 1 < len(todo):
                raise DecisionRejected(f"the {kind} waits for a worker to take it; nothing after it was decided: "
                                       "answer the rest once the thread moves on") from None
        answered |= {shown_id(wait, c) for c in calls}
    return frozenset(answered)


async def _send(runs: ReinClient, thread_id: str, kind: Kind, wait: str | None, calls: list[str], text: str,
                who: str | None, update_id: str) -> None:
    if kind in ("approve", "deny"):
        decide_calls = runs.approve if kind == "approve" else runs.deny
        await decide_calls(thread_id, approver=who, reason=text, tool_call_ids=calls, wait=wait, update_id=update_id)
    elif kind == "answer":
        await runs.answer(thread_id, text, approver=who, wait=wait, update_id=update_id)
    else:
        await runs.retry(thread_id, wait=wait, update_id=update_id)


async def _next_wait(runs: ReinClient, thread_id: str, first: RunStatusView, last: RunStatusView, kind: Kind,
                     calls: list[str]) -> RunStatusView:
    """The wait that follows `last` once a decision left calls undecided: taken only at the same model answer as
    `first` (turn and iteration) with `calls` still undecided; else DecisionRejected, nothing more decided."""
    loop = asyncio.get_running_loop()
    deadline, delay, status = loop.time() + NEXT_WAIT_S, 0.02, last
    while status.pause <= last.pause or status.status == "running":
        if loop.time() > deadline:
            raise DecisionRejected(f"thread {thread_id} did not wait again within {NEXT_WAIT_S:g}s after the first "
                                   f"decisions; nothing more was decided (the {kind} is not sent)")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)
        status = await runs.status(thread_id)
    same = (status.turn, status.iteration) == (first.turn, first.iteration)
    if not same or status.status != FITS[kind] or not set(calls) <= set(status.waiting_on):
        raise DecisionRejected(f"thread {thread_id} moved on after the first decisions: it waits on "
                               f"{now_waits_on(status)}; nothing more was decided (the {kind} is not sent)")
    return status


__all__ = ["Answer", "call_of", "check", "decide", "results_fit"]

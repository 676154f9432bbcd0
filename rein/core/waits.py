"""Which wait a decision answers: every wait of a run for a person has an id, and a decision may name it.

Call ids alone do not say what a person saw: they repeat across turns (LiteLLM's `call_0`, `call_1`...). A wait id
is the run's pause number (it grows by one with every wait and is carried across continue-as-new) with the end of
the Temporal run id the wait began in (a rewound run pauses again with the numbers it had before): derived from
the run's history only, the same on every replay, different for every later wait of the same workflow id.
Pure: the workflow makes them (rein.workflows.waiting), clients and the CLI show them.
"""

from __future__ import annotations

from collections.abc import Sequence

from rein.core.inbox import args_line
from rein.core.ir import ToolCall
from rein.core.result import Interrupt

WHAT = {"need_approval": "approval of", "need_input": "an answer to", "error": "a retry"}


def wait_id(run_id: str, pause: int) -> str:
    """The id of the wait that began at pause `pause` in Temporal run `run_id`, e.g. `3-9f2c1ab4`."""
    return f"{pause}-{run_id.replace('-', '')[-8:]}"


SHOWN_PREFIX = "rein"
NO_WAIT = "-"
"""The wait part of a shown id for a run of a build before wait ids (what it decides is read when it is used)."""


def shown_id(wait: str | None, what: str) -> str:
    """The id a web surface gives something of a wait it shows (an AG-UI interrupt, an AI SDK approval):
    `rein.<wait>.<what>`, `what` a call id (or `retry`, `input` for a wait without calls). An answer that names it
    answers that wait only: a later wait of the run, even for a call with the same id, refuses it."""
    return f"{SHOWN_PREFIX}.{wait or NO_WAIT}.{what}"


def parse_shown_id(text: str) -> tuple[str | None, str] | None:
    """(wait, what) of an id `shown_id` made (wait None: a run of an earlier build), or None for any other text."""
    prefix, _, rest = text.partition(".")
    wait, _, what = rest.partition(".")
    if prefix != SHOWN_PREFIX or not wait or not what:
        return None
    return (None if wait == NO_WAIT else wait), what


def call_text(call: ToolCall) -> str:
    """A call as a person reads it: `tool(args) [call id]`, its arguments cut to a line."""
    return f"{call.name}({args_line(call.arguments, 120)}) [{call.id}]"


def calls_text(calls: Sequence[ToolCall]) -> str:
    return ", ".join(call_text(c) for c in calls)


def waiting_line(interrupt: Interrupt | None, calls: Sequence[ToolCall], status: str = "running") -> str:
    """What a run waits on now, in a few words: `wait 4-9f2c1ab4 for approval of wipe(target="prod") [call_0]`;
    `nothing (it is running)` when it waits for nobody."""
    if interrupt is None:
        return f"nothing (it is {status})"
    head = f"wait {interrupt.wait}" if interrupt.wait else "a wait"
    if interrupt.type == "error":
        return f"{head} for a retry after an error"
    return f"{head} for {WHAT[interrupt.type]} {calls_text(calls) or 'no call'}"

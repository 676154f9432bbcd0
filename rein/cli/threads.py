"""`rein send` and `rein threads`: talk to a conversation thread from the command line (rein.core.threads).

`rein watch THREAD` (rein.cli.runs) follows a thread across its turns.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from rein.cli import interrupt
from rein.cli.app import (
    EXIT_NO_WORKER,
    EXIT_REJECTED,
    EXIT_USAGE,
    Address,
    CliError,
    JsonFlag,
    Namespace,
    app,
    err_console,
    escape,
    out_console,
    print_json,
    with_client,
)

SILENCE_S = 2.0
"""How long `rein send` waits for a worker to take the message before it says that none has yet."""

if TYPE_CHECKING:
    from rein.client import ReinClient
    from rein.core.result import RunResult
    from rein.core.threads import SendReceipt


@app.command()
def send(
    thread_id: Annotated[str, typer.Argument(help="The thread id (its Temporal workflow id); a new id starts a thread.",
                                             show_default=False)],
    text: Annotated[str, typer.Argument(help="The message.", show_default=False)],
    agent: Annotated[str, typer.Option("--agent", "-a", help="The agent's registered name: it starts a new thread; a "
                                       "running thread must be this agent's (else nothing is sent).", show_default=False)],
    mode: Annotated[str, typer.Option("--mode", help="While a turn runs: queue (the next turn), steer (joins before the "
                                      "next model call), interrupt (cuts the model call), reject (refused while busy).")] = "queue",
    message_id: Annotated[str | None, typer.Option("--id", help="Your id for this message: sent twice, it is taken once "
                                                   "(the second answer says it was a repeat).")] = None,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Print where the message went and exit; do not wait "
                                          "for the turn's answer.")] = False,
    task_queue: Annotated[str | None, typer.Option("--queue", "--task-queue", help="Start a new thread on this queue "
                                                   "(default: the agent's own queue, as `rein start`).")] = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Send a message to a thread (starting it), then print the answer of the turn that takes it.

    Exit 2 when the thread is another agent's (nothing sent), 5 when the thread refuses it (reject while busy,
    too many waiting, an ended thread), 8 when no worker serves the agent of a new thread, 7 when the turn
    waits for a person (approve it as any run: `rein approve THREAD`). A running thread no worker takes now
    keeps the message until one does (said in 2 s). Ctrl-C: one line saying where the message is.
    """
    from rein import settings
    from rein.durable.threads import ThreadRefused
    from rein.ops.worker_lookup import AgentNotServed, queue_for

    _check_message(text, mode, message_id)
    interrupt.fate("the message was not sent")

    async def go(client: ReinClient) -> tuple[SendReceipt, RunResult | None]:
        owner = await _running_agent(client, thread_id)
        if owner is None:  # a new thread: is anyone there to start it?
            try:
                client.task_queue = await queue_for(client, agent, task_queue or settings.current().task_queue)
            except AgentNotServed as err:
                raise CliError(str(err), EXIT_NO_WORKER) from None
        elif owner and owner != agent:
            raise CliError(f"thread {thread_id} is agent {owner!r}'s, not {agent!r}: nothing was sent (send it with "
                           f"--agent {owner}, or start another thread id)", EXIT_USAGE)
        interrupt.fate(_maybe_sent(thread_id, message_id))
        sending = asyncio.ensure_future(client.send(thread_id, text, agent=agent, mode=mode, message_id=message_id))  # type: ignore[arg-type]
        if not (await asyncio.wait({sending}, timeout=SILENCE_S))[0]:
            err_console().print(f"[yellow]no worker has taken thread {escape(thread_id)} yet: the message waits on the "
                                "server until one does (Ctrl-C stops waiting; the message stays there)[/]")
            interrupt.fate(f"the message waits on the server for a worker to take thread {thread_id}")
        try:
            receipt = await sending
        except ThreadRefused as err:
            raise CliError(str(err), EXIT_REJECTED) from None
        interrupt.fate(f"{_where(receipt)}; the turn goes on (`rein watch {thread_id}` follows it)")
        if no_wait:
            return receipt, None
        err_console().print(f"[dim]{escape(_where(receipt))}[/]")
        return receipt, await client.reply(receipt)

    _print_answer(*with_client(address, namespace, go), as_json)


def _maybe_sent(thread_id: str, message_id: str | None) -> str:
    if message_id:
        return (f"the message may have reached thread {thread_id}; send it again with the same --id {message_id} "
                "(it is taken once)")
    return f"the message may have reached thread {thread_id}; `rein watch {thread_id}` shows its turns"


async def _running_agent(client: ReinClient, thread_id: str) -> str | None:
    """The agent of the running thread `thread_id` ("" when its run does not say), None when none runs."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    from rein.core.contract import SEARCH_KEYS

    try:
        described = await client.handle(thread_id).describe()
    except RPCError:
        return None
    if described.status != WorkflowExecutionStatus.RUNNING:
        return None
    return described.typed_search_attributes.get(SEARCH_KEYS["ReinAgent"]) or ""


def _check_message(text: str, mode: str, message_id: str | None) -> None:
    """A message the thread would refuse for its shape: one line and exit 1, nothing sent."""
    from pydantic import ValidationError

    from rein.core.threads import MODES, SendRequest

    if mode not in MODES:
        raise CliError(f"unknown --mode {mode!r}; choose one of {', '.join(MODES)}", EXIT_USAGE)
    try:
        SendRequest(text=text, mode=mode, message_id=message_id)  # type: ignore[arg-type]  # checked above
    except ValidationError as err:
        from rein.core.errors import validation_text

        raise CliError(f"invalid message: {validation_text(err, 'message')}", EXIT_USAGE) from None


def _print_answer(receipt: SendReceipt, answer: RunResult | None, as_json: bool) -> None:
    if as_json:
        print_json({"receipt": receipt.model_dump(mode="json"),
                    "result": answer.model_dump(mode="json", exclude={"session"}) if answer else None})
    elif answer is None:
        print(_where(receipt))
    elif answer.output:
        out_console().print(escape(answer.output))
    if answer is not None and answer.interrupt is not None:
        from rein.cli.app import EXIT_NEEDS_PERSON

        thread_id = receipt.thread_id
        raise CliError(f"turn {receipt.turn} of {thread_id} waits for a person ({answer.interrupt.type}): "
                       f"{_waits_for(answer)}; answer it with `rein approve {thread_id}` (or deny/answer)",
                       EXIT_NEEDS_PERSON)


def _waits_for(answer: RunResult) -> str:
    """What the turn waits for: the calls to approve (this turn's own, with their arguments), else the interrupt's
    message."""
    from rein.core.inbox import args_line
    from rein.core.machine import decisions_for_pending

    assert answer.interrupt is not None
    if answer.interrupt.type == "need_approval":
        decided = decisions_for_pending(answer.session)
        calls = [f"{c.name}({args_line(c.arguments, 80)})" for c in answer.session.pending_tool_calls if c.id not in decided]
        if calls:
            return ", ".join(calls)
    return answer.interrupt.message.rstrip(".")


INTERRUPTED_WAIT = {"need_approval": "the calls it waited for are denied", "need_input": "the message is the answer",
                    "error": "the model call is tried again with the message"}
"""What an `interrupt` message does to a turn that waits for a person (rein.core.threads), by what it waits for."""


def _joined_a_wait(receipt: SendReceipt) -> str:
    """What joining a turn that waits for a person means: a steer waits for the decision, an interrupt makes it."""
    if not receipt.waits:
        return ""
    if receipt.mode == "interrupt":
        return f"; the turn waited for a person ({receipt.waits}): {INTERRUPTED_WAIT.get(receipt.waits, 'it goes on')}"
    return f"; the turn waits for a person ({receipt.waits}): the message is read once that is decided"


def _where(receipt: SendReceipt) -> str:
    said = "a repeat (the same --id, taken once): " if receipt.duplicate else ""
    if receipt.joined:
        return (f"{said}{receipt.message_id} joins turn {receipt.turn} of {receipt.thread_id} ({receipt.mode})"
                f"{_joined_a_wait(receipt)}")
    later = f", after {receipt.ahead} turn{'s' if receipt.ahead != 1 else ''}" if receipt.ahead else ""
    return f"{said}{receipt.message_id} is turn {receipt.turn} of {receipt.thread_id}{later}"


@app.command()
def threads(
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many threads, newest first.")] = 50,
    running: Annotated[bool, typer.Option("--running", help="Only threads that take messages (not ended).")] = False,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """List conversation threads: id, agent, status (idle between turns) and age (since its first message)."""
    from rein.durable.threads import ThreadRow

    async def go(client: ReinClient) -> list[ThreadRow]:
        return [row async for row in client.threads(limit=limit, running_only=running)]

    rows = with_client(address, namespace, go)
    if as_json:
        now = datetime.now(UTC)
        print_json([{"thread_id": r.thread_id, "agent": r.agent, "status": r.status,
                     "started": r.started.isoformat() if r.started else None,
                     "age_s": int((now - r.started).total_seconds()) if r.started else None,
                     "last_activity": r.last_activity.isoformat() if r.last_activity else None} for r in rows])
        return
    if not rows:
        err_console().print("no threads (start one with `rein send THREAD TEXT --agent NAME`)")
        return
    from rich.table import Table

    from rein.cli.app import STATUS_STYLE

    table = Table(box=None, pad_edge=False)
    for column in ("thread", "agent", "status", "age"):
        table.add_column(column)
    now = datetime.now(UTC)
    for row in rows:
        style = STATUS_STYLE.get(row.status, "")
        table.add_row(escape(row.thread_id), escape(row.agent), f"[{style}]{row.status}[/]" if style else row.status,
                      _age(now, row.started))
    out_console().print(table)


def _age(now: datetime, then: datetime | None) -> str:
    if then is None:
        return ""
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"

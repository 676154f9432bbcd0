"""`rein approve/deny/answer/retry/cancel`: a person's decisions, sent through the run's validated updates."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rein.cli.app import (
    EXIT_INTERRUPTED,
    EXIT_NO_WORKER,
    EXIT_REJECTED,
    Address,
    CliError,
    Namespace,
    RunId,
    app,
    err_console,
    escape,
    out_console,
    with_client,
)

if TYPE_CHECKING:
    from rein.client import ReinClient


Approver = Annotated[str | None, typer.Option(
    help="Who decides, recorded in Session.decisions (default: this client's Temporal identity). "
         "Asserted by the caller: access control is Temporal's.")]


WaitFlag = Annotated[bool, typer.Option(
    "--wait", help="No worker serves the run: wait (with a spinner) until one does, then send. "
                   f"Without it the decision is not sent and the exit code is {EXIT_NO_WORKER}.")]


def _decide(address: str | None, namespace: str | None, run_id: str, what: str,
            action: Callable[[ReinClient], Awaitable[Any]], wait: bool = False) -> Any:
    """Send a decision through the run's validated update; say truthfully what became of it.

    Applied: the command's line. Rejected: one line, exit 5. No worker: nothing is sent (a sent
    update would wait on the server and could be applied later), one line, exit 8; with --wait,
    a spinner until a worker serves the run. Ctrl-C: exit 130, saying whether it was sent.
    """
    from rein.client import DecisionRejected, NoWorker
    from rein.runs import describe_run

    sent = False

    async def go(client: ReinClient) -> Any:
        nonlocal sent
        if wait and not await client.worker_serves(run_id):
            with err_console().status(f"waiting for a worker to serve run {escape(run_id)} (Ctrl-C: nothing is sent)"):
                while not await client.worker_serves(run_id):
                    await asyncio.sleep(WORKER_POLL_S)
        try:
            sent = True
            return await action(client)
        except NoWorker:
            sent = False
            await describe_run(client, run_id)  # an unknown id is "not found"
            raise
        except DecisionRejected:
            await describe_run(client, run_id)  # an unknown id is "not found", not a rejection
            raise

    try:
        return with_client(address, namespace, go)
    except DecisionRejected as exc:
        raise CliError(str(exc), EXIT_REJECTED) from exc
    except NoWorker as exc:
        raise CliError(f"{exc}; or pass --wait", EXIT_NO_WORKER) from exc
    except KeyboardInterrupt:
        told = (f"interrupted after the {what} was sent: the run applies it when its worker takes it"
                if sent else f"interrupted: the {what} was not sent")
        raise CliError(told, EXIT_INTERRUPTED) from None


WORKER_POLL_S = 1.0
"""How often `--wait` asks whether a worker serves the run."""


@app.command()
def approve(
    run_id: RunId,
    tool_call_id: Annotated[str | None, typer.Option(help="Only this tool call (default: every pending call).")] = None,
    approver: Approver = None,
    reason: Annotated[str, typer.Option(help="Why (recorded).")] = "",
    wait: WaitFlag = False,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Approve a run's pending tool calls."""
    ids = _decide(address, namespace, run_id, "approval", lambda c: c.approve(run_id, tool_call_id, approver, reason), wait)
    out_console().print(f"approved {', '.join(ids or []) or 'nothing'} in run {escape(run_id)}")


@app.command()
def deny(
    run_id: RunId,
    tool_call_id: Annotated[str | None, typer.Option(help="Only this tool call (default: every pending call).")] = None,
    approver: Approver = None,
    reason: Annotated[str, typer.Option(help="Why (the model sees it).")] = "",
    wait: WaitFlag = False,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Deny a run's pending tool calls; the model is told they were denied, and why."""
    ids = _decide(address, namespace, run_id, "denial", lambda c: c.deny(run_id, tool_call_id, approver, reason), wait)
    out_console().print(f"denied {', '.join(ids or []) or 'nothing'} in run {escape(run_id)}")


@app.command()
def answer(
    run_id: RunId,
    text: Annotated[str, typer.Argument(help="The answer the run waits for.", show_default=False)],
    approver: Approver = None,
    wait: WaitFlag = False,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Answer a run waiting for input (an `ask_human` question)."""
    _decide(address, namespace, run_id, "answer", lambda c: c.answer(run_id, text, approver), wait)
    out_console().print(f"answered run {escape(run_id)}")


@app.command()
def retry(run_id: RunId, wait: WaitFlag = False, address: Address = None, namespace: Namespace = None) -> None:
    """Retry a run waiting after an error (its model attempts were exhausted)."""
    _decide(address, namespace, run_id, "retry", lambda c: c.retry(run_id), wait)
    out_console().print(f"retrying run {escape(run_id)}")


@app.command()
def cancel(
    run_id: RunId,
    reason: Annotated[str, typer.Option(help="Why (recorded).")] = "",
    wait: WaitFlag = False,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Cancel a run: it ends with stop reason `cancelled`."""
    _decide(address, namespace, run_id, "cancellation", lambda c: c.cancel(run_id, reason), wait)
    out_console().print(f"cancelled run {escape(run_id)}")


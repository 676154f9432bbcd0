"""`rein approve/deny/answer/retry/cancel`: a person's decisions, sent through the run's validated updates."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from rein.cli.app import (
    EXIT_REJECTED,
    Address,
    CliError,
    Namespace,
    RunId,
    app,
    err_console,
    out_console,
    with_client,
)

if TYPE_CHECKING:
    from rein.client import ReinClient


Approver = Annotated[str | None, typer.Option(
    help="Who decides, recorded in Session.decisions (default: this client's Temporal identity). "
         "Asserted by the caller: access control is Temporal's.")]


def _decide(address: str | None, namespace: str | None, run_id: str, what: str,
            action: Callable[[ReinClient], Awaitable[Any]]) -> Any:
    """Send a decision through the run's validated update; a rejection is one line and exit 5."""
    from rein.client import DecisionRejected
    from rein.runs import describe_run

    async def go(client: ReinClient) -> Any:
        task = asyncio.ensure_future(action(client))
        done, _ = await asyncio.wait({task}, timeout=NO_WORKER_HINT_AFTER_S)
        if not done:
            await _warn_without_worker(client, run_id, what)
        try:
            return await task
        except DecisionRejected:
            await describe_run(client, run_id)  # an unknown id is "not found", not a rejection
            raise

    try:
        return with_client(address, namespace, go)
    except DecisionRejected as exc:
        raise CliError(str(exc), EXIT_REJECTED) from exc


NO_WORKER_HINT_AFTER_S = 3.0
"""A decision is an Update a worker must process; after this long, check whether any worker polls."""


async def _warn_without_worker(client: ReinClient, run_id: str, what: str) -> None:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    try:
        queue = (await client.handle(run_id).describe()).task_queue
        described = await client.client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=client.client.namespace, task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ))
    except Exception:
        return
    if not described.pollers:
        err_console().print(f"[yellow]no worker polls task queue {escape(queue)!r}: the {what} waits until one starts "
                     "(`rein worker --agent MODULE:ATTR`); Ctrl-C to stop waiting[/]")


@app.command()
def approve(
    run_id: RunId,
    tool_call_id: Annotated[str | None, typer.Option(help="Only this tool call (default: every pending call).")] = None,
    approver: Approver = None,
    reason: Annotated[str, typer.Option(help="Why (recorded).")] = "",
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Approve a run's pending tool calls."""
    ids = _decide(address, namespace, run_id, "approval", lambda c: c.approve(run_id, tool_call_id, approver, reason))
    out_console().print(f"approved {', '.join(ids or []) or 'nothing'} in run {escape(run_id)}")


@app.command()
def deny(
    run_id: RunId,
    tool_call_id: Annotated[str | None, typer.Option(help="Only this tool call (default: every pending call).")] = None,
    approver: Approver = None,
    reason: Annotated[str, typer.Option(help="Why (the model sees it).")] = "",
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Deny a run's pending tool calls; the model is told they were denied, and why."""
    ids = _decide(address, namespace, run_id, "denial", lambda c: c.deny(run_id, tool_call_id, approver, reason))
    out_console().print(f"denied {', '.join(ids or []) or 'nothing'} in run {escape(run_id)}")


@app.command()
def answer(
    run_id: RunId,
    text: Annotated[str, typer.Argument(help="The answer the run waits for.", show_default=False)],
    approver: Approver = None,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Answer a run waiting for input (an `ask_human` question)."""
    _decide(address, namespace, run_id, "answer", lambda c: c.answer(run_id, text, approver))
    out_console().print(f"answered run {escape(run_id)}")


@app.command()
def retry(run_id: RunId, address: Address = None, namespace: Namespace = None) -> None:
    """Retry a run waiting after an error (its model attempts were exhausted)."""
    _decide(address, namespace, run_id, "retry", lambda c: c.retry(run_id))
    out_console().print(f"retrying run {escape(run_id)}")


@app.command()
def cancel(
    run_id: RunId,
    reason: Annotated[str, typer.Option(help="Why (recorded).")] = "",
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Cancel a run: it ends with stop reason `cancelled`."""
    _decide(address, namespace, run_id, "cancellation", lambda c: c.cancel(run_id, reason))
    out_console().print(f"cancelled run {escape(run_id)}")


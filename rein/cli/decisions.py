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
    help="Who decides, recorded in Session.decisions (default: REIN_IDENTITY, else USER@HOST: the same for every "
         "command). Asserted by the caller: access control is Temporal's.")]


WaitFlag = Annotated[bool, typer.Option(
    "--wait", help="No worker serves or takes the run: wait (with a spinner) until one does. "
                   f"Without it: no worker polls, nothing is sent, exit {EXIT_NO_WORKER}; a worker is listed "
                   f"but none takes the decision, it stays queued on the server, exit 11.")]

EXIT_QUEUED = 11
"""The decision was sent, no worker has taken the run: queued on the server, not applied (docs/cli.md)."""


def _decide(address: str | None, namespace: str | None, run_id: str, what: str,
            action: Callable[[ReinClient, bool, str, Any], Awaitable[Any]], wait: bool = False,
            read: Callable[[ReinClient], Awaitable[Any]] | None = None) -> Any:
    """Send a decision through the run's validated update; say truthfully what became of it.

    Applied: the command's line. Rejected: one line, exit 5. No worker polls: nothing is sent (a sent
    update would wait on the server and could be applied later), one line, exit 8; with --wait, a
    spinner until a worker serves the run. A worker is listed (one stopped less than a minute ago
    still is) but none takes it within 2 s: a line says so at once; without --wait, exit 11 (sent,
    queued on the server, applied when a worker takes the run), with --wait a spinner until one does.
    Ctrl-C: exit 130, one line saying where the decision stands (asked of the server). `read`: what the
    decision needs to know of the run first (what it waits on), read before the 2 s start; `action` gets it.
    """
    from rein.cli import interrupt
    from rein.client import DecisionQueued, DecisionRejected, NoWorker

    decision = _Decision(run_id, what, action, wait, read)
    try:
        with interrupt.graceful():  # Ctrl-C cancels the decision's task, which asks the server where it stands
            return with_client(address, namespace, decision.go)
    except DecisionRejected as exc:
        raise CliError(str(exc), EXIT_REJECTED) from exc
    except NoWorker as exc:
        raise CliError(f"{exc}; or pass --wait", EXIT_NO_WORKER) from exc
    except DecisionQueued as exc:
        raise CliError(f"{exc} (--wait waits for it; `rein status {run_id}` shows when)", EXIT_QUEUED) from exc
    except KeyboardInterrupt:
        raise CliError(f"interrupted: the {what} was not sent" if not decision.sent else
                       f"interrupted: the {what} may have been sent; `rein status {run_id}` shows whether the run "
                       "took it", EXIT_INTERRUPTED) from None


class _Decision:
    """One decision on its way: whether its update may have left, and where it stands."""

    def __init__(self, run_id: str, what: str, action: Callable[[ReinClient, bool, str, Any], Awaitable[Any]],
                 wait: bool, read: Callable[[ReinClient], Awaitable[Any]] | None = None) -> None:
        import uuid

        self.run_id, self.what, self.action, self.wait, self.read = run_id, what, action, wait, read
        self.known: Any = None
        """What `read` learned of the run before the decision was sent."""
        self.update_id = f"{what}-{uuid.uuid4().hex[:12]}"
        self.sent = False
        """The update's request may have left: from here on, ask the server where it stands."""

    async def go(self, client: ReinClient) -> Any:
        from rein import settings

        run_id, what = escape(self.run_id), self.what
        try:
            if self.wait and not await client.worker_serves(self.run_id):
                err_console().print(f"run {run_id}: no worker polls its queue; waiting for one "
                                    f"(the {what} is not sent until then; nothing is sent if you stop)", soft_wrap=True)
                with err_console().status(f"waiting for a worker to serve run {run_id} (Ctrl-C: nothing is sent)"):
                    while not await client.worker_serves(self.run_id):
                        await asyncio.sleep(WORKER_POLL_S)
            if self.read is not None:
                self.known = await self.read(client)
            deciding = asyncio.ensure_future(self._sending(client))
            done, _ = await asyncio.wait({deciding}, timeout=settings.current().decision_grace_s)
            if done:
                return await deciding
            if await client.decision_stage(self.run_id, self.update_id) == "not sent":  # still looking for a poller
                err_console().print(f"run {run_id}: no worker polls its queue yet; nothing is sent", soft_wrap=True)
                return await deciding
            err_console().print(f"run {run_id}: no worker has taken it yet; the {what} is sent, not applied",
                                soft_wrap=True)
            if not self.wait:
                return await deciding
            with err_console().status(f"waiting for a worker to take the {what} (Ctrl-C leaves it queued on the server)"):
                return await deciding
        except asyncio.CancelledError:
            raise CliError(await self._where(client), EXIT_INTERRUPTED) from None
        except Exception as exc:
            if type(exc).__name__ == "WorkflowUpdateRPCTimeoutOrCancelledError" and _cancelling():
                raise CliError(await self._where(client), EXIT_INTERRUPTED) from None
            raise

    async def _sending(self, client: ReinClient) -> Any:
        from rein.client import DecisionRejected, NoWorker
        from rein.ops.runs import describe_run

        try:
            self.sent = True  # from here on: the server says whether it has it (decision_stage)
            return await self.action(client, self.wait, self.update_id, self.known)
        except NoWorker:
            self.sent = False
            await describe_run(client, self.run_id)  # an unknown id is "not found"
            raise
        except DecisionRejected:
            await describe_run(client, self.run_id)  # an unknown id is "not found", not a rejection
            raise

    async def _where(self, client: ReinClient) -> str:
        """One line: where the decision stands after Ctrl-C."""
        what, run_id = self.what, self.run_id
        if not self.sent:
            return f"interrupted: the {what} was not sent"
        try:
            stage = await asyncio.wait_for(client.decision_stage(run_id, self.update_id), 5)
        except Exception:
            return (f"interrupted: the {what} may have been sent; `rein status {run_id}` shows whether the run "
                    "took it")
        return {
            "not sent": f"interrupted: the {what} was not sent",
            "queued": f"interrupted: the {what} was sent and is queued on the server, not applied: the run applies "
                      "it when a worker takes it",
            "taken": f"interrupted: the run has taken the {what} and is applying it",
        }.get(stage, f"interrupted: the {what} was applied (or refused by the run): `rein status {run_id}`")


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


WORKER_POLL_S = 1.0
"""How often `--wait` asks whether a worker serves the run."""


Calls = Annotated[list[str] | None, typer.Option(
    "--call", "--tool-call-id", metavar="ID",
    help="Only this tool call (repeat for more; default: every call the run waits on as read now).")]
WaitId = Annotated[str | None, typer.Option(
    "--wait-id", metavar="WAIT", help="The wait you decide (`rein status` shows it): refused once the run waits on another.")]


def _said(verb: str, run_id: str, decided: Any) -> str:
    """What a decision decided, exactly: each call as `tool(args) [id]`, and the wait it answered."""
    lines = decided.lines() if hasattr(decided, "lines") else [f"[{i}]" for i in decided or []]
    wait = f" (wait {decided.wait})" if getattr(decided, "wait", None) else ""
    return f"{verb} {', '.join(lines) or 'nothing'} in run {run_id}{wait}"


@app.command()
def approve(
    run_id: RunId,
    calls: Calls = None,
    wait_id: WaitId = None,
    approver: Approver = None,
    reason: Annotated[str, typer.Option(help="Why (recorded).")] = "",
    wait: WaitFlag = False,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Approve a run's pending tool calls: those it waits on as read now (printed, and named in the decision, so a
    run that moved on meanwhile refuses it), or only --call ID."""
    decided = _decide(address, namespace, run_id, "approval", lambda c, w, u, view: c.decide_calls(
        run_id, True, approver=approver, reason=reason, tool_call_ids=calls, wait=wait_id, until_taken=w, update_id=u,
        view=view), wait, read=lambda c: c.status(run_id))
    out_console().print(escape(_said("approved", run_id, decided)), soft_wrap=True)


@app.command()
def deny(
    run_id: RunId,
    calls: Calls = None,
    wait_id: WaitId = None,
    approver: Approver = None,
    reason: Annotated[str, typer.Option(help="Why (the model sees it).")] = "",
    wait: WaitFlag = False,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Deny a run's pending tool calls (as `approve` picks them); the model is told they were denied, and why."""
    decided = _decide(address, namespace, run_id, "denial", lambda c, w, u, view: c.decide_calls(
        run_id, False, approver=approver, reason=reason, tool_call_ids=calls, wait=wait_id, until_taken=w, update_id=u,
        view=view), wait, read=lambda c: c.status(run_id))
    out_console().print(escape(_said("denied", run_id, decided)), soft_wrap=True)


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
    _decide(address, namespace, run_id, "answer",
            lambda c, w, u, view: c.answer(run_id, text, approver, wait=view.wait, until_taken=w, update_id=u), wait,
            read=lambda c: c.status(run_id))
    out_console().print(f"answered run {escape(run_id)}")


@app.command()
def retry(run_id: RunId, wait: WaitFlag = False, address: Address = None, namespace: Namespace = None) -> None:
    """Retry a run waiting after an error (its model attempts were exhausted)."""
    _decide(address, namespace, run_id, "retry", lambda c, w, u, view: c.retry(
        run_id, wait=view.wait, until_taken=w, update_id=u), wait, read=lambda c: c.status(run_id))
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
    _decide(address, namespace, run_id, "cancellation", lambda c, w, u, _: c.cancel(run_id, reason, wait=w, update_id=u), wait)
    out_console().print(f"cancelled run {escape(run_id)}")


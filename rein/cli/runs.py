"""`rein start`, `rein watch` and `rein result`: start a run on a worker, follow it, wait for its output."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rein.cli import interrupt
from rein.cli.app import (
    EXIT_CANCELLED,
    EXIT_NO_WORKER,
    EXIT_RUN_FAILED,
    Address,
    CliError,
    JsonFlag,
    Namespace,
    RunId,
    app,
    err_console,
    escape,
    out_console,
    print_json,
    with_client,
)
from rein.cli.render import StreamPrinter, answer_hints, print_step, render_detail

if TYPE_CHECKING:
    from rich.console import Console

    from rein.client import ReinClient
    from rein.ops.runs import RunDetail


@app.command()
def start(
    agent: Annotated[str, typer.Argument(help="The agent's registered name (a worker must serve it).", show_default=False)],
    prompt: Annotated[str, typer.Argument(help="What to ask.", show_default=False)],
    run_id: Annotated[str | None, typer.Option("--id", help="The run id (default: AGENT-<random>).")] = None,
    task_queue: Annotated[str | None, typer.Option(
        "--queue", "--task-queue", help="Send the run to this task queue (default: the agent's own queue `rein.AGENT`, "
        "which `rein worker` and scripts serve, else REIN_TASK_QUEUE or `rein`).")] = None,
    no_check: Annotated[bool, typer.Option("--no-check", help="Start even when no worker serves the agent now "
                                           "(the run waits for one).")] = False,
    model: Annotated[str | None, typer.Option("--model", help="This run's model, a LiteLLM id (the agent must allow it: client_overrides).")] = None,  # noqa: E501  (one string, read whole)
    tenant: Annotated[str | None, typer.Option("--tenant", help="Whose run: its fair share of busy queues (docs/fleet.md).")] = None,
    priority: Annotated[int | None, typer.Option("--priority", help="1 (first) to 5 (last); default 3.")] = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Start a run of AGENT and print its id (it runs on a worker: `rein worker --agent ...`).

    Refuses (exit 8, nothing started) when no worker that knows AGENT polls the queue, unless --no-check.
    """
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from rein import settings
    from rein.core.contract import agent_task_queue
    from rein.durable.fleet import run_priority
    from rein.ops.worker_lookup import AgentNotServed, queue_for

    try:  # a bad --tenant/--priority is the user's mistake whether or not a worker serves the agent
        run_priority(tenant, priority)
    except ValueError as err:
        raise CliError(str(err)) from None

    async def go(client: ReinClient) -> str:
        if no_check:
            client.task_queue = task_queue or settings.current().task_queue or agent_task_queue(agent)
        else:
            try:
                client.task_queue = await queue_for(client, agent, task_queue)
            except AgentNotServed as err:
                raise CliError(f"{err}, or pass --no-check to start the run anyway", EXIT_NO_WORKER) from None
        interrupt.fate(f"the run may have started; `rein list --agent {shlex.quote(agent)}` shows it")
        try:
            handle = await client.start(agent, prompt, run_id=run_id, model=model, tenant=tenant, priority=priority)
        except WorkflowAlreadyStartedError:
            raise CliError(f"a run with id {run_id!r} already exists; pick another --id") from None
        return handle.id

    started = with_client(address, namespace, go)
    if as_json:
        print_json({"run_id": started})
        return
    print(started)
    quoted = shlex.quote(started)
    err_console().print(f"[dim]started; follow it with `rein watch {quoted}`, see it with `rein show {quoted}`[/]")



@app.command()
def result(
    run_id: RunId,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Wait for a run to finish and print its output (failed: its cause, exit 6; cancelled: the reason, exit 10).
    A thread: the answer of its turn under way, else of its last turn."""
    from rein.ops.runs import RunNotFound, cancel_reason, describe_run, is_not_found

    quoted = shlex.quote(run_id)
    interrupt.fate(f"stopped waiting; run {run_id} goes on (`rein result {quoted}` waits again)")

    async def go(client: ReinClient) -> Any:
        detail = await describe_run(client, run_id)
        if detail.closed is None and await _is_thread(client, run_id):
            return await client.turn_result(run_id)  # a thread never finishes between turns: its turn's answer
        if detail.interrupt is not None:
            hints = " or ".join(f"`{h}`" for h in answer_hints(run_id, detail)[:2])
            err_console().print(f"[yellow]run {escape(run_id)} is {detail.status}[/]; waiting until it finishes "
                         f"(answer it with {escape(hints)})")
        try:
            return await client.result(run_id)
        except Exception as err:
            if is_not_found(err):
                raise RunNotFound(run_id) from None
            raise

    async def cancelled(client: ReinClient) -> str:
        return await cancel_reason(client, run_id)

    try:
        outcome = with_client(address, namespace, go)
    except Exception as exc:
        from temporalio.client import WorkflowFailureError

        from rein.ops.runs import failure_message, was_cancelled

        if was_cancelled(exc):
            reason = with_client(address, namespace, cancelled)
            raise CliError(f"run {run_id} was cancelled: {reason}", EXIT_CANCELLED) from exc
        if isinstance(exc, WorkflowFailureError):
            raise CliError(f"run {run_id} failed: {failure_message(exc)}", EXIT_RUN_FAILED) from exc
        raise
    if as_json:
        print_json(outcome.model_dump(mode="json", exclude={"session"}))
    elif outcome.output:
        out_console().print(escape(outcome.output))
    if outcome.stop_reason == "cancelled":
        reason = with_client(address, namespace, cancelled)
        raise CliError(f"run {run_id} was cancelled: {reason}", EXIT_CANCELLED)
    if not as_json and outcome.stop_reason not in ("done", "stop"):
        err_console().print(f"[dim]stop reason: {outcome.stop_reason}[/]")



@app.command()
def watch(run_id: RunId, address: Address = None, namespace: Namespace = None) -> None:
    """Follow a run's stream live (text, tool calls, steps) until it pauses for a person or ends; a thread,
    across its turns until it ends (Ctrl-C stops watching, not the thread).

    What the run does goes to stdout (text, tool calls, steps, where it stands); errors to stderr.
    """
    from rein.ops.runs import RunNotFound, describe_run, is_not_found

    out = out_console()
    err = out  # steps and tool calls are the run's story, not diagnostics: stdout as well
    show = StreamPrinter(out, err)
    interrupt.fate(f"stopped watching; run {run_id} goes on (`rein watch {shlex.quote(run_id)}` follows it again)")

    async def go(client: ReinClient) -> RunDetail:
        detail = await describe_run(client, run_id)
        thread = detail.closed is None and await _is_thread(client, run_id)
        if thread:
            async for chunk in client.stream(run_id):
                show(chunk)
            return await describe_run(client, run_id)
        if detail.closed is not None or detail.interrupt is not None:
            await _follow_steps(client, run_id, err)  # already paused or ended: its steps so far
        else:
            seen_pauses = 0
            try:
                async for chunk in client.stream(run_id):  # from the start: the steps so far, then live
                    show(chunk)
                    if chunk.type == "interrupt":
                        seen_pauses += 1
                    if chunk.type == "done" or (chunk.type == "interrupt" and seen_pauses > detail.pause):
                        break
            except Exception as exc:
                if is_not_found(exc):
                    raise RunNotFound(run_id) from None
                raise
            detail = await describe_run(client, run_id)
        return detail

    detail = with_client(address, namespace, go)
    show.end_line()
    out.print()
    render_detail(err, detail, steps=False)
    if detail.status == "failed":
        raise CliError(f"run {run_id} failed: {detail.error}", EXIT_RUN_FAILED)
    if detail.status == "cancelled":
        from rein.ops.runs import cancel_reason

        reason = with_client(address, namespace, lambda client: cancel_reason(client, run_id))
        raise CliError(f"run {run_id} was cancelled: {reason}", EXIT_CANCELLED)


async def _is_thread(client: ReinClient, run_id: str) -> bool:
    from rein.core.threads import THREAD_MEMO

    try:
        return bool((await (await client.handle(run_id).describe()).memo()).get(THREAD_MEMO))
    except Exception:
        return False  # describe_run has already said whether the run exists


async def _follow_steps(client: ReinClient, run_id: str, err: Console) -> None:
    """A paused or finished run: print its steps so far."""
    from rein.ops.runs import describe_run

    for step in (await describe_run(client, run_id, steps=True)).steps or []:
        print_step(err, step)


"""`rein start`, `rein watch` and `rein result`: start a run on a worker, follow it, wait for its output."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from rein.cli.app import (
    EXIT_RUN_FAILED,
    Address,
    CliError,
    JsonFlag,
    Namespace,
    RunId,
    app,
    err_console,
    out_console,
    print_json,
    with_client,
)
from rein.cli.render import answer_hints, print_step, render_chunk, render_detail

if TYPE_CHECKING:
    from rein.client import ReinClient
    from rein.runs import RunDetail


@app.command()
def start(
    agent: Annotated[str, typer.Argument(help="The agent's registered name (a worker must serve it).", show_default=False)],
    prompt: Annotated[str, typer.Argument(help="What to ask.", show_default=False)],
    run_id: Annotated[str | None, typer.Option("--id", help="The run id (default: AGENT-<random>).")] = None,
    task_queue: Annotated[str | None, typer.Option(help="Task queue the agent's worker polls (default: REIN_TASK_QUEUE or `rein`).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="This run's model, a LiteLLM id (the agent must allow it: client_overrides).")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Whose run: its fair share of busy queues (docs/fleet.md).")] = None,
    priority: Annotated[int | None, typer.Option("--priority", help="1 (first) to 5 (last); default 3.")] = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Start a run of AGENT and print its id (it runs on a worker: `rein worker --agent ...`)."""
    from temporalio.exceptions import WorkflowAlreadyStartedError

    async def go(client: ReinClient) -> str:
        if task_queue:
            client.task_queue = task_queue
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
    """Wait for a run to finish and print its output (a failed run: its cause, exit code 6)."""
    from rein.runs import RunNotFound, describe_run, is_not_found

    async def go(client: ReinClient) -> Any:
        detail = await describe_run(client, run_id)
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

    try:
        outcome = with_client(address, namespace, go)
    except Exception as exc:
        from temporalio.client import WorkflowFailureError

        from rein.runs import failure_message

        if isinstance(exc, WorkflowFailureError):
            raise CliError(f"run {run_id} failed: {failure_message(exc)}", EXIT_RUN_FAILED) from exc
        raise
    if as_json:
        print_json(outcome.model_dump(mode="json", exclude={"session"}))
        return
    out_console().print(escape(outcome.output or ""))
    if outcome.stop_reason not in ("done", "stop"):
        err_console().print(f"[dim]stop reason: {outcome.stop_reason}[/]")



@app.command()
def watch(run_id: RunId, address: Address = None, namespace: Namespace = None) -> None:
    """Follow a run's stream live (text, tool calls, steps) until it pauses for a person or ends."""
    from rein.runs import RunNotFound, describe_run, is_not_found

    out = out_console()
    err = err_console()

    async def go(client: ReinClient) -> RunDetail:
        detail = await describe_run(client, run_id)
        if detail.closed is not None or detail.interrupt is not None:
            await _follow_steps(client, run_id, err)  # already paused or ended: its steps so far
        else:
            seen_pauses = 0
            try:
                async for chunk in client.stream(run_id):  # from the start: the steps so far, then live
                    render_chunk(out, err, chunk)
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
    out.print()
    render_detail(err, detail, steps=False)
    if detail.status == "failed":
        raise CliError(f"run {run_id} failed: {detail.error}", EXIT_RUN_FAILED)


async def _follow_steps(client: ReinClient, run_id: str, err: Console) -> None:
    """A paused or finished run: print its steps so far."""
    from rein.runs import describe_run

    for step in (await describe_run(client, run_id, steps=True)).steps or []:
        print_step(err, step)


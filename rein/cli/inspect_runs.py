"""`rein list`, `rein show` and `rein status`: what runs there are and where each one stands."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rein.cli.app import (
    Address,
    JsonFlag,
    Namespace,
    RunId,
    RunStatusChoice,
    app,
    err_console,
    escape,
    out_console,
    print_json,
    with_client,
)
from rein.cli.render import age, render_decisions, render_detail, styled_status

if TYPE_CHECKING:
    from rein.client import ReinClient


@app.command("list")
def list_(
    status: Annotated[RunStatusChoice | None, typer.Option("--status", "-s", help="Only runs in this status: running, waiting_approval, "
                                           "waiting_input, waiting_retry, done, cancelled or failed.",
                                                           case_sensitive=False)] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only runs of this agent (its registered name).")] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs, newest first.", min=1)] = 50,
    fork_of: Annotated[str | None, typer.Option("--fork-of", help="Only forks of this run (rein fork).")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only runs of this tenant (rein start --tenant).")] = None,
    schedule: Annotated[str | None, typer.Option("--schedule", help="Only runs this schedule started (rein schedule).")] = None,
    eval_of: Annotated[str | None, typer.Option("--eval-of", help="Only what-if runs of this recorded run (rein eval).")] = None,
    evals: Annotated[bool, typer.Option("--evals", help="List what-if runs of `rein eval` too (hidden by default).")] = False,
    stuck: Annotated[bool, typer.Option("--stuck", help="Only open runs that cannot go on without an operator: their "
                                        "workflow task keeps failing (they wait for a fixed build), or their build has "
                                        "no worker.")] = False,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """List runs: id, agent, status, iterations, tokens, what it waits for, age (what-if runs only with --evals)."""
    from rein.ops.runs import list_runs

    if stuck:
        return list_stuck(agent, limit, address, namespace, as_json)
    rows = with_client(address, namespace,
                        lambda client: list_runs(client, status.value if status else None, agent, limit, fork_of, tenant,
                                                 schedule, eval_of, include_evals=evals))
    if as_json:
        print_json([row.to_json() for row in rows])
        return
    console = out_console()
    if not rows:
        what = f" in status {status.value}" if status else ""
        console.print(f"[dim]no runs{what}{f' of agent {agent}' if agent else ''}[/]")
        return
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("agent")
    table.add_column("status", no_wrap=True)
    table.add_column("iterations", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("waiting for", overflow="fold")
    table.add_column("age", justify="right")
    now = datetime.now(UTC)
    for row in rows:
        table.add_row(escape(row.id), escape(row.agent), styled_status(row.status),
                      "" if row.iterations is None else str(row.iterations),
                      "" if row.tokens is None else str(row.tokens),
                      escape(row.waits_for), age(row.age(now)))
    console.print(table)


@app.command()
def show(
    run_id: RunId,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """A run's state and its steps (kind, summary, duration, tokens, errors), and what it waits for."""
    from rein.ops.runs import describe_run

    async def read(client: ReinClient) -> tuple[Any, list[Any]]:
        detail = await describe_run(client, run_id, steps=True)
        try:  # who decided each call (a person, a rule, a timeout): read from the run's Session
            decided = [r for r in await client.policy.explain(run_id) if r.decision in ("approved", "denied", "answered")
                       and r.at]
        except Exception:  # no worker and a history this build cannot replay: the steps still show
            decided = []
        return detail, decided

    detail, decided = with_client(address, namespace, read)
    if as_json:
        data = detail.to_json()
        data["steps"] = None if detail.steps is None else [s.model_dump(mode="json") for s in detail.steps]
        data["decisions"] = [r.to_json() for r in decided]
        print_json(data)
        return
    render_detail(out_console(), detail, steps=True)
    if decided:
        render_decisions(out_console(), decided)


@app.command()
def status(
    run_id: RunId,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """A run's status: running, waiting_approval|input|retry, done, cancelled or failed."""
    from rein.ops.runs import describe_run

    detail = with_client(address, namespace, lambda client: describe_run(client, run_id))
    if as_json:
        print_json(detail.to_json())
        return
    render_detail(out_console(), detail, steps=False)


def list_stuck(agent: str | None, limit: int, address: str | None, namespace: str | None, as_json: bool) -> None:
    """`rein list --stuck`: open runs that cannot go on without an operator. Those whose workflow task keeps failing
    (with the error), and those that wait on a build no worker serves (each deployment's outage line on stderr, so
    `--json` stays the list)."""
    from rein.ops.stuck import stuck_runs, unserved

    async def read(client: Any) -> tuple[list[Any], tuple[list[str], list[Any]]]:
        return await stuck_runs(client.client, agent, limit), await unserved(client.client, limit)

    failing, (outages, waiting) = with_client(address, namespace, read)
    rows = failing + [row for row in waiting if agent in (None, row.agent) and row.id not in {r.id for r in failing}]
    for line in outages:
        err_console().print(f"[yellow]{escape(line)}[/]", soft_wrap=True)
    if as_json:
        print_json([row.to_json() for row in rows])
        return
    console = out_console()
    if not rows:
        console.print("[dim]no stuck runs[/]")
        return
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    for name in ("id", "agent", "stopped at", "attempt", "error", "age"):
        table.add_column(name, no_wrap=name in ("id", "attempt"), overflow="fold")
    now = datetime.now(UTC)
    for row in rows:
        table.add_row(escape(row.id), escape(row.agent), escape(row.last_status), str(row.attempt or "-"),
                      escape(row.error[:300]), age(now - row.started))
    console.print(table)
    console.print("[dim]These runs are open and lose nothing: deploy a build that fixes the error, or start a worker of "
                  "the build they wait for, and they carry on.[/]")

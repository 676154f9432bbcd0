"""`rein deployment status|set-current|rollback` (Worker Versioning) and `rein list --stuck`'s table."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from rein.cli.app import (
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
from rein.cli.render import age

deployment_app = typer.Typer(help="Worker Versioning: which build serves new runs (docs/deploys.md).",
                             no_args_is_help=False)
app.add_typer(deployment_app, name="deployment")

DeploymentName = Annotated[str | None, typer.Option(
    "--deployment", "-d", help="Deployment name (default: REIN_DEPLOYMENT, else rein).")]
Unchecked = Annotated[bool, typer.Option("--unchecked", help="Move the runs without asking the build to replay them "
                                         "first (a build from before rein's replay checks cannot be asked).")]


def list_stuck(agent: str | None, limit: int, address: str | None, namespace: str | None, as_json: bool) -> None:
    """`rein list --stuck`: open runs whose workflow task keeps failing, with the error."""
    from rein.ops.routing import outages
    from rein.ops.stuck import stuck_runs

    async def read(client: Any) -> tuple[list[Any], list[str]]:
        return await stuck_runs(client.client, agent, limit), await outages(client.client)

    rows, waiting = with_client(address, namespace, read)
    for line in waiting:  # on stderr: `--json` output stays the list
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
        table.add_row(escape(row.id), escape(row.agent), escape(row.last_status), str(row.attempt),
                      escape(row.error[:300]), age(now - row.started))
    console.print(table)
    console.print("[dim]These runs are open and lose nothing: deploy a build that fixes the error and they carry on.[/]")


def _deployment(name: str | None) -> str:
    from rein.temporal.deployment import DEFAULT_DEPLOYMENT, DEPLOYMENT_ENV

    return name or os.environ.get(DEPLOYMENT_ENV) or DEFAULT_DEPLOYMENT


@deployment_app.command("status")
def status(deployment: DeploymentName = None, address: Address = None, namespace: Namespace = None,
           as_json: JsonFlag = False) -> None:
    """The deployment's current and ramping builds, each version's state and workers, and an outage if there is one."""
    from rein.ops.routing import deployment_state

    name = _deployment(deployment)
    state = with_client(address, namespace, lambda client: deployment_state(client.client, name))
    if state is None:
        raise CliError(f"no worker deployment {name!r} (no versioned worker has polled yet)")
    if as_json:
        print_json(state.to_json())
        return
    console = out_console()
    console.print(f"deployment {escape(name)}: current {state.current or '- (unversioned workers)'}"
                  + (f", ramping {state.ramping} at {state.ramping_percentage:g}%" if state.ramping else "")
                  + (f", routed by {escape(state.manager)}" if state.manager else ""))
    now = datetime.now(UTC)
    for v in state.versions:
        workers = "workers polling" if v.polling else (
            f"no worker since {age(now - v.last_poll)} ago" if v.last_poll else "no worker")
        console.print(f"  {escape(v.build_id)}  {v.status}  {v.behavior or 'earlier rein (pinned)'}  {workers}")
    outage = state.outage()
    if outage:
        console.print(f"[yellow]{escape(outage)}[/]", soft_wrap=True)


@deployment_app.command("set-current")
def set_current(build_id: Annotated[str, typer.Argument(help="The build to route new runs to.")],
                deployment: DeploymentName = None,
                ramp: Annotated[float | None, typer.Option(help="Ramp this percentage of new runs instead.",
                                                           min=0, max=100)] = None,
                unchecked: Unchecked = False,
                address: Address = None, namespace: Namespace = None) -> None:
    """Route new runs to BUILD_ID (or ramp some of them). Runs that follow the current build move with it once
    BUILD_ID's workers replayed them; those it cannot replay stay pinned where they are."""
    _move(_deployment(deployment), build_id, ramp, unchecked, address, namespace)


@deployment_app.command("rollback")
def rollback(to: Annotated[str | None, typer.Option("--to", help="The build to go back to (default: the one "
                                                    "current before the current one).")] = None,
             deployment: DeploymentName = None, unchecked: Unchecked = False,
             address: Address = None, namespace: Namespace = None) -> None:
    """Make the previous build current again, as set-current does (its workers replay the runs that move first)."""
    from rein.ops.routing import deployment_state, previous_build

    name = _deployment(deployment)
    if to is None:
        state = with_client(address, namespace, lambda client: deployment_state(client.client, name))
        to = previous_build(state) if state is not None else None
        if to is None:
            raise CliError(f"deployment {name!r} has no build that was current before: pass --to BUILD")
    _move(name, to, None, unchecked, address, namespace)


def _move(name: str, build_id: str, ramp: float | None, unchecked: bool, address: str | None,
          namespace: str | None) -> None:
    from rein.ops.routing import RoutingError, move_routing

    try:
        change = with_client(address, namespace, lambda client: move_routing(
            client.client, name, build_id, ramp=ramp, unchecked=unchecked))
    except RoutingError as err:
        raise CliError(str(err)) from None
    console = out_console()
    for failure in change.stayed:
        console.print(f"{escape(failure.line())} stays pinned to {escape(change.previous or '-')}: {escape(build_id)} "
                      "cannot replay it", soft_wrap=True)
    what = f"ramping {ramp:g}% of new runs to" if ramp is not None else "current:"
    moved = f"{change.moved} open runs follow it" + ("" if change.checked else " (not checked)")
    console.print(f"deployment {escape(name)} {what} {escape(build_id)} (was {escape(change.previous or '-')}); {moved}")

"""`rein deployment status|set-current|rollback` (Worker Versioning, docs/deploys.md). Exit 9: a build cannot take
the runs that would move to it (status: a build its check kept out, or runs left as they were)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from rein.cli.app import (
    EXIT_NOT_REPLAYABLE,
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

deployment_app = typer.Typer(help="Worker Versioning: which build serves new runs (docs/deploys.md).",
                             no_args_is_help=False)
app.add_typer(deployment_app, name="deployment")
DeploymentName = Annotated[str | None, typer.Option(
    "--deployment", "-d", help="Deployment name (default: REIN_DEPLOYMENT, else rein).")]
Unchecked = Annotated[bool, typer.Option("--unchecked", help="Move the runs without asking the build to replay them "
                                         "first (a build from before rein's replay checks cannot be asked).")]


@deployment_app.command("status")
def status(deployment: DeploymentName = None, address: Address = None, namespace: Namespace = None,
           as_json: JsonFlag = False) -> None:
    """Current and ramping builds; each build's state, workers and the runs that wait on it; an outage, or a build
    that cannot take the runs (exit 9)."""
    from rein.ops.routing import deployment_state
    from rein.temporal.deployment import deployment_name

    name = deployment_name(deployment) or ""
    if (state := with_client(address, namespace, lambda c: deployment_state(c.client, name))) is None:
        raise CliError(f"no worker deployment {name!r} (no versioned worker has polled yet)")
    if as_json:
        print_json(state.to_json())
    else:
        console = out_console()
        console.print(f"deployment {escape(state.name)}: current {state.current or '- (unversioned workers)'}"
                      + (f", ramping {state.ramping} at {state.ramping_percentage:g}%" if state.ramping else "")
                      + (f", routed by {escape(state.manager)}" if state.manager else ""))
        for v in state.versions:
            console.print(f"  {escape(v.line())}", soft_wrap=True)
        for style, line in [*(("yellow", x) for x in state.outages()), *(("red", x) for x in state.refusals())]:
            console.print(f"[{style}]{escape(line)}[/]", soft_wrap=True)
    if state.refusals():
        raise typer.Exit(EXIT_NOT_REPLAYABLE)


@deployment_app.command("set-current")
def set_current(build_id: Annotated[str, typer.Argument(help="The build to route new runs to.")],
                deployment: DeploymentName = None,
                ramp: Annotated[float | None, typer.Option(help="Ramp this percentage of new runs instead.", min=0, max=100)] = None,
                unchecked: Unchecked = False, address: Address = None, namespace: Namespace = None) -> None:
    """Route new runs to BUILD_ID (or ramp some of them). Runs that follow the current build move with it once
    BUILD_ID's workers replayed them all; those it cannot replay stay pinned where they are."""
    _move(deployment, build_id, ramp, unchecked, address, namespace)


@deployment_app.command("rollback")
def rollback(to: Annotated[str | None, typer.Option("--to", help="The build to go back to (default: the one current "
                                                    "before the current one).")] = None,
             deployment: DeploymentName = None, unchecked: Unchecked = False, address: Address = None,
             namespace: Namespace = None) -> None:
    """Make the previous build current again, as set-current does (its workers replay the runs that move first)."""
    _move(deployment, to, None, unchecked, address, namespace)


def _move(deployment: str | None, build_id: str | None, ramp: float | None, unchecked: bool, address: str | None,
          namespace: str | None) -> None:
    from rein.ops.routing import RoutingError, move_routing
    from rein.temporal.deployment import deployment_name

    async def progress(found: Any) -> None:
        err_console().print(f"[dim]build {escape(found.build)} replayed {found.checked} of the {len(found.runs)} runs "
                            "that would move to it[/]")

    name = deployment_name(deployment) or ""
    try:
        previous, found = with_client(address, namespace, lambda client: move_routing(
            client.client, name, build_id, ramp=ramp, unchecked=unchecked, progress=progress))
    except RoutingError as err:
        raise CliError(str(err), EXIT_NOT_REPLAYABLE if err.replay else 1) from None
    console = out_console()
    for f in found.failures:
        console.print(f"{escape(f.line())} " + ("is left as it is: it cannot go on where it is either" if f.left else
                      f"stays pinned to {escape(f.run.build or previous or '-')}: {escape(found.build)} cannot replay it"),
                      soft_wrap=True)
    what = f"ramping {ramp:g}% of new runs to" if ramp is not None else "current:"
    moved = f"{len(found.runs) - len(found.failures)} open runs follow it" + ("" if not unchecked else " (not checked)")
    console.print(f"deployment {escape(name)} {what} {escape(found.build)} (was {escape(previous or '-')}); {moved}")

"""`rein deployment status|set-current` (Worker Versioning) and `rein list --stuck`'s table."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rein.cli.app import Address, CliError, JsonFlag, Namespace, app, escape, out_console, print_json, with_client
from rein.cli.render import age

if TYPE_CHECKING:
    from temporalio.api.enums.v1 import VersionDrainageStatus

deployment_app = typer.Typer(help="Worker Versioning: which build serves new runs (docs/deploys.md).",
                             no_args_is_help=True)
app.add_typer(deployment_app, name="deployment")

DeploymentName = Annotated[str | None, typer.Option(
    "--deployment", "-d", help="Deployment name (default: REIN_DEPLOYMENT).")]


def list_stuck(agent: str | None, limit: int, address: str | None, namespace: str | None, as_json: bool) -> None:
    """`rein list --stuck`: open runs whose workflow task keeps failing, with the error."""
    from rein.ops.stuck import stuck_runs

    rows = with_client(address, namespace, lambda client: stuck_runs(client.client, agent, limit))
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
    from rein.temporal.deployment import DEPLOYMENT_ENV

    name = name or os.environ.get(DEPLOYMENT_ENV)
    if not name:
        raise CliError(f"which deployment? pass --deployment or set {DEPLOYMENT_ENV}")
    return name


@deployment_app.command("status")
def status(deployment: DeploymentName = None, address: Address = None, namespace: Namespace = None,
           as_json: JsonFlag = False) -> None:
    """The deployment's current and ramping builds and each version's drainage."""
    from rein.temporal.deployment import describe

    name = _deployment(deployment)
    described = with_client(address, namespace, lambda client: describe(client.client, name))
    if described is None:
        raise CliError(f"no worker deployment {name!r} (no versioned worker has polled yet)")
    info = described.worker_deployment_info
    routing = info.routing_config
    data: dict[str, Any] = {
        "deployment": name,
        "current": routing.current_deployment_version.build_id or None,
        "ramping": routing.ramping_deployment_version.build_id or None,
        "ramping_percentage": routing.ramping_version_percentage,
        "versions": [{"build_id": v.deployment_version.build_id, "drainage": _enum_name(v.drainage_status)}
                     for v in info.version_summaries],
    }
    if as_json:
        print_json(data)
        return
    console = out_console()
    console.print(f"deployment {escape(name)}: current {data['current'] or '-'}"
                  + (f", ramping {data['ramping']} at {data['ramping_percentage']:g}%" if data["ramping"] else ""))
    for version in data["versions"]:
        console.print(f"  {escape(version['build_id'])}  {version['drainage']}")


def _enum_name(value: VersionDrainageStatus.ValueType) -> str:
    from temporalio.api.enums.v1 import VersionDrainageStatus

    return VersionDrainageStatus.Name(value).removeprefix("VERSION_DRAINAGE_STATUS_").lower()


@deployment_app.command("set-current")
def set_current(build_id: Annotated[str, typer.Argument(help="The build to route new runs to.")],
                deployment: DeploymentName = None,
                ramp: Annotated[float | None, typer.Option(help="Ramp this percentage of new runs instead.",
                                                           min=0, max=100)] = None,
                address: Address = None, namespace: Namespace = None) -> None:
    """Route new runs to BUILD_ID (or ramp some of them); runs already started stay on their build."""
    from temporalio.common import WorkerDeploymentVersion

    from rein.temporal.deployment import set_current as set_version

    version = WorkerDeploymentVersion(_deployment(deployment), build_id)
    with_client(address, namespace, lambda client: set_version(client.client, version, ramp=ramp))
    what = f"ramping {ramp:g}% of new runs to" if ramp is not None else "current:"
    out_console().print(f"deployment {escape(version.deployment_name)} {what} {escape(build_id)}")

"""`rein trace`: send finished runs' traces, rebuilt from history, to the OTLP endpoint (rein.tracing.backfill)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from rein.cli.app import EXIT_NOT_FOUND, EXIT_USAGE, Address, CliError, Namespace, app, err_console, escape, out_console, with_client


def _check_tracing() -> None:
    from rein.tracing.setup import _installed, wanted

    if not wanted():
        raise CliError("set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://localhost:6006) to say where traces go", EXIT_USAGE)
    if not _installed():
        raise CliError("tracing needs the otel extra: pip install 'rein[otel]'", EXIT_USAGE)


async def _finished_since(client: Any, since: str) -> list[str]:
    from rein.cli.fork import parse_since

    after = (datetime.now(UTC) - parse_since(since)).strftime("%Y-%m-%dT%H:%M:%SZ")
    query = f"WorkflowType = 'AgentWorkflow' AND CloseTime > '{after}' AND ExecutionStatus != 'ContinuedAsNew'"
    found: list[str] = []
    async for execution in client.client.list_workflows(query):
        if execution.parent_id is None and execution.id not in found:
            found.append(execution.id)  # an agent used as a tool comes with its parent's trace
    return found


@app.command("trace")
def trace(
    run_id: Annotated[str | None, typer.Argument(help="The run's id (its Temporal workflow id).", show_default=False)] = None,
    since: Annotated[str | None, typer.Option("--since", help="Every run that ended in this window (30m, 6h, 1d).")] = None,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Send a finished run's trace, rebuilt from its history, to OTEL_EXPORTER_OTLP_ENDPOINT."""
    from temporalio.service import RPCError, RPCStatusCode

    from rein.tracing.backfill import send

    if (run_id is None) == (since is None):
        raise CliError("give a RUN_ID or --since (e.g. --since 1d), not both", EXIT_USAGE)
    _check_tracing()

    async def go(client: Any) -> Any:
        ids = [run_id] if run_id is not None else await _finished_since(client, since or "")
        try:
            return await send(client.client, ids)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise CliError(f"no run {run_id!r} on this server", EXIT_NOT_FOUND) from None
            raise

    sent = with_client(address, namespace, go)
    out_console().print(f"sent {sent.count} spans of {sent.runs} run(s) to the OTLP endpoint")
    for workflow_id, why in sent.unreadable.items():  # the rest of a --since window still went out
        err_console().print(f"[yellow]left out {escape(workflow_id)}:[/] {escape(why)}")

"""`rein replay` and `rein history export`: the replay gate a deploy runs in CI (see docs/deploys.md).

    rein history export RUN_ID -o run.json       save a run's history (Temporal's history JSON)
    rein replay run.json other.json              replay exported histories against this code
    rein replay --since 7d [--query Q] [--limit N]   replay recent runs from a server

`rein replay` exits 0 when every history replays, EXIT_NOT_REPLAYABLE when one does not.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rein.cli.app import (
    EXIT_NOT_REPLAYABLE,
    EXIT_USAGE,
    Address,
    CliError,
    JsonFlag,
    Namespace,
    RunId,
    app,
    connect_client,
    escape,
    out_console,
    print_json,
)
from rein.cli.fork import parse_since

if TYPE_CHECKING:
    from rein.ops.replay import ReplayReport

history_app = typer.Typer(help="Run histories: export one for `rein replay` or a bug report.", no_args_is_help=False)
app.add_typer(history_app, name="history")


@history_app.command("export")
def history_export(
    run_id: RunId,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: RUN_ID.json).")] = None,
    run: Annotated[str | None, typer.Option("--run", help="One run of a continue-as-new chain (default: the newest).")] = None,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Save a run's history as Temporal's history JSON (what `rein replay FILE` and WorkflowHistory.from_json read)."""
    from temporalio.service import RPCError, RPCStatusCode

    from rein.ops.runs import RunNotFound

    async def fetch() -> str:
        client = (await connect_client(address, namespace)).client
        try:
            return (await client.get_workflow_handle(run_id, run_id=run).fetch_history()).to_json()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise RunNotFound(run_id) from None
            raise

    target = output or Path(f"{run_id}.json")
    text = asyncio.run(fetch())
    try:
        target.write_text(text)
    except OSError as err:
        raise CliError(f"cannot write {str(target)!r}: {err.strerror or err}") from None
    out_console().print(f"saved the history of {run_id} to {target}")


@app.command()
def replay(
    files: Annotated[list[Path] | None, typer.Argument(help="Exported histories (JSON) to replay.", show_default=False)] = None,
    since: Annotated[str | None, typer.Option("--since", help="Replay runs started within this age (7d, 12h, 30m) from the server.")] = None,  # noqa: E501  (one string, read whole)
    query: Annotated[str | None, typer.Option("--query", "-q", help="A visibility query the runs must also match.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many runs from the server, newest first.", min=1)] = 200,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay histories against this code; exit non-zero when one does not replay (nondeterminism)."""
    from rein.ops.replay import load_history, replay_all, server_histories

    if files and (since or query):
        raise CliError("give history FILES or --since/--query (a server), not both", EXIT_USAGE)
    if not files and not since and not query:
        raise CliError("give history FILES, or --since AGE (and --query) to replay runs from a server", EXIT_USAGE)
    try:
        histories = [load_history(f) for f in files or ()]
    except ValueError as err:
        raise CliError(str(err), EXIT_USAGE) from None
    age = parse_since(since) if since else None

    async def go() -> ReplayReport:
        if histories:
            return await replay_all(histories)
        client = (await connect_client(address, namespace)).client
        return await replay_all(server_histories(client, age, query, limit),
                                data_converter=client.data_converter, namespace=client.namespace)

    report = asyncio.run(go())
    _report(report, as_json)
    if not report.ok:
        raise CliError(f"{len(report.failures)} of {len(report.results)} histories do not replay with this code "
                       "(a deploy of it would strand those runs)", EXIT_NOT_REPLAYABLE)


def _report(report: ReplayReport, as_json: bool) -> None:
    if as_json:
        print_json([{"workflow_id": r.workflow_id, "run_id": r.run_id, "ok": r.ok, "error": r.error,
                     "reset_from": r.reset_from, "reset_to": r.reset_to} for r in report.results])
        return
    console = out_console()
    if not report.results:
        console.print("[dim]no runs matched: nothing to replay[/]")
    for r in report.results:
        verdict = "[green]ok[/]" if r.ok else f"[bold red]FAILS[/] {escape(r.error or '')}"
        lineage = f" [dim](rewound from {escape(r.reset_from)})[/]" if r.reset_from else ""
        if r.reset_to:
            lineage += f" [dim](reset: rewound as {escape(r.reset_to)})[/]"
        console.print(f"{escape(r.workflow_id)} {escape(r.run_id)} {verdict}{lineage}")
    if report.results and report.ok:
        console.print(f"[green]{len(report.results)} histories replay with this code[/]")

"""`rein eval`: replay recorded runs against a changed agent before it takes traffic (docs/evals.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from rein.cli import interrupt
from rein.cli.app import (
    EXIT_EVAL_BELOW,
    EXIT_NO_WORKER,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    Address,
    CliError,
    JsonFlag,
    Namespace,
    app,
    err_console,
    escape,
    load_agent_target,
    out_console,
    print_json,
    with_client,
)

if TYPE_CHECKING:
    from rein.client import ReinClient
    from rein.durable.evals import EvalReport

VERDICT_STYLE = {"match": "green", "differ": "yellow", "diverged": "bold yellow", "failed": "bold red"}


@app.command("eval")
def eval_command(
    agent: Annotated[str, typer.Option("--agent", "-a", help="The changed agent: MODULE:ATTR (served here, on a "
                                       "queue of its own), or the NAME workers of --task-queue serve (a new build "
                                       "deployed beside the current one).", show_default=False)],
    runs: Annotated[list[str] | None, typer.Option("--runs", help="Recorded run ids (repeat the flag, or "
                                                   "separate with commas).", show_default=False)] = None,
    since: Annotated[str | None, typer.Option("--since", help="Finished runs started within this long (7d).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="The recorded runs' agent (default: the changed "
                                             "agent's name).", show_default=False)] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many runs, newest first.")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="What-if runs at once.")] = 4,
    scorer: Annotated[list[str] | None, typer.Option("--scorer", help="exact | json:PATH | judge:MODEL | "
                                                     "MODULE:ATTR (repeat).", show_default=False)] = None,
    fail_under: Annotated[float | None, typer.Option("--fail-under", min=0.0, max=1.0, help="Exit 12 when the share "
                                                     "of runs that match is below this (0.95).")] = None,
    task_queue: Annotated[str | None, typer.Option("--task-queue", "-q", help="Where the what-if runs go (with a NAME: "
                                                   "the queue its workers poll; found when not given).",
                                                   show_default=False)] = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay recorded runs against a changed agent: recorded tool results, no tool runs again; compare."""
    from rein.cli.fork import parse_since

    window = parse_since(since) if since else None
    ids = [i.strip() for item in runs or [] for i in item.split(",") if i.strip()]
    scorers = [parse_scorer(s) for s in scorer or []]
    target: Any = load_agent_target(agent) if ":" in agent else agent
    interrupt.fate("the what-if runs started so far stay on the server, " + (
        "unserved (this process served them)" if ":" in agent else "on the workers that serve them")
        + ": `rein list --evals` shows them")
    report = with_client(address, namespace, lambda client: _run(client, target, ids, window, name, limit,
                                                                 scorers, concurrency, task_queue))
    if as_json:
        print_json(report.as_json())
    else:
        show(report)
    if fail_under is not None and report.share < fail_under:
        raise CliError(f"{report.share:.0%} of runs match, under --fail-under {fail_under:g}", EXIT_EVAL_BELOW)


async def _run(client: ReinClient, target: Any, ids: list[str], since: Any, name: str | None, limit: int | None,
               scorers: list[Any], concurrency: int, task_queue: str | None) -> EvalReport:
    from rein.durable.evals import EvalError
    from rein.ops.worker_lookup import AgentNotServed, queue_for

    if isinstance(target, str):  # a NAME: served by workers of the fleet (the queue they poll)
        try:
            task_queue = await queue_for(client, target, task_queue)
        except AgentNotServed as err:
            raise CliError(str(err), EXIT_NO_WORKER) from None
    console = err_console()
    done: list[str] = []
    with console.status("reading the recorded runs") as status:  # shown on a terminal only
        def progress(row: Any) -> None:
            done.append(row.verdict)
            status.update(f"{len(done)} compared: {done.count('match')} match, "
                          f"{len(done) - done.count('match')} not")
        try:
            return await client.eval(target, runs=ids or None, since=since, name=name, limit=limit, scorers=scorers,
                                     concurrency=concurrency, task_queue=task_queue, on_row=progress)
        except EvalError as err:
            code = EXIT_NOT_FOUND if str(err).startswith("no finished runs") else EXIT_USAGE
            raise CliError(str(err), code) from None


def parse_scorer(text: str) -> Any:
    """A --scorer: `exact`, `json:PATH`, `judge:MODEL` (LiteLLM), or MODULE:ATTR of your own callable."""
    from rein.ops import scorers

    kind, _, arg = text.partition(":")
    if text == "exact":
        return scorers.exact_match()
    if kind == "json" and arg:
        return scorers.json_field(arg)
    if kind == "judge" and arg:
        return scorers.llm_judge(arg)
    if kind and arg:
        import importlib

        try:
            found = getattr(importlib.import_module(kind), arg)
        except (ImportError, AttributeError) as err:
            raise CliError(f"--scorer {text!r}: {err}", EXIT_USAGE) from None
        if callable(found):
            return found
    raise CliError(f"--scorer {text!r} is not exact, json:PATH, judge:MODEL or MODULE:ATTR of a callable", EXIT_USAGE)


def show(report: EvalReport) -> None:
    """A table, one row per recorded run, then the summary line."""
    from rich.table import Table

    console = out_console()
    table = Table(show_edge=False, pad_edge=False)
    for column in ("recorded run", "verdict", "tool calls", "output", "scores", "tokens", "time"):
        table.add_column(column)
    for row in report.rows:
        calls = (row.diverged or row.error) or (
            "same" if row.first_difference is None else f"differ from step {row.first_difference}")
        scores = ", ".join(f"{k} {v:g}" for k, v in row.scores.items()) or "-"
        time = "-" if row.elapsed_s is None or row.recorded_elapsed_s is None else (
            f"{row.elapsed_s:.1f}s / {row.recorded_elapsed_s:.1f}s")
        table.add_row(escape(row.recorded), f"[{VERDICT_STYLE[row.verdict]}]{row.verdict}[/]", escape(calls),
                      "same" if row.same_output else "changed", escape(scores),
                      f"{row.tokens} / {row.recorded_tokens}", time)
    console.print(table)
    console.print(escape(report.summary()))

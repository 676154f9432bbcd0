"""`rein fork` and `rein rewind`: a run from any step into a new run, or reset in place (rein.durable.fork)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

import typer

from rein.cli.app import (
    EXIT_USAGE,
    Address,
    CliError,
    JsonFlag,
    Namespace,
    RunId,
    app,
    escape,
    out_console,
    print_json,
    with_client,
)
from rein.cli.runs import watch as watch_run


def parse_since(text: str) -> timedelta:
    from rein.core.durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as err:
        raise CliError(f"--since {err}", EXIT_USAGE) from None


def parse_tool_results(items: list[str]) -> dict[str, str]:
    results: dict[str, str] = {}
    for item in items:
        call_id, sep, text = item.partition("=")
        if not sep or not call_id:
            raise CliError(f"--tool-result {item!r} is not CALL_ID=TEXT", EXIT_USAGE)
        results[call_id] = text
    return results


@app.command()
def fork(
    run_id: Annotated[str | None, typer.Argument(help="The run to fork (omit with --failed).", show_default=False)] = None,
    at_step: Annotated[int | None, typer.Option("--at-step", help="Fork after this step (the indexes `rein show` prints).")] = None,
    tool_result: Annotated[list[str] | None, typer.Option("--tool-result", help="CALL_ID=TEXT: the fork's model sees TEXT as that call's result; repeatable.")] = None,  # noqa: E501  (one string, read whole)
    prompt: Annotated[str | None, typer.Option("--prompt", help="Replace the last user message before the fork point.")] = None,
    append_prompt: Annotated[str | None, typer.Option("--append-prompt", help="Add a user message after the fork point (a new turn).")] = None,  # noqa: E501  (one string, read whole)
    drop_last_reply: Annotated[bool, typer.Option("--drop-last-reply", help="Drop the model's last reply: it answers again.")] = False,
    agent: Annotated[str | None, typer.Option("--agent", help="Continue in this agent (its tools must fit the conversation).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="The fork's model, a LiteLLM id (the agent must allow it: client_overrides=[\"model\"]).")] = None,  # noqa: E501  (one string, read whole)
    new_id: Annotated[str | None, typer.Option("--id", help="The fork's run id (default: RUN_ID-fork-<random>).")] = None,
    watch: Annotated[bool, typer.Option("--watch", help="Follow the fork until it pauses or ends.")] = False,
    by: Annotated[str | None, typer.Option("--by", help="Who asks for the fork (recorded; default: this client's identity).")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Fork every run that failed within --since from its last step.")] = False,
    since: Annotated[str, typer.Option("--since", help="With --failed: how far back (30m, 1h, 2d).")] = "1h",
    query: Annotated[str | None, typer.Option("--query", help="With --failed: a visibility query the runs must also match.")] = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """A new run from RUN_ID's conversation after step N (the original is untouched); prints its id."""
    if failed:
        if run_id is not None or at_step is not None:
            raise CliError("--failed forks every failed run from its last step: give no RUN_ID or --at-step", EXIT_USAGE)
        _fork_failed(parse_since(since), query, by, address, namespace, as_json)
        return
    if run_id is None or at_step is None:
        raise CliError("give RUN_ID and --at-step N (or --failed)", EXIT_USAGE)
    edits: dict[str, Any] = {"tool_results": parse_tool_results(tool_result or []),
                             "drop_last_reply": drop_last_reply}
    if prompt is not None:
        edits["prompt"] = prompt
    if append_prompt is not None:
        edits["append_prompt"] = append_prompt
    created = with_client(address, namespace, lambda client: client.fork(
        run_id, at_step=at_step, edits=edits, id=new_id, agent=agent, by=by, model=model))
    if as_json:
        print_json({"run_id": created, "fork_of": run_id, "at_step": at_step})
    else:
        out_console().print(escape(created))
    if watch:
        watch_run(created, address, namespace)

@app.command()
def rewind(
    run_id: RunId,
    to_step: Annotated[int, typer.Option("--to-step", help="Keep steps up to this one; everything after happens again.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the reset).")] = "",
    rerun_tools: Annotated[bool, typer.Option("--rerun-tools", help="Allow tools that ran after the step to run again.")] = False,
    by: Annotated[str | None, typer.Option("--by", help="Who asks (recorded).")] = None,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Reset RUN_ID in place to just after step N (same id; unlike fork, the original history is replaced)."""
    run = with_client(address, namespace, lambda client: client.rewind(
        run_id, to_step=to_step, reason=reason, rerun_tools=rerun_tools, by=by))
    out_console().print(f"rewound {escape(run_id)} to step {to_step} (new Temporal run {escape(run)})")


def _fork_failed(since: timedelta, query: str | None, by: str | None, address: Any, namespace: Any, as_json: bool) -> None:
    rows = with_client(address, namespace, lambda client: client.fork_failed(since=since, query=query, by=by))
    if as_json:
        print_json([{"run_id": r.run_id, "at_step": r.at_step, "fork_id": r.fork_id, "error": r.error} for r in rows])
        return
    console = out_console()
    if not rows:
        console.print("[dim]no failed runs in that window[/]")
        return
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    for name in ("failed run", "from step", "fork", "note"):
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(escape(row.run_id), "" if row.at_step is None else str(row.at_step),
                      escape(row.fork_id or ""), escape(row.error or ""))
    console.print(table)

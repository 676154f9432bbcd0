"""`rein limits` and `rein usage`: fleet control on Temporal's task-queue config (rein.durable.fleet)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer

from rein.cli.app import (
    EXIT_NO_WORKER,
    EXIT_USAGE,
    Address,
    CliError,
    JsonFlag,
    Namespace,
    app,
    escape,
    out_console,
    print_json,
    with_client,
)


def _weights(items: list[str]) -> dict[str, float]:
    """`TENANT=WEIGHT` pairs (or one --tenant with --weight)."""
    weights: dict[str, float] = {}
    for item in items:
        tenant, sep, value = item.rpartition("=")
        try:
            weights[tenant] = float(value)
        except ValueError:
            sep = ""
        if not sep or not tenant:
            raise CliError(f"--weights {item!r} is not TENANT=WEIGHT", EXIT_USAGE)
    return weights


def _money(value: float, unpriced: int = 0) -> str:
    return f"${value:.4f}" + (f" (+{unpriced} unpriced)" if unpriced else "")


limits_app = typer.Typer(help="Server-side rate limits and tenant weights of rein's task queues (docs/fleet.md).")
app.add_typer(limits_app, name="limits")


@limits_app.callback(invoke_without_command=True)
def limits(
    ctx: typer.Context,
    model: Annotated[list[str] | None, typer.Option("--model", help="A model's (provider's) queue, e.g. openai/gpt-4o; repeatable.")] = None,  # noqa: E501  (one string, read whole)
    queue: Annotated[list[str] | None, typer.Option("--queue", help="A task queue by name; repeatable.")] = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Show queues' rate limits and weights, each with what it applies to (default: rein's queue, the queues
    runs went to, and every provider's model queue, those that have a limit)."""
    if ctx.invoked_subcommand is not None:
        return
    from rein.durable.fleet import all_limits, limit_queue, queue_limits, with_scope

    try:
        names = [limit_queue(model=m) for m in model or []] + list(queue or [])
    except ValueError as err:
        raise CliError(str(err), EXIT_USAGE) from None

    async def go(client: Any) -> list:
        rows = await all_limits(client.client) if not names else [await queue_limits(client.client, n) for n in names]
        return await with_scope(client.client, rows)

    rows = with_client(address, namespace, go)
    if as_json:
        print_json([row | {"applies_to": _applies_to(row)} for row in map(asdict, rows)])
        return
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    for column in ("task queue", "rps", "per-tenant rps", "tenant weights", "applies to"):
        table.add_column(column)
    for row in rows:
        weights = ", ".join(f"{escape(k)}={v:g}" for k, v in sorted(row.weights.items()))
        table.add_row(escape(row.task_queue), "-" if row.rps is None else f"{row.rps:g}",
                      "-" if row.tenant_rps is None else f"{row.tenant_rps:g}", weights or "-",
                      escape(_applies_to(asdict(row))))
    out_console().print(table)


def _applies_to(row: dict[str, Any]) -> str:
    """What a queue's limit paces, in a few words."""
    queue = row["task_queue"]
    if row.get("served") is not None:
        provider = queue.rsplit(".", 1)[-1]
        routed = f"{provider}'s model calls from workers with REIN_MODEL_QUEUES={provider} (or *)"
        return routed if row["served"] else f"{routed}; no worker polls it now, so none are sent here"
    if not row.get("runs"):
        return "no run has used this queue: nothing"
    runs = row["runs"]
    return f"the model and tool calls of its runs: {row['running']} running, {runs} run{'s' if runs != 1 else ''} in all"


@limits_app.command("set")
def limits_set(
    model: Annotated[str | None, typer.Option("--model", help="Limit this model's provider's queue: openai/gpt-4o, or a "
                                              "model LiteLLM knows the provider of (gpt-4o-mini: openai's).")] = None,
    queue: Annotated[str | None, typer.Option("--queue", help="Limit this task queue (default: rein's, REIN_TASK_QUEUE); "
                                              "an agent's runs go to its own, rein.AGENT.")] = None,
    rps: Annotated[float | None, typer.Option("--rps", help="Activity tasks per second for the whole fleet.")] = None,
    unlimited: Annotated[bool, typer.Option("--unlimited", help="Remove the queue's rate limit.")] = False,
    tenant_rps: Annotated[float | None, typer.Option("--tenant-rps", help="Each tenant's own rate (times its weight).")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="With --weight: the tenant whose share to set.")] = None,
    weight: Annotated[float | None, typer.Option("--weight", help="The tenant's weight (default 1; 2 = twice the share).")] = None,
    weights: Annotated[list[str] | None, typer.Option("--weights", help="TENANT=WEIGHT; repeatable.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Set it even when it would slow nothing now: no worker serves the provider's queue (--model), "
                        "or no run has used the queue.")] = False,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Set a queue's rate limit (--rps) and tenants' fair-share weights on the Temporal server.

    Refuses, nothing set, a limit that would slow nothing: with --model when no worker serves the provider's
    queue (exit 8: then no worker routes that provider's calls there, REIN_MODEL_QUEUES); on a queue no run
    has used (exit 2: runs of `rein start` and Agent.run go to their agent's own queue, rein.AGENT).
    --force sets it anyway; removing a limit is never refused."""
    if (tenant is None) != (weight is None):
        raise CliError("--tenant and --weight go together", EXIT_USAGE)
    if rps is not None and unlimited:
        raise CliError("give --rps or --unlimited, not both", EXIT_USAGE)
    wanted = _weights(weights or [])
    if tenant is not None and weight is not None:
        wanted[tenant] = weight
    if rps is None and not unlimited and tenant_rps is None and not wanted:
        raise CliError("nothing to set: give --rps, --unlimited, --tenant-rps or --tenant with --weight", EXIT_USAGE)

    async def go(client: Any):
        from rein.durable.fleet import limit_queue, model_calls_served, not_routed, set_limits  # after the checks: a
        # usage mistake is told without temporalio

        if rps is not None and rps < 0 or tenant_rps is not None and tenant_rps < 0:
            raise ValueError("a rate limit is a number of requests per second, 0 or more")  # before the worker check
        try:
            target = limit_queue(model, queue)
        except ValueError as err:
            raise CliError(str(err), EXIT_USAGE) from None
        only_removes = rps is None and tenant_rps is None and not wanted
        if not force and not only_removes:
            if model and not queue and not await model_calls_served(client.client, model):
                raise CliError(not_routed(model), EXIT_NO_WORKER)
            if not model:
                await _refuse_unused(client.client, target)
        return await set_limits(client.client, model=model, queue=queue, rps=rps, tenant_rps=tenant_rps,
                                weights=wanted, unset_rps=unlimited)

    row = with_client(address, namespace, go)
    if as_json:
        print_json(asdict(row))
        return
    shown = ", ".join(f"{k}={v:g}" for k, v in sorted(row.weights.items())) or "-"
    print(f"{row.task_queue}: rps {'-' if row.rps is None else f'{row.rps:g}'}, weights {shown}")


async def _refuse_unused(client: Any, queue: str) -> None:
    """One line and exit 2 when no run has used `queue` (a limit there would slow nothing), naming where runs go."""
    from rein.durable.fleet import run_queues, runs_on

    if (await runs_on(client, queue))[0]:
        return
    went = [q for q in await run_queues(client) if q != queue][:3]
    lately = f" (lately: {', '.join(went)})" if went else ""
    raise CliError(f"no run has used queue {queue!r}, so a limit on it would slow nothing: runs of `rein start` and "
                   f"Agent.run go to their agent's own queue, rein.AGENT{lately}; name one with --queue, or a provider "
                   f"with --model (--force sets it on {queue!r} anyway)", EXIT_USAGE)


@app.command()
def usage(
    since: Annotated[str, typer.Option("--since", help="Runs started within this long (30m, 24h, 7d).")] = "24h",
    evals: Annotated[bool, typer.Option("--evals", help="Count what-if runs (`rein eval`) too.")] = False,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Spend per tenant and per agent: runs, tokens and cost (child agents count in their parent; what-if
    runs of `rein eval` only with --evals)."""
    from rein.cli.fork import parse_since

    window = parse_since(since)
    from rein.durable.fleet import usage_since  # after the check: a usage mistake is told without temporalio

    report = with_client(address, namespace, lambda client: usage_since(client.client, window, include_evals=evals))
    if as_json:
        print_json({"tenants": [asdict(s) for s in report.tenants], "agents": [asdict(s) for s in report.agents]})
        return
    from rich.table import Table

    console = out_console()
    for title, lines in (("tenant", report.tenants), ("agent", report.agents)):
        table = Table(title=f"per {title}, last {since}", title_justify="left", show_edge=False, pad_edge=False)
        for column, justify in ((title, "left"), ("runs", "right"), ("tokens", "right"), ("cost", "right")):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for line in lines:
            table.add_row(escape(line.key), str(line.runs), str(line.tokens), _money(line.cost_usd, line.unpriced))
        console.print(table if lines else f"[dim]no runs in the last {since}[/]")

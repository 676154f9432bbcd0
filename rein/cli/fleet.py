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
    """Show queues' rate limits and weights (default: rein's queue and every provider's model queue that has one)."""
    if ctx.invoked_subcommand is not None:
        return
    from rein.core.contract import model_queue
    from rein.durable.fleet import all_limits, queue_limits

    names = [model_queue(m) for m in model or []] + list(queue or [])

    async def go(client: Any) -> list:
        if not names:
            return await all_limits(client.client)
        return [await queue_limits(client.client, name) for name in names]

    rows = with_client(address, namespace, go)
    if as_json:
        print_json([asdict(row) for row in rows])
        return
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    for column in ("task queue", "rps", "per-tenant rps", "tenant weights"):
        table.add_column(column)
    for row in rows:
        weights = ", ".join(f"{escape(k)}={v:g}" for k, v in sorted(row.weights.items()))
        table.add_row(escape(row.task_queue), "-" if row.rps is None else f"{row.rps:g}",
                      "-" if row.tenant_rps is None else f"{row.tenant_rps:g}", weights or "-")
    out_console().print(table)

@limits_app.command("set")
def limits_set(
    model: Annotated[str | None, typer.Option("--model", help="Limit this model's (provider's) queue, e.g. openai/gpt-4o.")] = None,
    queue: Annotated[str | None, typer.Option("--queue", help="Limit this task queue (default: rein's, REIN_TASK_QUEUE).")] = None,
    rps: Annotated[float | None, typer.Option("--rps", help="Activity tasks per second for the whole fleet.")] = None,
    unlimited: Annotated[bool, typer.Option("--unlimited", help="Remove the queue's rate limit.")] = False,
    tenant_rps: Annotated[float | None, typer.Option("--tenant-rps", help="Each tenant's own rate (times its weight).")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="With --weight: the tenant whose share to set.")] = None,
    weight: Annotated[float | None, typer.Option("--weight", help="The tenant's weight (default 1; 2 = twice the share).")] = None,
    weights: Annotated[list[str] | None, typer.Option("--weights", help="TENANT=WEIGHT; repeatable.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Set a --model limit even when no worker serves the provider's queue yet.")] = False,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Set a queue's rate limit (--rps) and tenants' fair-share weights on the Temporal server.

    With --model it refuses (exit 8, nothing set) when no worker serves the provider's queue: then no
    worker routes that provider's calls there (REIN_MODEL_QUEUES) and the limit would slow nothing."""
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
        from rein.durable.fleet import model_calls_served, not_routed, set_limits  # after the checks: a usage mistake
        # is told without temporalio

        if rps is not None and rps < 0 or tenant_rps is not None and tenant_rps < 0:
            raise ValueError("a rate limit is a number of requests per second, 0 or more")  # before the worker check
        only_removes = rps is None and tenant_rps is None and not wanted
        if model and not queue and not force and not only_removes and not await model_calls_served(client.client, model):
            raise CliError(not_routed(model), EXIT_NO_WORKER)
        return await set_limits(client.client, model=model, queue=queue, rps=rps, tenant_rps=tenant_rps,
                                weights=wanted, unset_rps=unlimited)

    row = with_client(address, namespace, go)
    if as_json:
        print_json(asdict(row))
        return
    shown = ", ".join(f"{k}={v:g}" for k, v in sorted(row.weights.items())) or "-"
    print(f"{row.task_queue}: rps {'-' if row.rps is None else f'{row.rps:g}'}, weights {shown}")


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

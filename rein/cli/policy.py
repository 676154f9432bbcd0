"""`rein policy`: rules that decide tool calls for people (rein.core.policy, docs/inbox.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from rein.cli.app import (
    EXIT_REJECTED,
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

policy_app = typer.Typer(help="Rules that allow, ask or deny tool calls for people (docs/inbox.md).", no_args_is_help=False)
app.add_typer(policy_app, name="policy")

EFFECTS = ("allow", "ask", "deny")
SCOPES = ("run", "thread", "always")


@policy_app.command("add")
def add(
    effect: Annotated[str, typer.Argument(help="allow, ask or deny.", show_default=False)],
    tool: Annotated[str, typer.Option("--tool", help="The tool's name, or * for every tool.", show_default=False)],
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's calls.")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's calls.")] = None,
    arg: Annotated[list[str] | None, typer.Option("--arg", help="KEY=GLOB: the argument must match (repeatable).")] = None,
    scope: Annotated[str, typer.Option("--scope", help="run, thread or always (until removed).")] = "always",
    run: Annotated[str | None, typer.Option("--run", help="The run it is for (scope run).")] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="The thread it is for (scope thread).")] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded with the rule and its decisions).")] = "",
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Add a rule. The most specific rule that matches a call decides it; at equal specificity deny beats ask beats
    allow. The runs waiting for approval that it covers are told and ask their rules again (each decides itself,
    even if this command is stopped right after); later calls meet it at their run's next check. A rule never
    approves what the agent's own definition asks a person for."""
    from rein.core.policy import PolicyError, parse_args

    if effect not in EFFECTS:
        raise CliError(f"the effect is allow, ask or deny, not {effect!r}", EXIT_USAGE)
    if scope not in SCOPES:
        raise CliError(f"--scope is run, thread or always, not {scope!r}", EXIT_USAGE)
    try:
        args = parse_args(arg or [])
    except PolicyError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    try:
        change = with_client(address, namespace, lambda c: c.policy.add(
            effect, tool, agent=agent, tenant=tenant, args=args, scope=scope, run=run, thread=thread, reason=reason))
    except PolicyError as exc:
        raise CliError(str(exc), EXIT_USAGE if "does not parse" in str(exc) else EXIT_REJECTED) from None
    if as_json:
        print_json({"rule": change.rule.model_dump(mode="json"), "version": change.version,
                    "decided": [o.to_json() for o in change.decided]})
        return
    console = out_console()
    console.print(f"added rule {change.rule.id}: {escape(change.rule.line())} (policy version {change.version})")
    if change.rule.effect != "ask":
        console.print("the runs waiting for approval that it covers are told, and decide by it themselves "
                      "(`rein inbox` shows what still waits)", soft_wrap=True)


@policy_app.command("list")
def list_rules(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's rules.")] = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """The rules, in the order they were added."""
    rules = with_client(address, namespace, lambda c: c.policy.list(tenant=tenant))
    if as_json:
        print_json([r.model_dump(mode="json") for r in rules])
        return
    if not rules:
        out_console().print("no rules: every call that asks waits for a person")
        return
    from rich.table import Table

    table = Table()
    for name in ("id", "rule", "scope", "by", "added", "reason"):
        table.add_column(name, overflow="fold")
    for r in rules:
        table.add_row(r.id, escape(r.line()), r.scope, escape(r.by), r.at[:19], escape(r.reason))
    out_console().print(table)


@policy_app.command("remove")
def remove(
    rule_id: Annotated[str, typer.Argument(help="The rule's id (rein policy list).", show_default=False)],
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Remove a rule: from now on the calls it decided ask again (decisions already made stand)."""
    from rein.core.policy import PolicyError

    try:
        change = with_client(address, namespace, lambda c: c.policy.remove(rule_id))
    except PolicyError as exc:
        raise CliError(str(exc), EXIT_REJECTED) from None
    out_console().print(f"removed rule {change.rule.id}: {escape(change.rule.line())} (policy version {change.version})")


@policy_app.command("explain")
def explain(run_id: RunId, address: Address = None, namespace: Namespace = None, as_json: JsonFlag = False) -> None:
    """Each tool call of a run and who decided it: a person, a rule (which), a timeout, or the agent's permission;
    a pending call, what the rules say now."""
    from rein.ops.runs import describe_run

    async def go(client):  # noqa: ANN001, ANN202
        await describe_run(client, run_id)  # an unknown id: "no run with id ..." (exit 3)
        return await client.policy.explain(run_id)

    rows = with_client(address, namespace, go)
    if as_json:
        print_json([r.to_json() for r in rows])
        return
    if not rows:
        out_console().print(f"run {escape(run_id)} has made no tool calls")
        return
    from rich.table import Table

    table = Table()
    for name in ("call", "tool", "arguments", "decision", "by", "at", "reason"):
        table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(escape(r.call_id), escape(r.tool), escape(r.args), r.decision, escape(r.by), r.at[:19],
                      escape(r.reason))
    out_console().print(table)

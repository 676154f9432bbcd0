"""`rein inbox`: every decision people owe, across runs and threads (rein.durable.inbox), and decisions in bulk."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rein.cli.app import (
    EXIT_NO_WORKER,
    EXIT_QUEUED,
    EXIT_REJECTED,
    EXIT_USAGE,
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

if TYPE_CHECKING:
    from rein.client import ReinClient
    from rein.core.inbox import InboxItem
    from rein.durable.inbox import BulkOutcome

inbox_app = typer.Typer(help="Every decision people owe, across runs and threads; decide them in bulk (docs/inbox.md).",
                        invoke_without_command=True, no_args_is_help=False)
app.add_typer(inbox_app, name="inbox")

Agent = Annotated[str | None, typer.Option("--agent", help="Only this agent's runs.")]
Tenant = Annotated[str | None, typer.Option("--tenant", help="Only this tenant's runs.")]
Tool = Annotated[str | None, typer.Option("--tool", help="Only runs whose pending calls include this tool.")]
OlderThan = Annotated[str | None, typer.Option("--older-than", help="Only waits older than this (30m, 2h, 1d).")]
Limit = Annotated[int | None, typer.Option("--limit", min=1, help="At most this many.")]

OUTCOME_EXIT = (("refused", EXIT_REJECTED), ("not sent", EXIT_NO_WORKER), ("queued", EXIT_QUEUED))
"""A bulk decision's exit code: the first of these outcomes any run had (else 0)."""


def _older(text: str | None) -> timedelta | None:
    from rein.core.durations import parse_duration

    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise CliError(f"--older-than: {exc}", EXIT_USAGE) from None


async def _items(client: ReinClient, agent: str | None, tenant: str | None, tool: str | None, older: timedelta | None,
                 kind: Any = None, limit: int | None = None) -> list[InboxItem]:
    from rein.durable.inbox import InboxError

    try:
        return await client.inbox(agent=agent, tenant=tenant, tool=tool, older_than=older, kind=kind, limit=limit)
    except InboxError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _table(items: list[InboxItem], title: str) -> None:
    from rich.table import Table

    from rein.cli.render import age

    now = datetime.now(UTC)
    table = Table(title=title, title_justify="left")
    for name in ("run", "agent", "tenant", "kind", "waits for", "model said", "since", "times out"):
        table.add_column(name, overflow="fold")
    for item in items:
        table.add_row(escape(item.run_id) + (" [dim](thread)[/]" if item.thread else ""), escape(item.agent),
                      escape(item.tenant or ""), item.kind, escape(item.call_line() or "(no details: an earlier build)"),
                      escape(item.said), age(now - item.since) + " ago" if item.since else "",
                      f"in {age(item.until - now)}" if item.until else "never")
    out_console().print(table)


def item_json(item: InboxItem) -> dict[str, Any]:
    return item.model_dump(mode="json")


@inbox_app.callback()
def inbox(
    ctx: typer.Context,
    agent: Agent = None,
    tenant: Tenant = None,
    tool: Tool = None,
    older_than: OlderThan = None,
    limit: Limit = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """List what waits for people: approvals, questions, retries after a model error (oldest first)."""
    if ctx.invoked_subcommand is not None:
        return
    older = _older(older_than)
    items = with_client(address, namespace, lambda c: _items(c, agent, tenant, tool, older, limit=limit))
    if as_json:
        print_json([item_json(i) for i in items])
        return
    if not items:
        out_console().print("nothing waits for a person")
        return
    _table(items, f"{len(items)} waiting")


def _bulk(decision: str, agent: str | None, tenant: str | None, tool: str | None, older_than: str | None,
          reason: str, approver: str | None, yes: bool, address: str | None, namespace: str | None, as_json: bool) -> None:
    older = _older(older_than)

    async def go(client: ReinClient) -> tuple[list[InboxItem], list[BulkOutcome]]:
        items = await _items(client, agent, tenant, tool, older, kind="approval")
        if not items:
            return items, []
        if not yes:
            if not sys.stdin.isatty():
                raise CliError(f"{len(items)} approvals match; pass --yes to {decision} them without a terminal", EXIT_USAGE)
            _table(items, f"{decision} {len(items)} of these?")
            if not typer.confirm(f"{decision} {'these calls' if tool is None else tool + ' calls'} in {len(items)} run(s)?"):
                raise CliError("nothing decided", 1)
        return items, await client.decide_inbox(decision, items, tool=tool, reason=reason, approver=approver)  # type: ignore[arg-type]

    items, outcomes = with_client(address, namespace, go)
    if as_json:
        print_json([o.to_json() for o in outcomes])
    elif not items:
        out_console().print("nothing waits for approval that matches")
    else:
        console = out_console()
        for o in outcomes:
            style = {"applied": "green", "refused": "red", "queued": "yellow"}.get(o.outcome, "dim")
            ids = f" {', '.join(o.calls or o.decided)}" if o.decided else ""
            ids += f" (wait {o.wait})" if o.decided and o.wait else ""
            console.print(f"[{style}]{o.outcome}[/] {escape(o.run_id)}{escape(ids)}"
                          + (f" [dim]{escape(o.detail)}[/]" if o.detail else ""), soft_wrap=True)
        counts = {k: sum(o.outcome == k for o in outcomes) for k in ("applied", "refused", "queued", "not sent", "skipped")}
        err_console().print(", ".join(f"{n} {k}" for k, n in counts.items() if n))
    for outcome, code in OUTCOME_EXIT:
        if any(o.outcome == outcome for o in outcomes):
            raise typer.Exit(code)


Reason = Annotated[str, typer.Option("--reason", help="Why (recorded; a denial's reason is what the model sees).")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Decide without asking.")]
Approver = Annotated[str | None, typer.Option("--approver", help="Who decides (default: this client's identity).")]


@inbox_app.command("approve")
def approve(agent: Agent = None, tenant: Tenant = None, tool: Tool = None, older_than: OlderThan = None,
            reason: Reason = "", approver: Approver = None, yes: Yes = False, address: Address = None,
            namespace: Namespace = None, as_json: JsonFlag = False) -> None:
    """Approve every pending approval that matches (with --tool: only that tool's calls). Shows them and asks
    first (or --yes). Per run: applied, refused (why), queued, not sent. Exit 0 all applied, 5 one refused,
    8 one not sent (no worker), 11 one queued."""
    _bulk("approve", agent, tenant, tool, older_than, reason, approver, yes, address, namespace, as_json)


@inbox_app.command("deny")
def deny(agent: Agent = None, tenant: Tenant = None, tool: Tool = None, older_than: OlderThan = None,
         reason: Reason = "", approver: Approver = None, yes: Yes = False, address: Address = None,
         namespace: Namespace = None, as_json: JsonFlag = False) -> None:
    """Deny every pending approval that matches; the model is told, with --reason. Exit codes as `approve`."""
    _bulk("deny", agent, tenant, tool, older_than, reason, approver, yes, address, namespace, as_json)


@inbox_app.command("link")
def link(url: Annotated[str | None, typer.Option("--url", help="Where `rein serve` listens (default: where the last "
                                                "one started here listened, else http://127.0.0.1:8000).")] = None) -> None:
    """Print the inbox's sign-in link again: `rein serve`'s own token (kept in REIN_HOME, readable by you only) in
    the link's fragment. Whoever opens it decides as you (REIN_IDENTITY, default USER@HOST)."""
    from rein.cli.serve import served_url
    from rein.temporal.bearer import BearerAuth
    from rein.web.tokens import local_token, sign_in_link

    configured = BearerAuth.from_settings()
    if configured.token or configured.jwks_url:
        raise CliError("sign-in is configured here (REIN_CODEC_TOKEN or REIN_CODEC_JWKS_URL): people sign in with "
                       "that token, not a link", EXIT_USAGE)
    print(sign_in_link(url or served_url() or "http://127.0.0.1:8000", local_token() or ""))

"""`rein schedule`: agents on a clock, on Temporal Schedules (rein.durable.schedules, docs/schedules.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rein.cli.app import (
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
    out_console,
    print_json,
    with_client,
)

if TYPE_CHECKING:
    from rein.client import ReinClient

schedule_app = typer.Typer(help="Agents on a clock, on Temporal Schedules (docs/schedules.md).", no_args_is_help=False)
app.add_typer(schedule_app, name="schedule")

ScheduleId = Annotated[str, typer.Argument(help="The schedule's id.", show_default=False)]


@schedule_app.command("create")
def create(
    schedule_id: ScheduleId,
    agent: Annotated[str, typer.Option("--agent", "-a", help="The agent's registered name (a worker must serve it).",
                                       show_default=False)],
    prompt: Annotated[str, typer.Option("--prompt", "-p", help="What each run is asked.", show_default=False)],
    cron: Annotated[str | None, typer.Option("--cron", help='When, as cron: "0 9 * * 1-5" (UTC).')] = None,
    every: Annotated[str | None, typer.Option("--every", help="Or how often: 30s, 10m, 2h, 1d.")] = None,
    overlap: Annotated[str | None, typer.Option("--overlap", help="A start while the last run still runs: skip "
                                                "(default), buffer_one, buffer_all, cancel_other, allow_all (the "
                                                "default with --thread).")] = None,
    catchup: Annotated[str | None, typer.Option("--catchup", help="Make up starts missed within this long of an "
                                                "outage (e.g. 1h; default: Temporal's, a year).")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Whose runs: their fair share (docs/fleet.md).")] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Send the prompt to this thread instead of starting "
                                               "a run (docs/threads.md).")] = None,
    task_queue: Annotated[str | None, typer.Option("--queue", "--task-queue", help="The runs' task queue (default: "
                                                   "the agent's own, as `rein start`).")] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    no_check: Annotated[bool, typer.Option("--no-check", help="Create it even when no worker serves the agent now "
                                           "(its runs wait for one).")] = False,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a schedule that runs AGENT on PROMPT at each --cron time or --every interval.

    Exit 2 for a malformed --cron/--every/--catchup or overlap policy, 8 when no worker serves AGENT (unless
    --no-check), 1 when the id is taken."""
    from rein.durable.schedules import ScheduleError

    interval, window = _checked(cron, every, catchup, overlap)

    async def go(client: ReinClient) -> dict[str, Any]:
        from temporalio.service import RPCError, RPCStatusCode

        client.task_queue = await _runs_queue(client, agent, task_queue, no_check)
        try:
            handle = await client.schedule(schedule_id, agent=agent, prompt=prompt, cron=cron, every=interval,
                                           overlap=overlap, catchup=window, tenant=tenant, thread=thread,  # type: ignore[arg-type]
                                           paused=paused)
        except ScheduleError as err:
            raise CliError(str(err)) from None
        except ValueError as err:  # a tenant name the fleet refuses
            raise CliError(str(err), EXIT_USAGE) from None
        except RPCError as err:
            if err.status == RPCStatusCode.INVALID_ARGUMENT:  # what the server's own check of the spec refused
                raise CliError(f"the server refused the schedule: {err.message}", EXIT_USAGE) from None
            raise
        return await _described(schedule_id, await handle.describe())

    shown = with_client(address, namespace, go)
    if as_json:
        return print_json(shown)
    print(schedule_id)
    err_console().print(f"[dim]next start {shown['next'][0] if shown['next'] else 'none (paused)'}; see it with "
                        f"`rein schedule describe {escape(schedule_id)}`, its runs with `rein list --schedule "
                        f"{escape(schedule_id)}`[/]")


async def _runs_queue(client: ReinClient, agent: str, task_queue: str | None, no_check: bool) -> str:
    """Where the scheduled runs go (as `rein start`): one line and exit 8 when no worker serves the agent."""
    from rein import settings
    from rein.core.contract import agent_task_queue
    from rein.ops.worker_lookup import AgentNotServed, queue_for

    asked = task_queue or settings.current().task_queue
    if no_check:
        return asked or agent_task_queue(agent)
    try:
        return await queue_for(client, agent, asked)
    except AgentNotServed as err:
        raise CliError(f"{err}, or pass --no-check to create the schedule anyway", EXIT_NO_WORKER) from None


def _checked(cron: str | None, every: str | None, catchup: str | None, overlap: str | None) -> tuple[Any, Any]:
    """The interval and catch-up window, or one line and exit 2 for what is malformed (nothing created)."""
    from rein.durable.schedules import OVERLAPS, ScheduleError, check_cron
    from rein.durable.schedules import every as duration

    if overlap is not None and overlap not in OVERLAPS:
        raise CliError(f"unknown --overlap {overlap!r}; one of {', '.join(OVERLAPS)}", EXIT_USAGE)
    try:
        if (cron is None) == (every is None):
            raise ScheduleError("give --cron or --every (one of them)")
        if cron is not None:
            check_cron(cron)
        return (duration(every) if every is not None else None), (duration(catchup, "--catchup") if catchup is not None else None)
    except ScheduleError as err:
        raise CliError(str(err), EXIT_USAGE) from None


@schedule_app.command("list")
def list_schedules(address: Address = None, namespace: Namespace = None, as_json: JsonFlag = False) -> None:
    """rein's schedules: id, agent, what each start does, paused or not, the next start."""
    rows = with_client(address, namespace, lambda client: client.schedules())
    if as_json:
        print_json([{"schedule_id": r.schedule_id, "agent": r.agent, "what": r.what, "paused": r.paused,
                     "next": r.next_run.isoformat() if r.next_run else None, "recent_actions": r.recent} for r in rows])
        return
    if not rows:
        err_console().print("no schedules (create one with `rein schedule create ID --agent NAME --prompt TEXT --every 1h`)")
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("schedule", "agent", "does", "state", "next start"):
        table.add_column(column)
    for r in rows:
        table.add_row(escape(r.schedule_id), escape(r.agent), escape(r.what), "paused" if r.paused else "active",
                      r.next_run.strftime("%Y-%m-%d %H:%M:%S UTC") if r.next_run else "")
    out_console().print(table)


@schedule_app.command("describe")
def describe(schedule_id: ScheduleId, address: Address = None, namespace: Namespace = None, as_json: JsonFlag = False) -> None:
    """The schedule: its spec, overlap policy, state, next starts and recent runs."""
    shown = _on_schedule(address, namespace, schedule_id, lambda handle: handle.describe(), _described)
    if as_json:
        print_json(shown)
        return
    console = out_console()
    for key in ("schedule_id", "agent", "does", "spec", "overlap", "catchup", "state", "note", "next", "recent_runs",
                "skipped_overlap", "missed_catchup"):
        value = shown.get(key)
        console.print(f"[bold]{key}[/]: {escape(', '.join(map(str, value)) if isinstance(value, list) else str(value))}")


@schedule_app.command("pause")
def pause(schedule_id: ScheduleId, note: Annotated[str, typer.Option("--note", help="Why (shown in describe and the UI).")] = "",
          address: Address = None, namespace: Namespace = None) -> None:
    """Pause it: no starts until `rein schedule unpause` (runs in flight go on)."""
    _on_schedule(address, namespace, schedule_id, lambda handle: handle.pause(note=note or "paused with rein"))
    print(f"{schedule_id} paused")


@schedule_app.command("unpause")
def unpause(schedule_id: ScheduleId, note: Annotated[str, typer.Option("--note", help="Why.")] = "",
            address: Address = None, namespace: Namespace = None) -> None:
    """Start it again from the next scheduled time (missed starts within its catch-up window, `rein schedule create
    --catchup`, are made up)."""
    _on_schedule(address, namespace, schedule_id, lambda handle: handle.unpause(note=note or "unpaused with rein"))
    print(f"{schedule_id} unpaused")


@schedule_app.command("trigger")
def trigger(schedule_id: ScheduleId, address: Address = None, namespace: Namespace = None) -> None:
    """Start one now (the overlap policy applies)."""
    _on_schedule(address, namespace, schedule_id, lambda handle: handle.trigger())
    print(f"{schedule_id} triggered")


@schedule_app.command("backfill")
def backfill(
    schedule_id: ScheduleId,
    start: Annotated[str, typer.Option("--start", help="From: ISO 8601 (UTC if no zone), or a time ago (-2h).",
                                       show_default=False)],
    end: Annotated[str, typer.Option("--end", help="To: ISO 8601, now, or a time ago.", show_default=False)],
    overlap: Annotated[str, typer.Option("--overlap", help="How the backfilled starts overlap one another and the "
                                         "runs under way: allow_all (default: every one starts now), skip, "
                                         "buffer_one, buffer_all, cancel_other.")] = "allow_all",
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Make the starts the schedule would have made between --start and --end, now."""
    from temporalio.client import ScheduleBackfill

    from rein.durable.schedules import OVERLAPS

    if overlap not in OVERLAPS:
        raise CliError(f"unknown --overlap {overlap!r}; one of {', '.join(OVERLAPS)}", EXIT_USAGE)
    begin, until = _when(start, "--start"), _when(end, "--end")
    if until <= begin:
        raise CliError("--end must be after --start", EXIT_USAGE)
    window = ScheduleBackfill(start_at=begin, end_at=until, overlap=OVERLAPS[overlap])
    _on_schedule(address, namespace, schedule_id, lambda handle: handle.backfill(window))
    print(f"{schedule_id} backfilled {begin.isoformat()} .. {until.isoformat()}")


@schedule_app.command("delete")
def delete(schedule_id: ScheduleId, address: Address = None, namespace: Namespace = None) -> None:
    """Delete it (runs it started go on)."""
    _on_schedule(address, namespace, schedule_id, lambda handle: handle.delete())
    print(f"{schedule_id} deleted")


def _when(text: str, flag: str) -> datetime:
    """An ISO 8601 time (UTC if no zone), `now`, or a time ago: `-2h`, `-1d`, `-1h30m`."""
    from rein.durable.schedules import ScheduleError
    from rein.durable.schedules import every as duration

    if text.strip() == "now" or text.startswith("-"):
        try:
            return datetime.now(UTC) - (duration(text[1:], flag) if text.startswith("-") else timedelta())
        except ScheduleError as err:
            raise CliError(str(err), EXIT_USAGE) from None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"{flag} {text!r} is not an ISO 8601 time (e.g. 2026-12-01T09:00), now, or a time ago "
                       "(-2h)", EXIT_USAGE) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _on_schedule(address: str | None, namespace: str | None, schedule_id: str, act: Any, then: Any = None) -> Any:
    """`act(handle)` on the schedule, then `then(schedule_id, result)`; exit 3 when there is no such schedule."""
    async def go(client: ReinClient) -> Any:
        from temporalio.service import RPCError, RPCStatusCode

        try:
            result = await act(client.schedule_handle(schedule_id))
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise CliError(f"no schedule with id {schedule_id!r} (`rein schedule list` shows them)", EXIT_NOT_FOUND) from None
            raise
        return await then(schedule_id, result) if then is not None else result

    return with_client(address, namespace, go)


async def _described(schedule_id: str, described: Any) -> dict[str, Any]:
    from rein.durable.schedules import next_starts, row_of

    row = await row_of(schedule_id, described)
    schedule, info = described.schedule, described.info
    spec = schedule.spec
    when = [*spec.cron_expressions, *(f"every {i.every}" for i in spec.intervals)]
    return {
        "schedule_id": schedule_id, "agent": row.agent, "does": row.what, "spec": when,
        "overlap": schedule.policy.overlap.name.lower(), "catchup": str(schedule.policy.catchup_window),
        "state": "paused" if schedule.state.paused else "active", "note": schedule.state.note or "",
        "next": [t.isoformat() for t in next_starts(described)[:3]],
        "recent_runs": [getattr(a.action, "workflow_id", "") for a in info.recent_actions],
        "skipped_overlap": info.num_actions_skipped_overlap, "missed_catchup": info.num_actions_missed_catchup_window,
    }

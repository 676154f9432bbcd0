"""Agents on a clock, on Temporal's own Schedules: ReinClient's side (docs/schedules.md).

A rein schedule is a Temporal Schedule whose action starts an AgentWorkflow run of one agent with one
prompt (or, with `thread`, sends the prompt to a conversation thread: a ReinScheduledMessage run). Temporal
does the rest: overlap policies, catch-up after an outage, pause, backfill, and a record of every start.
Each scheduled run's id is `<schedule id>-<its scheduled time>` (Temporal's), and Temporal marks it with
`TemporalScheduledById`, which `rein list --schedule ID` filters on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import TypedSearchAttributes

from rein.core.contract import SCHEDULED_MESSAGE_TYPE, WORKFLOW_TYPE, AgentInput, ScheduledMessage
from rein.core.durations import parse_duration
from rein.core.summaries import run_summary
from rein.durable.fleet import run_priority
from rein.temporal.search_attributes import start_search_attributes

Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"]
OVERLAPS: dict[str, ScheduleOverlapPolicy] = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}
"""rein's names for Temporal's overlap policies (TERMINATE_OTHER is left out: it kills a run without its cleanup)."""
SCHEDULE_MEMO = "rein.schedule"


class ScheduleError(ValueError):
    """A schedule that cannot be made as asked (malformed cron, unknown overlap policy, an id in use)."""


def every(text: str, option: str = "--every") -> timedelta:
    """`10m`, `30s`, `2h`, `1d` (or a sum: `1h30m`) as a timedelta (rein.core.durations); ScheduleError naming
    `option` when it is not one, or is under a second."""
    try:
        interval = parse_duration(text)
    except ValueError as err:
        raise ScheduleError(f"{option} {err}") from None
    if interval < timedelta(seconds=1):
        raise ScheduleError(f"{option} {text!r} is shorter than a second")
    return interval


def check_cron(expression: str) -> None:
    """Five fields (minute hour day month weekday), or a Temporal shorthand (@daily, @every 10m...)."""
    fields = expression.split()
    if expression.startswith("@"):
        if expression.split()[0] not in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
                                         "@hourly", "@every"):
            raise ScheduleError(f"--cron {expression!r}: unknown shorthand")
        return
    if len(fields) != 5 or not all(re.fullmatch(r"[\d*/,\-A-Za-z?LW#]+", f) for f in fields):
        raise ScheduleError(f"--cron {expression!r} is not a cron expression: five fields, minute hour day month "
                            "weekday (e.g. \"0 9 * * 1-5\")")


@dataclass
class ScheduleRow:
    schedule_id: str
    agent: str
    what: str
    paused: bool
    next_run: datetime | None
    recent: int


class ScheduleClient:
    """ReinClient's schedule methods (its `client` and `task_queue`)."""

    client: Client
    task_queue: str

    async def schedule(
        self,
        schedule_id: str,
        *,
        agent: str,
        prompt: str,
        cron: str | None = None,
        every: timedelta | str | None = None,
        overlap: Overlap | None = None,
        catchup: timedelta | str | None = None,
        tenant: str | None = None,
        thread: str | None = None,
        paused: bool = False,
        note: str = "",
    ) -> ScheduleHandle:
        """Create a schedule that runs `agent` on `prompt` at each `cron` time (or `every` interval), on this
        client's task queue; with `thread`, each start sends `prompt` to that thread instead. `overlap`: what a
        start does while the previous run still runs (skip, buffer_one, buffer_all, cancel_other, allow_all);
        `catchup`: how far back missed starts are made up after an outage (`1h` or a timedelta; Temporal's default:
        a year). `tenant`: whose runs (their fair share and ReinTenant; a thread's too). The default
        overlap is `skip` for runs and `allow_all` for messages to a thread (each start only sends a message;
        the thread queues it). Returns temporalio's ScheduleHandle (describe, pause, unpause, trigger, backfill,
        delete)."""
        overlap = overlap or ("allow_all" if thread is not None else "skip")
        spec = _spec(cron, every)
        if overlap not in OVERLAPS:
            raise ScheduleError(f"unknown overlap policy {overlap!r}; one of {', '.join(OVERLAPS)}")
        run_priority(tenant)  # a bad tenant name: told now, not at the first start
        action = await self._action(schedule_id, agent, prompt, tenant, thread)
        schedule = Schedule(
            action=action,
            spec=spec,
            policy=SchedulePolicy(overlap=OVERLAPS[overlap],
                                  catchup_window=_catchup(catchup)),
            state=ScheduleState(paused=paused, note=note or f"rein schedule of {agent}"),
        )
        from temporalio.client import ScheduleAlreadyRunningError

        try:
            what = f"message to thread {thread}" if thread is not None else prompt[:60]
            return await self.client.create_schedule(schedule_id, schedule,
                                                     memo={SCHEDULE_MEMO: {"agent": agent, "does": what}})
        except ScheduleAlreadyRunningError:
            raise ScheduleError(f"a schedule with id {schedule_id!r} exists already") from None

    async def _action(self, schedule_id: str, agent: str, prompt: str, tenant: str | None,
                      thread: str | None) -> ScheduleActionStartWorkflow:
        attributes = await start_search_attributes(self.client, agent, tenant=tenant) or TypedSearchAttributes.empty
        if thread is not None:  # the thread it may start gets the run's attributes; its priority is inherited
            message = ScheduledMessage(thread_id=thread, agent=agent, text=prompt,
                                       attributes={pair.key.name: pair.value for pair in attributes})
            return ScheduleActionStartWorkflow(
                SCHEDULED_MESSAGE_TYPE, args=[message], id=f"{schedule_id}-message", task_queue=self.task_queue,
                static_summary=f"scheduled message to thread {thread}"[:200], priority=run_priority(tenant, None),
            )
        return ScheduleActionStartWorkflow(
            WORKFLOW_TYPE,
            args=[AgentInput(agent=agent, prompt=prompt).model_dump(mode="json", exclude_none=True, exclude_defaults=True)],
            id=schedule_id,  # Temporal appends each start's scheduled time
            task_queue=self.task_queue,
            static_summary=run_summary(agent, prompt),
            typed_search_attributes=attributes,
            priority=run_priority(tenant, None),
        )

    def schedule_handle(self, schedule_id: str) -> ScheduleHandle:
        return self.client.get_schedule_handle(schedule_id)

    async def schedules(self) -> list[ScheduleRow]:
        """rein's schedules (those this client's kind made), with their next start."""
        rows = []
        async for listed in await self.client.list_schedules():
            if not (await listed.memo()).get(SCHEDULE_MEMO):
                continue
            rows.append(await row_of(listed.id, await self.schedule_handle(listed.id).describe()))
        return rows


def _catchup(window: timedelta | str | None) -> timedelta | None:
    return every(window, "--catchup") if isinstance(window, str) else window


def _spec(cron: str | None, interval: timedelta | str | None) -> ScheduleSpec:
    if (cron is None) == (interval is None):
        raise ScheduleError("give --cron or --every (one of them)")
    if cron is not None:
        check_cron(cron)
        return ScheduleSpec(cron_expressions=[cron])
    assert interval is not None
    return ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every(interval) if isinstance(interval, str) else interval)])


async def row_of(schedule_id: str, described: Any) -> ScheduleRow:
    """A schedule at a glance: its agent and what it does come from the memo rein wrote at create."""
    made = (await described.memo()).get(SCHEDULE_MEMO)
    made = made if isinstance(made, dict) else {}
    agent, what = str(made.get("agent", "")), str(made.get("does", ""))
    upcoming = next_starts(described)
    return ScheduleRow(schedule_id=schedule_id, agent=agent, what=what, paused=described.schedule.state.paused,
                       next_run=upcoming[0] if upcoming else None, recent=len(described.info.recent_actions))


def next_starts(described: Any) -> list[Any]:
    """When the schedule starts next: none while it is paused (the server lists the times its spec gives)."""
    return [] if described.schedule.state.paused else list(described.info.next_action_times)

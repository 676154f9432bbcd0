"""What ops tooling reads about runs: list rows and one run's detail.

Visibility (search attributes) answers for every run; the `status` and `steps` queries
come from a worker when one serves the run, else from its replayed history
(rein.temporal.history); a finished run's result is read from its history.
The CLI renders these; nothing here prints.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import (
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.exceptions import CancelledError
from temporalio.service import RPCError

from rein.core.contract import (
    CALL_MODEL,
    FORK_MEMO,
    RUN_TOOL,
    SEARCH_KEYS,
    RunOutcome,
    RunStatusView,
)
from rein.core.ir import ToolCall, Usage
from rein.core.result import Interrupt, Step
from rein.core.summaries import tool_summary
from rein.core.threads import THREAD_MEMO
from rein.durable.run_lookup import RunNotFound, is_not_found, list_query  # noqa: F401  (public here too)
from rein.ops.run_build import RunBuild, run_build
from rein.temporal import history
from rein.temporal.run_status import status_of

if TYPE_CHECKING:
    from rein.client import ReinClient

_AGENT = SEARCH_KEYS["ReinAgent"]
_STATUS = SEARCH_KEYS["ReinStatus"]
_ITERATIONS = SEARCH_KEYS["ReinIterations"]
_TOKENS = SEARCH_KEYS["ReinTokens"]
_COST = SEARCH_KEYS["ReinCostUsd"]
_TENANT = SEARCH_KEYS["ReinTenant"]

_WAITS_FOR = {"waiting_approval": "approval", "waiting_input": "input", "waiting_retry": "retry"}


@dataclass
class RunRow:
    """One line of `rein list`."""

    id: str
    agent: str
    status: str
    iterations: int | None
    tokens: int | None
    waits_for: str
    started: datetime
    closed: datetime | None
    cost_usd: float | None = None
    tenant: str | None = None

    def age(self, now: datetime | None = None) -> timedelta:
        return (now or datetime.now(UTC)) - self.started

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.id, "agent": self.agent, "status": self.status, "iterations": self.iterations,
            "tokens": self.tokens, "waits_for": self.waits_for, "started": self.started.isoformat(),
            "closed": self.closed.isoformat() if self.closed else None, "cost_usd": self.cost_usd,
            "tenant": self.tenant,
        }


def waits_for(view: RunStatusView | None, status: str) -> str:
    """What a paused run needs from a person, in a few words."""
    kind = _WAITS_FOR.get(status)
    if kind is None:
        return ""
    if view is None or view.interrupt is None:
        return kind
    if view.interrupt.type == "need_approval" and view.pending_tool_calls:
        return "approval: " + ", ".join(tool_summary(c, 60).removeprefix("tool ") for c in view.pending_tool_calls)
    message = " ".join(view.interrupt.message.split())
    return f"{kind}: {message[:80]}" if message else kind


async def list_runs(client: ReinClient, status: str | None = None, agent: str | None = None,
                    limit: int = 50, fork_of: str | None = None, tenant: str | None = None,
                    schedule: str | None = None, eval_of: str | None = None, include_evals: bool = False) -> list[RunRow]:
    """`rein list`'s rows, newest first: what-if runs (`rein eval`) only with `include_evals` or `eval_of`."""
    query = list_query(status, agent, fork_of, tenant, schedule, eval_of, include_evals)
    # Newest first. SQL visibility has no ORDER BY and lists open runs before closed ones, so an
    # old run still waiting would hide today's finished ones: take the newest of both kinds.
    open_runs, closed_runs = await asyncio.gather(*(
        _executions(client, f"{query} AND {which}", limit)
        for which in ('ExecutionStatus="Running"', 'ExecutionStatus!="Running"')
    ))
    executions = sorted(open_runs + closed_runs, key=lambda e: e.start_time, reverse=True)[:limit]
    views = await asyncio.gather(*(
        _query_status(client, e.id) if status_of(e) in _WAITS_FOR else _none() for e in executions
    ))
    rows = []
    for execution, view in zip(executions, views, strict=False):
        attributes = execution.typed_search_attributes
        run_status = status_of(execution)
        rows.append(RunRow(
            id=execution.id,
            agent=attributes.get(_AGENT) or "",
            status=run_status,
            iterations=view.iteration if view else attributes.get(_ITERATIONS),
            tokens=view.usage.total_tokens if view else attributes.get(_TOKENS),
            waits_for=waits_for(view, run_status),
            started=execution.start_time,
            closed=execution.close_time,
            cost_usd=view.usage.cost_usd if view else attributes.get(_COST),
            tenant=attributes.get(_TENANT),
        ))
    return rows


async def _executions(client: ReinClient, query: str, limit: int) -> list[WorkflowExecution]:
    return [e async for e in client.client.list_workflows(query, limit=limit)]


async def _none() -> None:
    return None


async def _query_status(client: ReinClient, run_id: str) -> RunStatusView | None:
    """The status query (replayed from history when no worker serves the run), or None when neither answers."""
    try:
        return await client.status(run_id)
    except Exception as err:
        if is_not_found(err):
            raise RunNotFound(run_id) from None
        return None


async def _steps(client: ReinClient, run_id: str) -> list[Step] | None:
    try:
        return await client.steps(run_id)
    except Exception:
        return None


@dataclass
class RunDetail:
    """`rein status` / `rein show`: a run's state from the best source that answers."""

    id: str
    agent: str
    status: str
    summary: str | None
    started: datetime
    closed: datetime | None
    iteration: int | None
    usage: Usage | None
    stage: str | None = None
    interrupt: Interrupt | None = None
    pending_tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None
    error: str | None = None
    """Why a failed run failed."""
    output: str | None = None
    steps: list[Step] | None = None
    """None when no worker answered and the run has not finished."""
    ignored_signals: int = 0
    pause: int = 0
    """How many times the run has paused so far (each pause is one `interrupt` on its stream)."""
    live: bool = True
    """False when the run is open but no worker answered: the data is visibility's."""
    served: bool | None = None
    """Open runs: whether a worker answered for it (False: its state was replayed from history, or read
    from what the run published: `source`)."""
    source: str | None = None
    """Open runs: where the state came from: "worker" (a query), "history" (replayed here), "published"
    (the run's search attributes in its description: a running run no worker answers for), or None
    (neither answered: visibility's values, `live` False)."""
    task_queue: str | None = None
    fork_of: dict[str, Any] | None = None
    """A fork's lineage (rein.durable.fork.FORK_MEMO): the run it came from, the step, the edits, who asked."""
    tenant: str | None = None
    """The run's tenant (Temporal fairness key, ReinTenant)."""
    turns: int | None = None
    """A conversation thread's turns so far (its `usage` is then every turn's, not the last one's)."""
    build: RunBuild | None = None
    """Open runs of a versioned queue: the build the run waits for (rein.ops.run_build)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.id,
            "tenant": self.tenant,
            "turns": self.turns,
            "agent": self.agent,
            "status": self.status,
            "stage": self.stage,
            "iteration": self.iteration,
            "usage": self.usage.model_dump(mode="json") if self.usage else None,
            "interrupt": self.interrupt.model_dump(mode="json") if self.interrupt else None,
            "wait": self.interrupt.wait if self.interrupt else None,
            "pending_tool_calls": [c.model_dump(mode="json") for c in self.pending_tool_calls],
            "stop_reason": self.stop_reason,
            "ignored_signals": self.ignored_signals,
            "error": self.error,
            "output": self.output,
            "summary": self.summary,
            "started": self.started.isoformat(),
            "closed": self.closed.isoformat() if self.closed else None,
            "live": self.live,
            "served": self.served,
            "source": self.source,
            "task_queue": self.task_queue,
            "fork_of": self.fork_of,
            "build": self.build.to_json() if self.build else None,
        }


async def _running(client: ReinClient, run_id: str, description: Any, detail: RunDetail, steps: bool) -> RunDetail:
    """An open run's detail: from the worker that serves it, else its published state (no replay), else history."""
    published = published_status(description)
    try:
        queue = await history.describe_queue(client.client, description.task_queue)
    except RPCError:
        queue = None
    serving = history.polled_in(queue, history.pinned_build(description), current=True) if queue is not None else True
    with contextlib.suppress(RPCError):  # which build it waits for: said when the server says
        detail.build = await run_build(client.client, description, queue) if queue is not None else None
    try:
        raw, detail.served = await history.answer(client.client, run_id, "status", serving=serving,
                                                  published=published)
        view: RunStatusView | None = None if raw is published else RunStatusView.model_validate(raw)
    except Exception as err:
        if is_not_found(err):
            raise RunNotFound(run_id) from None
        raw = view = None
    if raw is not None and raw is published:  # no worker answered: the run's description says it all
        detail.source, detail.live, detail.stage = "published", False, published["stage"]
        if steps:
            detail.steps = await _steps(client, run_id)
        return detail
    if view is None:
        detail.live = False
        return detail
    detail.source = "worker" if detail.served else "history"
    detail.status, detail.stage, detail.iteration, detail.usage = view.status, view.stage, view.iteration, view.usage
    detail.interrupt, detail.pending_tool_calls = view.interrupt, view.pending_tool_calls
    detail.stop_reason, detail.ignored_signals, detail.pause = view.stop_reason, view.ignored_signals, view.pause
    if steps:
        detail.steps = await _steps(client, run_id)
    return detail


async def describe_run(client: ReinClient, run_id: str, *, steps: bool = False) -> RunDetail:
    """Everything `rein status`/`show` print. Raises RunNotFound for an unknown id."""
    handle = client.handle(run_id)
    try:
        description = await handle.describe()
    except RPCError as err:
        if is_not_found(err):
            raise RunNotFound(run_id) from None
        raise
    attributes = description.typed_search_attributes
    tokens = attributes.get(_TOKENS)
    detail = RunDetail(
        id=run_id,
        agent=attributes.get(_AGENT) or "",
        status=status_of(description),
        summary=await description.static_summary(),
        started=description.start_time,
        closed=description.close_time,
        iteration=attributes.get(_ITERATIONS),
        usage=Usage(input_tokens=0, output_tokens=tokens, cost_usd=attributes.get(_COST)) if tokens is not None else None,
        fork_of=await _lineage(description),
        tenant=attributes.get(_TENANT),
    )
    detail.task_queue = description.task_queue
    if (await description.memo()).get(THREAD_MEMO):
        return await _thread_totals(client, await _described(client, run_id, description, detail, steps))
    return await _described(client, run_id, description, detail, steps)


async def _thread_totals(client: ReinClient, detail: RunDetail) -> RunDetail:
    """A thread's usage is every turn's (its runs' status counts the turn under way, or the last)."""
    try:
        view = await client.thread(detail.id)
    except Exception:  # neither a worker nor this build's replay answers: the turn's usage, as the run said it
        return detail
    detail.usage, detail.turns = view.usage, view.turns
    return detail


async def _described(client: ReinClient, run_id: str, description: Any, detail: RunDetail, steps: bool) -> RunDetail:
    if description.status == WorkflowExecutionStatus.RUNNING:
        return await _running(client, run_id, description, detail, steps)
    handle = client.handle(run_id)
    try:
        result: RunOutcome = await handle.result(follow_runs=False)
    except WorkflowFailureError as err:
        if isinstance(err.cause, CancelledError) and (ended := await _cancelled_outcome(client, run_id)):
            return await _ended(client, detail, ended, steps)
        detail.error = failure_message(err)
        if steps:
            detail.steps = await _steps(client, run_id)
        return detail
    except Exception as err:  # continued-as-new and the like: the chain's latest run tells
        detail.error = str(err)
        return detail
    # the result is slim: the steps come from the `steps` queries
    return await _ended(client, detail, result, steps)


_STAGES = {CALL_MODEL: "call_model", RUN_TOOL: "run_tools"}


def published_status(description: Any) -> dict[str, Any] | None:
    """A running run's `status` query answer as far as its description shows it, or None where the run
    has not published all a status shows (workflows/publishing.py publishes ReinStatus and counters).

    Only a run that published `running` (ReinClient.start sets it; a run's first upsert otherwise): it
    waits for nobody, so it has no interrupt, no pending decision and no stop reason, and its stage is
    the activity it has scheduled. A waiting run's interrupt and tool calls, and a stuck run, are not
    published: those need the query or the replay. Iterations and tokens are the run's last published
    counters (refreshed now and then while it runs), None before its first refresh.
    """
    attributes = description.typed_search_attributes
    if status_of(description) != "running" or attributes.get(_STATUS) != "running":
        return None
    scheduled = {_STAGES.get(a.activity_type.name) for a in description.raw_description.pending_activities}
    tokens = attributes.get(_TOKENS)
    return {
        "status": "running",
        "stage": next(iter(scheduled)) if len(scheduled) == 1 else None,
        "iteration": attributes.get(_ITERATIONS),
        "usage": Usage(input_tokens=0, output_tokens=tokens or 0, cost_usd=attributes.get(_COST)).model_dump(mode="json")
        if tokens is not None else None,
        "interrupt": None,
        "pending_tool_calls": [],
        "stop_reason": None,
    }


async def _ended(client: ReinClient, detail: RunDetail, result: RunOutcome, steps: bool) -> RunDetail:
    detail.status = "cancelled" if result.stop_reason == "cancelled" else "done"
    detail.stage = "done"
    detail.iteration = result.iterations
    detail.usage = result.usage
    detail.stop_reason = result.stop_reason
    detail.output = result.output
    if steps:
        detail.steps = await _steps(client, detail.id)
    return detail


async def _cancelled_outcome(client: ReinClient, run_id: str) -> RunOutcome | None:
    """A run closed as CANCELED: its outcome from the `outcome` query (None: cancelled by Temporal
    before rein's code could end it)."""
    try:
        answer = await history.query(client.client, run_id, "outcome")
    except Exception:  # a history from before the query, or one that cannot be replayed here
        return None
    return RunOutcome.model_validate(answer) if answer is not None else None


async def _lineage(description: Any) -> dict[str, Any] | None:
    try:
        return await description.memo_value(FORK_MEMO, None)
    except Exception:  # a memo some other tool wrote under this key: no lineage to show
        return None


def failure_message(err: WorkflowFailureError) -> str:
    """The innermost cause's message: what actually went wrong, not the wrapper."""
    cause: BaseException | None = err.cause
    message = str(err)
    while cause is not None:
        message = getattr(cause, "message", None) or str(cause) or message
        cause = cause.__cause__
    return message


async def cancel_reason(client: ReinClient, run_id: str) -> str:
    """Why a cancelled run was cancelled (its `cancel` decision's reason), read by replaying its history."""
    from rein.temporal.history import replayed

    try:
        instance = (await replayed(client.client, run_id)).instance
    except Exception:  # a history this code cannot replay: the fact without the reason
        return "no reason recorded"
    return getattr(instance, "cancel_reason", None) or "no reason given"


def was_cancelled(err: BaseException) -> bool:
    """The error a result read raises for a run that closed as Temporal's CANCELED."""
    from temporalio.exceptions import CancelledError

    from rein.core.errors import RunFailed

    if isinstance(err, RunFailed):
        return err.error_type == "CancelledError"
    return isinstance(err, WorkflowFailureError) and isinstance(err.cause, CancelledError)

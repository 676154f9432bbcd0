"""What-if (`rein eval`, `ReinClient.eval`): recorded runs replayed against a changed agent, compared.

Each recorded run's input starts a run of the changed agent, a durable run like any other (limits, tenant
shares, budgets, traces) marked `ReinEvalOf`. Its AgentInput.eval carries the recorded run's tool calls:
the same call gets the recorded result and the tool does not run; a new call ends the run, `diverged`,
unless its tool may run again (rein.core.evals). Then the two runs are compared step by step.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory

from rein.core import evals
from rein.core.contract import SEARCH_KEYS, WORKFLOW_TYPE, AgentInput, RunOutcome
from rein.core.errors import RunFailed
from rein.core.ir import Message
from rein.core.result import RunResult
from rein.core.session import Session
from rein.durable.run_lookup import RunNotFound, is_not_found, list_query
from rein.durable.runs_client import RunsClient

if TYPE_CHECKING:
    from temporalio.converter import DataConverter

    from rein.blueprint.agent import Agent

log = logging.getLogger("rein.eval")
EVAL_MEMO = "rein.eval"
"""A what-if run's memo and metadata key: {"of": the recorded run's id}."""
DEFAULT_CONCURRENCY = 4

Scorer = Callable[["RecordedRun", RunResult], "float | bool | Awaitable[float | bool]"]
"""A scorer: (recorded run, what-if run's result) -> a score; 1.0 (or True) passes unless the scorer has
a `threshold` attribute. Its `name` attribute (else its function name) heads its column."""


class EvalError(ValueError):
    """The eval cannot start: a selection that finds nothing, a run that cannot be read. One line."""


@dataclass
class RecordedRun:
    """A finished run as it was recorded: its input (as its client started it) and its result."""

    run_id: str
    request: AgentInput
    result: RunResult
    tenant: str | None = None


class EvalRow(BaseModel):
    """One recorded run against its what-if run."""

    recorded: str
    run: str = ""
    """The what-if run's workflow id."""
    verdict: evals.Verdict = "failed"
    first_difference: int | None = None
    """The what-if run's step where its tool calls first differ from the recorded run's (None: the same)."""
    diverged: str = ""
    same_output: bool = False
    output: str | None = None
    recorded_output: str | None = None
    reused: int = 0
    """Tool calls answered with the recorded result (the tool did not run)."""
    ran: int = 0
    """Tool calls that ran (tools marked `replay="run"`)."""
    scores: dict[str, float] = Field(default_factory=dict)
    passed: dict[str, bool] = Field(default_factory=dict)
    tokens: int = 0
    recorded_tokens: int = 0
    cost_usd: float | None = None
    recorded_cost_usd: float | None = None
    elapsed_s: float | None = None
    recorded_elapsed_s: float | None = None
    error: str = ""

    @property
    def matched(self) -> bool:
        return self.verdict == "match"


class EvalReport(BaseModel):
    agent: str
    rows: list[EvalRow] = Field(default_factory=list)

    @property
    def matched(self) -> int:
        return sum(r.matched for r in self.rows)

    @property
    def share(self) -> float:
        """The share of runs that match (1.0 with no runs)."""
        return self.matched / len(self.rows) if self.rows else 1.0

    def count(self, verdict: str) -> int:
        return sum(r.verdict == verdict for r in self.rows)

    def summary(self) -> str:
        """One line: how many match, how the others went, and the spend against the recorded runs."""
        tokens, recorded = sum(r.tokens for r in self.rows), sum(r.recorded_tokens for r in self.rows)
        return (f"{self.matched}/{len(self.rows)} runs match ({self.share:.0%}) for {self.agent}: "
                f"{self.count('differ')} differ, {self.count('diverged')} diverged, {self.count('failed')} failed; "
                f"{tokens} tokens against {recorded} recorded")

    def as_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "matched": self.matched, "total": len(self.rows), "share": self.share,
                **{verdict: self.count(verdict) for verdict in ("differ", "diverged", "failed")},
                "summary": self.summary(), "rows": [r.model_dump(mode="json") for r in self.rows]}


async def eval_runs(client: RunsClient, agent: Agent | str, *, runs: Sequence[str] | None = None,
                    since: timedelta | str | None = None, name: str | None = None, limit: int | None = None,
                    scorers: Sequence[Scorer] = (), concurrency: int = DEFAULT_CONCURRENCY,
                    task_queue: str | None = None, on_row: Callable[[EvalRow], None] | None = None) -> EvalReport:
    """`ReinClient.eval`: select the recorded runs, read them, replay them against `agent`, compare. `on_row`
    hears each row as its what-if run is compared (progress)."""
    if isinstance(since, str):
        from rein.core.durations import parse_duration

        since = parse_duration(since)
    if limit is not None and limit < 1:
        raise EvalError(f"limit must be 1 or more, got {limit}")
    if not runs:
        recorded_name = name or (agent if isinstance(agent, str) else agent.name)
        runs = await select_runs(client, name=recorded_name, since=since, limit=limit)
        if not runs:
            window = f" started in the last {since}" if since is not None else ""
            raise EvalError(f"no finished runs of agent {recorded_name!r}{window} to replay")
    reading = asyncio.Semaphore(8)  # each read is RPCs, then (with no worker serving it) a replay here

    async def read(run_id: str) -> RecordedRun:
        async with reading:
            return await recorded_run(client, run_id)

    recorded = list(await asyncio.gather(*(read(run_id) for run_id in runs)))
    return await evaluate(client, agent, recorded, scorers=scorers, concurrency=concurrency, task_queue=task_queue,
                          on_row=on_row)


# ---------------------------------------------------------------- the recorded runs


async def select_runs(client: RunsClient, *, name: str | None, since: timedelta | None = None,
                      limit: int | None = None) -> list[str]:
    """Completed top-level runs of agent `name` (newest first), what-if runs and threads left out."""
    from rein.core.threads import THREAD_MEMO

    query = list_query(agent=name) + ' AND ExecutionStatus="Completed"'
    if since is not None:
        query += f' AND StartTime > "{(datetime.now(UTC) - since).strftime("%Y-%m-%dT%H:%M:%SZ")}"'
    found: list[str] = []
    async for execution in client.client.list_workflows(query):
        if (execution.parent_id or execution.typed_search_attributes.get(SEARCH_KEYS["ReinEvalOf"])
                or THREAD_MEMO in (await execution.memo())):
            continue
        found.append(execution.id)
        if limit is not None and len(found) >= limit:
            break
    return found


async def recorded_run(client: RunsClient, run_id: str) -> RecordedRun:
    """A finished run, read from the server: the first run's input, the chain's result."""
    try:
        description = await client.client.get_workflow_handle(run_id).describe()
    except Exception as err:
        if is_not_found(err):
            raise RunNotFound(run_id) from None
        raise
    if description.status == WorkflowExecutionStatus.RUNNING:
        raise EvalError(f"run {run_id} has not finished: only finished runs are replayed")
    first = description.raw_description.workflow_execution_info.first_run_id or description.run_id
    history = await client.client.get_workflow_handle(run_id, run_id=first).fetch_history()
    request = await start_input(history, client.client.data_converter)
    try:
        result = await client.result(run_id)
    except RunFailed as err:
        raise EvalError(f"{err}: only runs that finished are replayed") from None
    return RecordedRun(run_id, request, result, description.typed_search_attributes.get(SEARCH_KEYS["ReinTenant"]))


async def start_input(history: WorkflowHistory, converter: DataConverter) -> AgentInput:
    """The AgentInput a history's run was started with (decoded, as its worker read it)."""
    started = history.events[0].workflow_execution_started_event_attributes
    payloads = list(started.input.payloads)
    if len(payloads) != 1:
        raise EvalError(f"run {history.workflow_id} was not started with one AgentWorkflow input")
    [raw] = await converter.decode(payloads, [dict])
    return AgentInput.model_validate(raw)


async def recorded_from_history(client: RunsClient, history: WorkflowHistory) -> RecordedRun:
    """A finished run from its exported history alone (`rein history export`), replayed in this process."""
    from rein.temporal.history import replay_history

    request = await start_input(history, client.client.data_converter)
    instance = (await replay_history(client.client, history.workflow_id, history)).instance
    outcome: RunOutcome | None = instance.final
    if outcome is None:
        raise EvalError(f"history {history.workflow_id} is of a run that has not finished")
    result = RunResult(status=outcome.status, output=outcome.output, data=outcome.data,
                       stop_reason=outcome.stop_reason, usage=outcome.usage, elapsed_s=outcome.elapsed_s,
                       run_id=history.workflow_id, session=instance.session,
                       steps=[s.model_copy(update={"index": i}) for i, s in enumerate(instance.steps)])
    return RecordedRun(history.workflow_id, request, result)


# ---------------------------------------------------------------- the what-if runs


async def evaluate(client: RunsClient, agent: Agent | str, recorded: Sequence[RecordedRun], *,
                   scorers: Sequence[Scorer] = (), concurrency: int = DEFAULT_CONCURRENCY,
                   task_queue: str | None = None, on_row: Callable[[EvalRow], None] | None = None) -> EvalReport:
    """Replay each recorded run against `agent` and compare. An Agent runs on a worker in this process, on a
    queue of its own (the fleet's workers keep serving their own definition); a name runs on the workers
    of `task_queue` (default the client's): a new build deployed beside the current one."""
    if concurrency < 1:
        raise EvalError(f"concurrency must be 1 or more, got {concurrency}")
    from rein.temporal.search_attributes import ensure_search_attributes

    await ensure_search_attributes(client.client)  # ReinEvalOf, where the fleet's workers are of a build before it
    if isinstance(agent, str):
        return await _evaluate_on(client, agent, None, task_queue or client.task_queue, recorded, scorers, concurrency,
                                  on_row)
    from rein.durable.temporal_worker import create_worker

    queue = task_queue or f"rein-eval-{uuid.uuid4().hex[:8]}"
    await copy_model_limit(client, agent.model_label, queue)
    # Its model calls stay on its own queue: the fleet's model workers serve the fleet's definition.
    async with create_worker(client.client, [agent], task_queue=queue, route_models=False):
        return await _evaluate_on(client, agent.name, agent.system, queue, recorded, scorers, concurrency, on_row)


async def copy_model_limit(client: RunsClient, model: str, queue: str) -> None:
    """The fleet's rate limit and tenant shares for `model`'s provider (`rein limits set --model`), set on the
    what-if runs' own queue: what-if runs keep to the vendor's rate on their own, beside the fleet's."""
    from temporalio.service import RPCError

    from rein.core.contract import model_queue
    from rein.durable.fleet import provider_queue, queue_limits, set_limits

    try:
        limits = await queue_limits(client.client, provider_queue(model) or model_queue(model))
        if limits.rps is not None or limits.tenant_rps is not None or limits.weights:
            await set_limits(client.client, queue=queue, rps=limits.rps, tenant_rps=limits.tenant_rps,
                             weights=limits.weights or None, reason="rein eval: the fleet's limit for the model")
    except RPCError as err:  # a server without task queue configs (the time-skipping test server)
        log.info("what-if runs without the model's rate limit: %s", err.message)


async def _evaluate_on(client: RunsClient, name: str, system: str | None, queue: str, recorded: Sequence[RecordedRun],
                       scorers: Sequence[Scorer], concurrency: int, on_row: Callable[[EvalRow], None] | None) -> EvalReport:
    gate = asyncio.Semaphore(concurrency)

    async def one(run: RecordedRun) -> EvalRow:
        async with gate:
            row = await _what_if(client, name, system, queue, run, scorers)
        if on_row is not None:
            on_row(row)
        return row

    return EvalReport(agent=name, rows=list(await asyncio.gather(*(one(r) for r in recorded))))


async def _what_if(client: RunsClient, name: str, system: str | None, queue: str, run: RecordedRun,
                   scorers: Sequence[Scorer]) -> EvalRow:
    row = _recorded_row(run)
    if run.request.thread:
        row.error = "a thread: replay its turns as runs (docs/evals.md)"
        return row
    plan = evals.EvalPlan(of=run.run_id, calls=evals.recorded_calls(run.result.session, run.result.steps))
    try:
        handle = await _start(client, name, system, queue, run, plan)
        row.run = handle.id
        outcome = await client.outcome(handle)
        replayed = await client.full_result(handle.id, outcome)
    except RunFailed as err:
        row.error = str(err)
        return row
    _compare(row, run, replayed, outcome, plan)
    await _score(row, run, replayed, scorers)
    row.verdict = _verdict(row, bool(scorers))
    return row


def _recorded_row(run: RecordedRun) -> EvalRow:
    usage = run.result.usage
    return EvalRow(recorded=run.run_id, recorded_output=run.result.output, recorded_tokens=usage.total_tokens,
                   recorded_cost_usd=usage.cost_usd, recorded_elapsed_s=run.result.elapsed_s)


async def _start(client: RunsClient, name: str, system: str | None, queue: str, run: RecordedRun,
                 plan: evals.EvalPlan) -> Any:
    """Start the what-if run: the recorded input (with the changed agent's system prompt), its recorded calls."""
    from rein.durable.fleet import run_priority
    from rein.temporal.search_attributes import start_search_attributes

    original = run.request
    request = AgentInput(agent=name, prompt=original.prompt, session=_with_system(original.session, system),
                         config=original.config, metadata={**original.metadata, EVAL_MEMO: {"of": run.run_id}},
                         eval=plan)
    return await client.client.start_workflow(
        WORKFLOW_TYPE,
        request.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
        id=f"{run.run_id}-eval-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
        result_type=RunOutcome,
        static_summary=f"what-if of {run.run_id}"[:200],
        memo={EVAL_MEMO: {"of": run.run_id}},
        search_attributes=await start_search_attributes(client.client, name, tenant=run.tenant, eval_of=run.run_id),
        priority=run_priority(run.tenant),
    )


def _with_system(session: Session | None, system: str | None) -> Session | None:
    """A recorded input Session with the changed agent's system prompt in place of the recorded one."""
    if session is None or system is None or not session.messages or session.messages[0].role != "system":
        return session
    return session.model_copy(update={"messages": [Message(role="system", content=system), *session.messages[1:]]})


def _compare(row: EvalRow, run: RecordedRun, replayed: RunResult, outcome: RunOutcome, plan: evals.EvalPlan) -> None:
    calls = [c for m in replayed.session.messages for c in m.tool_calls or ()
             if any(t.tool_call_id == c.id for t in replayed.session.messages if t.role == "tool")]
    row.reused = sum(plan.find(c) is not None for c in calls)
    row.ran = len(calls) - row.reused
    row.diverged = outcome.diverged
    row.first_difference = evals.first_difference(run.result.steps, replayed.steps)
    row.output = replayed.output
    row.same_output = replayed.output == run.result.output
    row.tokens, row.cost_usd, row.elapsed_s = replayed.usage.total_tokens, replayed.usage.cost_usd, replayed.elapsed_s


async def _score(row: EvalRow, run: RecordedRun, replayed: RunResult, scorers: Sequence[Scorer]) -> None:
    for scorer in scorers:
        name = str(getattr(scorer, "name", None) or getattr(scorer, "__name__", None) or type(scorer).__name__)
        try:
            value = scorer(run, replayed)
            if inspect.isawaitable(value):
                value = await value
        except Exception as err:  # noqa: BLE001 - a scorer's failure is that row's, said in it
            row.error = f"scorer {name} failed: {type(err).__name__}: {err}"[:500]
            value = 0.0
        row.scores[name] = float(value)
        row.passed[name] = float(value) >= float(getattr(scorer, "threshold", 1.0))


def _verdict(row: EvalRow, scored: bool) -> evals.Verdict:
    if row.error:
        return "failed"
    if row.diverged:
        return "diverged"
    same = row.first_difference is None and (all(row.passed.values()) if scored else row.same_output)
    return "match" if same else "differ"

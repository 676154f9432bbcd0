"""Fork a run from any step into a new run; the original is only read, never touched.

The Session as it stood right after step N is rebuilt by replaying the history of the run
(of a continue-as-new chain) that recorded step N, with the workflow code alone: nothing is
executed again, no model is called. The fork is a new AgentWorkflow whose input `session` is
that Session (edited): the recorded model replies and tool results are reused as they are.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from rein.core.contract import (
    DESCRIBE_WORKFLOW_TYPE,
    FORK_MEMO,
    AgentDescription,
    AgentInput,
    ConfigOverrides,
    DescribeInput,
    agent_task_queue,
    apply_overrides,
    check_model_switch,
)
from rein.core.errors import validation_text
from rein.core.fork_edits import ForkEdits, ForkError, apply_edits, check_tools, reopen_batch
from rein.core.result import Step
from rein.core.session import Session
from rein.core.summaries import fork_details
from rein.core.threads import THREAD_MEMO
from rein.durable.run_lookup import RunNotFound, is_not_found, list_query
from rein.durable.runs_client import RunsClient
from rein.temporal import history

DESCRIBE_TIMEOUT = timedelta(seconds=30)


@dataclass
class ForkPoint:
    """Where a fork starts: the run that recorded step `step`, and what it held right after it."""

    run_id: str
    run: str
    """The Temporal run id (of the chain) that recorded the step."""
    step: int
    session: Session
    request: AgentInput
    agent: AgentDescription
    batch: list[Step]
    """The steps recorded together with `step` (a tool batch, or a middleware step)."""
    task_started_event: int
    """History event id of the workflow task that recorded the step (where a rewind resets to)."""
    later_steps: list[Step]
    state: Any = None
    """A thread's shared state right after the step (None: never set, or not a thread)."""


async def fork_point(client: RunsClient, run_id: str, at_step: int) -> ForkPoint:
    """Replay the chain's runs, newest first, until the one that recorded `at_step`."""
    if at_step < 0:
        raise ForkError(f"at_step must be 0 or more, got {at_step}")
    try:
        run: str = (await client.handle(run_id).describe()).run_id
    except RPCError as err:
        _not_found(err, run_id)
        raise
    later: list[Step] = []
    while True:
        point, replay = await _replay_run(client, run_id, run, at_step)
        if point is not None:
            point.later_steps = [s for s in replay.steps if s.index > at_step] + later
            return point
        if replay.first_step > at_step and replay.continued_from:
            later = list(replay.steps) + later
            run = replay.continued_from
            continue
        raise ForkError(_no_step(run_id, at_step, replay, len(later)))


def _no_step(run_id: str, at_step: int, replay: Any, later: int) -> str:
    """Why `at_step` is not in the run: out of range, or (a fork) one of its original's steps."""
    first, total = replay.first_step, replay.first_step + len(replay.steps) + later
    request = replay.request or replay.input
    lineage = request.metadata.get(FORK_MEMO) if request is not None else None
    if at_step < first and isinstance(lineage, dict):
        return (f"run {run_id} is a fork of {lineage.get('of')} at step {lineage.get('at_step')}: its own steps "
                f"start at {first}; steps before are the original's (fork {lineage.get('of')} at step {at_step})")
    if total <= first:
        return f"run {run_id} has recorded no step yet"
    return f"run {run_id} has no step {at_step}: its steps are {first}..{total - 1}"


def _not_found(err: RPCError, run_id: str) -> None:
    if is_not_found(err):
        raise RunNotFound(run_id) from None


async def _replay_run(client: RunsClient, run_id: str, run: str, at_step: int) -> tuple[ForkPoint | None, Any]:
    from temporalio import workflow

    seen: dict[str, Any] = {}

    def watch(instance: Any) -> None:
        def recorded(steps: list[Step]) -> None:
            if "session" not in seen and any(s.index == at_step for s in steps):
                seen["session"] = instance.session.model_copy(deep=True)
                thread = instance.thread  # a thread's shared state as it was at the step (rein.core.shared_state)
                seen["state"] = copy.deepcopy(thread.state) if thread is not None else None
                seen["batch"] = list(steps)
                seen["event"] = workflow.info().get_current_history_length()

        instance.step_observer = recorded

    try:
        replay = (await history.replayed(client.client, run_id, run, prepare=watch)).instance
    except RPCError as err:
        _not_found(err, run_id)
        raise
    if "session" not in seen:
        return None, replay
    request = replay.request or replay.input
    if request is None or replay.agent is None:
        raise ForkError(f"run {run_id} cannot be forked: its input or agent could not be read back")
    point = ForkPoint(
        run_id=run_id, run=run, step=at_step, session=seen["session"], request=request,
        agent=replay.agent, batch=seen["batch"], task_started_event=seen["event"], later_steps=[], state=seen["state"],
    )
    return point, replay


def _session_at(point: ForkPoint) -> Session:
    """The Session after the fork step alone: later calls of its batch pending again."""
    after = [s for s in point.batch if s.index > point.step]
    if any(s.kind != "tool" for s in after):
        last = max(s.index for s in point.batch)
        raise ForkError(f"step {point.step} was recorded together with steps up to {last}; fork at step {last}")
    session = point.session.model_copy(deep=True)
    reopen_batch(session, len(after), point.step)
    session.run_id = None
    return session


async def describe_agent(client: RunsClient, agent: str, task_queue: str, purpose: str = "for a fork",
                         timeout: timedelta = DESCRIBE_TIMEOUT) -> AgentDescription:
    """The agent as a worker on `task_queue` knows it (tools, config), through a short workflow."""
    try:
        raw = await client.client.execute_workflow(
            DESCRIBE_WORKFLOW_TYPE,
            DescribeInput(agent=agent),
            id=f"rein-describe-{agent}-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
            result_type=AgentDescription,
            execution_timeout=timeout,
            static_summary=f"describe agent {agent} ({purpose})",
        )
    except Exception as err:
        cause = getattr(err, "cause", None)
        detail = getattr(getattr(cause, "cause", None), "message", None) or getattr(cause, "message", None) or str(err)
        raise ForkError(f"could not learn agent {agent!r}'s tools from a worker on queue {task_queue!r}: {detail}") from None
    return raw


def _config(point: ForkPoint, agent: AgentDescription, config: dict[str, Any] | None) -> dict[str, Any] | None:
    merged = {**(point.request.config or {}), **(config or {})}
    if not merged:
        return None
    try:
        ConfigOverrides.model_validate(merged)
        apply_overrides(agent.config, merged, agent.client_overrides)
    except (ValidationError, ValueError) as err:
        raise ForkError(f"invalid config for the fork: {validation_text(err, 'config', 1000)}") from None
    return merged


async def _target(
    client: RunsClient, point: ForkPoint, agent: str | None, session: Session
) -> tuple[str, AgentDescription, str]:
    """The fork's task queue, agent and agent key: the original's, or `agent` once its tools fit."""
    queue = (await client.handle(point.run_id).describe()).task_queue
    if agent is None or agent == point.agent.name:
        return queue, point.agent, point.request.agent
    if queue == agent_task_queue(point.agent.name):
        queue = agent_task_queue(agent)
    target = await describe_agent(client, agent, queue)
    check_tools(session, point.agent, target)
    return queue, target, agent


async def fork(
    client: RunsClient,
    run_id: str,
    *,
    at_step: int,
    edits: ForkEdits | dict[str, Any] | None = None,
    id: str | None = None,
    agent: str | None = None,
    config: dict[str, Any] | None = None,
    by: str | None = None,
    model: str | None = None,
) -> str:
    """Start a new run from `run_id`'s conversation after step `at_step`; returns its workflow id.

    The fork's model: `model`, `edits["model"]` or `config["model"]` (the same edit, given any one
    way); without one it keeps the original's (its own override, if it had one)."""
    config = dict(config or {})
    parsed = ForkEdits.parse(edits).with_model(model, config.pop("model", None))
    point = await fork_point(client, run_id, at_step)
    session = apply_edits(_session_at(point), parsed, at_step)
    queue, target, agent_key = await _target(client, point, agent, session)
    fork_model = parsed.model or point.request.model
    try:
        check_model_switch(target, fork_model)
    except ValueError as err:
        raise ForkError(f"cannot switch the fork's model: {err}") from None
    lineage: dict[str, Any] = {
        "of": run_id, "run": point.run, "at_step": at_step, "edits": parsed.describe(),
        "by": by if by is not None else client.client.identity,
    }
    request = AgentInput(
        agent=agent_key,
        prompt=parsed.append_prompt,
        session=session,
        config=_config(point, target, config),
        model=fork_model,
        first_step=at_step + 1,  # the fork's steps continue the original's count
        metadata={**point.request.metadata, FORK_MEMO: lineage},
        continue_as_new_after=point.request.continue_as_new_after,
        thread=point.request.thread,  # a fork of a thread is a thread (rein.core.threads)
        state=point.state,  # and starts from the shared state its original held at the step
    )
    new_id = id or f"{run_id}-fork-{uuid.uuid4().hex[:8]}"
    summary = f"fork of {run_id} at step {at_step}" + (f": {'; '.join(lineage['edits'])}" if lineage["edits"] else "")
    try:
        await client.client.start_workflow(
            "AgentWorkflow",
            request.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
            id=new_id,
            task_queue=queue,
            static_summary=summary[:200],
            static_details=fork_details(lineage),
            memo={FORK_MEMO: lineage, **({THREAD_MEMO: datetime.now(UTC).isoformat()} if request.thread else {})},
            search_attributes=await _search_attributes(client, target.name or agent_key, run_id),
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,  # never a new run under an existing id
        )
    except WorkflowAlreadyStartedError:
        raise ForkError(f"a run with id {new_id!r} exists already") from None
    return new_id


async def _search_attributes(client: RunsClient, agent: str, fork_of: str) -> Any:
    from rein.temporal.search_attributes import start_search_attributes

    return await start_search_attributes(client.client, agent.split("#", 1)[0], fork_of=fork_of)


@dataclass
class BulkFork:
    """One row of `rein fork --failed`: the failed run, its fork (or why none)."""

    run_id: str
    at_step: int | None
    fork_id: str | None
    error: str | None = None


async def fork_failed(
    client: RunsClient, *, since: timedelta, query: str | None = None, by: str | None = None, limit: int = 1000
) -> list[BulkFork]:
    """Fork every run that failed in the window from its last recorded step (bulk recovery).

    Idempotent: each fork's id is `<run id>-retry-<step>`; a run already forked so is reported, not forked twice.
    """
    after = (datetime.now(UTC) - since).strftime("%Y-%m-%dT%H:%M:%SZ")
    clauses = [list_query("failed"), f'CloseTime > "{after}"']
    if query:
        clauses.append(f"({query})")
    rows: list[BulkFork] = []
    async for execution in client.client.list_workflows(" AND ".join(clauses), limit=limit):
        if execution.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
            continue
        rows.append(await _fork_one_failed(client, execution.id, by))
    return rows


async def _fork_one_failed(client: RunsClient, run_id: str, by: str | None) -> BulkFork:
    try:
        steps = await client.steps(run_id)
    except Exception as err:  # noqa: BLE001 - reported in the row
        return BulkFork(run_id, None, None, f"could not read its steps: {err}")
    if not steps:
        return BulkFork(run_id, None, None, "no step recorded: start it again instead")
    last = steps[-1].index
    try:
        new_id = await fork(client, run_id, at_step=last, id=f"{run_id}-retry-{last}", by=by)
    except ForkError as err:
        return BulkFork(run_id, last, None, str(err))
    return BulkFork(run_id, last, new_id)

"""A small typed client for ops tooling: start runs, answer interrupts, read state.

Everything here is also possible with a raw temporalio client or the `temporal`
CLI; this only spells the contract (rein.core.contract) out once.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import CancelledError
from temporalio.service import RPCError

from rein import settings
from rein.core.contract import (
    DEFAULT_TASK_QUEUE,
    RECORD_QUERY,
    WAIT_UPDATE,
    WORKFLOW_TYPE,
    AgentInput,
    RunOutcome,
    RunStatusView,
    WaitRequest,
)
from rein.core.errors import DecisionRejected, NoWorker, RunFailed  # noqa: F401  (raised here; public here too)
from rein.core.events import TOPIC, StreamEvent, TextDeduplicator
from rein.core.fork_edits import ForkEdits, ForkError  # noqa: F401 - ForkError: what fork/rewind raise
from rein.core.ir import StreamChunk
from rein.core.result import RunResult, Step
from rein.core.session import Session
from rein.core.summaries import run_summary
from rein.durable.bound import BoundDecisions, Decided  # noqa: F401  (public here too)
from rein.durable.delivery import DECISION_GRACE_S, DecisionQueued  # noqa: F401  (public here too)
from rein.durable.fleet import run_priority
from rein.durable.inbox import BulkOutcome, InboxClient, InboxError  # noqa: F401  (public here too)
from rein.durable.policy import PolicyClient
from rein.durable.schedules import ScheduleClient, ScheduleError  # noqa: F401  (public here too)
from rein.durable.threads import ThreadClient, ThreadRefused  # noqa: F401  (public here too)
from rein.temporal import history
from rein.temporal.converter import has_rein_converter
from rein.temporal.search_attributes import start_search_attributes

if TYPE_CHECKING:
    from rein.durable.evals import EvalReport
    from rein.durable.fork import BulkFork


POLL_COOLDOWN = timedelta(milliseconds=50)
"""A stream reader's pause between two polls: each poll is an Update (two history events)."""


async def connect(address: str | None = None, namespace: str | None = None, **client_kwargs: Any) -> ReinConnection:
    """A temporalio Client with rein's data converter, from the connection settings
    (rein.temporal.connection), that also has ReinClient's methods (`start`, `stream`, `approve`, ...). Its
    identity is the person's (REIN_IDENTITY, default USER@HOST: rein.settings), not temporalio's `PID@HOST`.

    No address configured: the shared embedded server of REIN_HOME.
    """
    from rein.durable.bound import person
    from rein.temporal import connection

    client_kwargs.setdefault("identity", person())
    return ReinConnection.of(await connection.connect(address, namespace, **client_kwargs))


def _with_rein(client: Client) -> Client:
    """`client`, or the same connection with ReinPlugin added when it lacks rein's converter.
    The plugin module (and temporalio.worker with it) is imported only then: a CLI command never needs it."""
    if has_rein_converter(client):
        return client
    from rein.temporal.plugin import with_rein_plugin

    return with_rein_plugin(client)


class ReinClient(BoundDecisions, ThreadClient, ScheduleClient, InboxClient, PolicyClient):
    def __init__(self, client: Client, task_queue: str | None = None):
        self.client = _with_rein(client)
        self.task_queue = task_queue or settings.current().task_queue or DEFAULT_TASK_QUEUE

    async def start(
        self,
        agent: str,
        prompt: str,
        *,
        run_id: str | None = None,
        config: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        stream: bool = False,
        model: str | None = None,
        tenant: str | None = None,
        priority: int | None = None,
    ) -> WorkflowHandle[Any, RunOutcome]:
        """Start a run; its handle's `result()` is the slim RunOutcome (`ReinClient.result` gives the
        RunResult). Its model text is live for whoever reads `stream(run_id)`, from the moment they
        attach, and costs no history while nobody reads (live text is one signal per batch).
        `stream=True` publishes every model call live even with no reader attached yet. `model`: this
        run's model instead of the agent's (a LiteLLM id; the agent must allow it with
        client_overrides=["model"]). `tenant` is Temporal's fairness key and `priority` its priority
        key (1 first .. 5 last, default 3) for the run, its activities and its child agents (docs/fleet.md)."""
        return await self.client.start_workflow(
            WORKFLOW_TYPE,
            AgentInput(
                agent=agent, prompt=prompt, config=config, model=model, metadata=metadata or {}, stream=stream
            ).model_dump(
                mode="json", exclude_none=True, exclude_defaults=True
            ),
            id=run_id or f"{agent}-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
            result_type=RunOutcome,
            static_summary=run_summary(agent, prompt),
            search_attributes=await start_search_attributes(self.client, agent, tenant=tenant),
            priority=run_priority(tenant, priority),
            # A worker for this queue in this process (the embedded engine, a script) takes the first
            # workflow task straight from the start response; otherwise the server dispatches it as usual.
            request_eager_start=True,
        )

    async def fork(
        self,
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
        """A new run from `run_id`'s conversation up to and including step `at_step` (the indexes
        `rein show` prints, across continue-as-new); returns its id. Nothing before the fork point
        runs again; the original is only read. `edits` (rein.core.fork_edits.ForkEdits or its dict):
        `tool_results`, `prompt`, `append_prompt`, `drop_last_reply`, `model`; `agent`: continue in
        another agent with compatible tools; `config`: LoopConfig overrides; `model`: the fork's model
        (also accepted as edits["model"] or config["model"]). Raises ForkError before anything starts
        when something does not fit; `by` (default this client's identity) is recorded."""
        from rein.durable import fork

        return await fork.fork(
            self, run_id, at_step=at_step, edits=edits, id=id, agent=agent, config=config, by=by, model=model
        )

    async def fork_failed(self, *, since: timedelta, query: str | None = None, by: str | None = None) -> list[BulkFork]:
        """Fork every run that failed within `since` from its last recorded step (see rein.durable.fork.fork_failed)."""
        from rein.durable import fork

        return await fork.fork_failed(self, since=since, query=query, by=by)

    async def rewind(
        self, run_id: str, *, to_step: int, reason: str = "", rerun_tools: bool = False, by: str | None = None
    ) -> str:
        """Reset the run in place to just after step `to_step` (Temporal reset, same workflow id);
        returns the new Temporal run id. Refuses when tools ran after that point unless `rerun_tools`."""
        from rein.durable import rewind

        return await rewind.rewind(self, run_id, to_step=to_step, reason=reason, rerun_tools=rerun_tools, by=by)

    async def eval(
        self,
        agent: Any,
        *,
        runs: Sequence[str] | None = None,
        since: timedelta | str | None = None,
        name: str | None = None,
        limit: int | None = None,
        scorers: Sequence[Any] = (),
        concurrency: int = 4,
        task_queue: str | None = None,
        on_row: Any = None,
    ) -> EvalReport:
        """Replay recorded runs against a changed `agent` (an Agent: served by a worker in this process; or
        the name of one a deployed build serves on `task_queue`) and compare: docs/evals.md. The runs:
        `runs` by id, else the finished runs of agent `name` (default the agent's) started within `since`
        (`7d` or a timedelta), at most `limit`. `scorers`: rein.ops.scorers or your own callables. `on_row`:
        called with each EvalRow as its run is compared (progress)."""
        from rein.durable import evals

        return await evals.eval_runs(self, agent, runs=runs, since=since, name=name, limit=limit,
                                     scorers=scorers, concurrency=concurrency, task_queue=task_queue, on_row=on_row)

    def handle(self, run_id: str, run: str | None = None) -> WorkflowHandle[Any, RunOutcome]:
        return self.client.get_workflow_handle(run_id, run_id=run, result_type=RunOutcome)

    # Read through rein.temporal.history: a worker answers when one serves the run, else the
    # run's history is replayed here (a run a script left waiting after it exited).

    async def session(self, run_id: str, *, serving: bool | None = None) -> Session:
        """`serving`: whether a worker serves the run, when the caller already asked (`worker_serves`)."""
        return Session.model_validate(await history.query(self.client, run_id, "session", serving=serving))

    async def steps(self, run_id: str, start: int = 0, *, serving: bool | None = None) -> list[Step]:
        """Steps from index `start`, gathered across the runs of a continue-as-new chain."""
        if serving is None:
            serving = await self.worker_serves(run_id)  # once for the chain's two queries per run
        return await self._chain_steps(run_id, start, serving)

    async def _chain_steps(self, run_id: str, start: int, serving: bool,
                           newest: tuple[RunStatusView, list[Any]] | None = None) -> list[Step]:
        """The chain's steps from `start`: the newest run's (`newest`: its status and steps, already
        read), then the runs it continued from for as long as they hold steps from `start` on."""
        chunks: list[list[Step]] = []
        run: str | None = None  # the newest run first, then the ones it continued from
        while True:
            if newest is not None:
                (view, steps), newest = newest, None
            else:
                view = RunStatusView.model_validate(
                    await history.query(self.client, run_id, "status", run=run, serving=serving))
                steps = await history.query(self.client, run_id, "steps", start, run=run, serving=serving)
            chunks.append([Step.model_validate(s) for s in steps])
            if view.first_step <= start or not view.continued_from:
                break
            run = view.continued_from
        return [step for chunk in reversed(chunks) for step in chunk]

    async def _record(self, run_id: str, start: int, serving: bool) -> tuple[Session, RunStatusView, list[Any]] | None:
        """The newest run's session, status and steps from `start` in one query (RECORD_QUERY); None
        when the worker that answers is of a build before that query."""
        try:
            raw = await history.query(self.client, run_id, RECORD_QUERY, start, serving=serving)
        except WorkflowQueryFailedError as err:
            if f"'{RECORD_QUERY}' expected but not found" not in str(err):
                raise
            return None
        return Session.model_validate(raw["session"]), RunStatusView.model_validate(raw["status"]), raw["steps"]

    async def result(self, run_id: str) -> RunResult:
        """The finished run's RunResult (its Session and Steps read with the `rein.record` query).
        A cancelled run (closed CANCELED) gives its RunResult with stop_reason `cancelled`."""
        return await self.full_result(run_id, await self.outcome(self.handle(run_id)))

    async def outcome(self, handle: WorkflowHandle[Any, RunOutcome]) -> RunOutcome:
        """A closed run's slim outcome: its result, or for a run closed as CANCELED the `outcome` query
        (from a worker, else its replayed history). Raises RunFailed when the run failed."""
        try:
            result = await handle.result()
            return result if isinstance(result, RunOutcome) else RunOutcome.model_validate(result)
        except WorkflowFailureError as err:
            cause = err.cause
            if isinstance(cause, CancelledError):
                answer = await history.query(self.client, handle.id, "outcome")
                if answer is not None:
                    return RunOutcome.model_validate(answer)
            kind = getattr(cause, "type", None) or type(cause).__name__
            raise RunFailed(handle.id, kind, str(getattr(cause, "message", None) or cause)) from None

    async def full_result(self, run_id: str, outcome: RunOutcome, steps_from: int = 0) -> RunResult:
        """A RunResult from a run's slim outcome: the Session, and the Steps from `steps_from` on
        (one query after one look at whether a worker serves the run; three from older builds' workers)."""
        serving = await self.worker_serves(run_id)
        record = await self._record(run_id, steps_from, serving)
        if record is None:
            session = await self.session(run_id, serving=serving)
            steps = await self.steps(run_id, steps_from, serving=serving)
        else:
            session, view, newest = record
            steps = await self._chain_steps(run_id, steps_from, serving, newest=(view, newest))
        return RunResult(
            status=outcome.status,
            output=outcome.output,
            data=outcome.data,
            stop_reason=outcome.stop_reason,
            usage=outcome.usage,
            elapsed_s=outcome.elapsed_s,
            interrupt=outcome.interrupt,
            run_id=outcome.run_id,
            steps=[s.model_copy(update={"index": i}) for i, s in enumerate(steps)],
            session=session,
        )

    async def wait(self, run_id: str, request: WaitRequest | None = None) -> RunResult:
        """Until the run pauses (an interrupt) or ends; follows it across continue-as-new.

        `request.after_pause` is how many pauses the caller has already seen.
        Raises RunFailed when the run failed.
        """
        request = request or WaitRequest()
        latest = self.handle(run_id)  # no run id: always the newest run of the chain
        backoff = 0.05
        while True:
            try:
                outcome = await latest.execute_update(WAIT_UPDATE, request, result_type=RunOutcome)
            except (WorkflowUpdateFailedError, RPCError) as err:
                kind = getattr(getattr(err, "cause", None), "type", None)
                if kind == "RunFailed" or (await latest.describe()).status != WorkflowExecutionStatus.RUNNING:
                    break
                if kind == "WaitReleased" or isinstance(err, RPCError):
                    # Too many waits are parked on this run (other clients, or abandoned ones):
                    # poll until it moves on, then wait again.
                    await self._until_paused(latest, request.after_pause, backoff)
                    backoff = min(backoff * 2, 2.0)
                continue
            return await self.full_result(run_id, outcome, request.steps_from)
        return await self.full_result(run_id, await self.outcome(latest), request.steps_from)

    async def stream(
        self, run_id: str, *, from_offset: int = 0, until_pause: bool = False
    ) -> AsyncIterator[StreamChunk]:
        """The run's stream, live, from any process: text deltas, tool calls, steps, interrupts,
        events, and a last `done` chunk. Follows continue-as-new; ends when the run has ended
        (with `until_pause`, at its next `interrupt` or `done`).

        Attach at any moment: the model call in flight publishes what it has said so far, then
        each delta as it comes; so does every later call while you read (readers are counted by
        their polls, with no history event). Each model call's text arrives exactly once, also
        when Temporal retried it.
        """
        fresh = TextDeduplicator()
        if await self._ended(run_id):  # its history has it all; the poll query would need a worker
            for data in await history.stream_items(self.client, run_id, TOPIC, from_offset):
                chunk = fresh(StreamEvent.model_validate(data))
                if chunk is None:
                    continue
                yield chunk
                if until_pause and chunk.type in ("interrupt", "done"):
                    return
            return
        from temporalio.contrib.workflow_streams import WorkflowStreamClient

        items = WorkflowStreamClient.create(self.client, run_id).subscribe(
            TOPIC, from_offset, poll_cooldown=POLL_COOLDOWN
        )
        # subscribe is an async generator (it has aclose); the SDK annotates it AsyncIterator
        async with contextlib.aclosing(items):  # type: ignore[type-var]
            async for item in items:
                chunk = fresh(StreamEvent.model_validate(item.data))
                if chunk is None:
                    continue
                yield chunk
                if until_pause and chunk.type in ("interrupt", "done"):
                    return

    async def _ended(self, run_id: str) -> bool:
        """The run (the newest of its chain) has closed."""
        try:
            description = await self.handle(run_id).describe()
        except RPCError:
            return False  # let the stream say what is wrong
        return description.status not in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)

    async def _until_paused(self, handle: WorkflowHandle[Any, RunOutcome], after_pause: int, delay: float) -> None:
        while True:
            try:
                view = RunStatusView.model_validate(await handle.query("status"))
                if view.pause > after_pause:
                    return
            except RPCError:
                return  # closed, or between runs of a continue-as-new chain: the caller re-checks
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def waiting(self, status: str = "waiting_approval") -> list[str]:
        """Ids of running runs in this ReinStatus (visibility is eventually consistent).

        Only running workflows: a run terminated while it waited keeps its last ReinStatus.
        """
        query = f'ReinStatus="{status}" AND ExecutionStatus="Running"'
        return [wf.id async for wf in self.client.list_workflows(query)]


class ReinConnection(Client, ReinClient):
    """What `connect()` returns: a temporalio `Client` (for workers, `start_workflow`, `list_workflows`)
    that is also a ReinClient (`start`, `stream`, `approve`, `status`, `result`, ...), so code
    written for either works on it. Their method names do not overlap."""

    @classmethod
    def of(cls, client: Client, task_queue: str | None = None) -> ReinConnection:
        connection = cls(**_with_rein(client).config())
        connection.client = connection
        connection.task_queue = task_queue or settings.current().task_queue or DEFAULT_TASK_QUEUE
        return connection

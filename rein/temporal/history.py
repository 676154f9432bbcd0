"""A run's state (the `status`, `session` and `steps` queries) even when no worker serves it.

Temporal answers a query through a worker polling the run's task queue. A run that a script
left waiting has none once the script exits, and the query would fail after ~30 s. Then the
state is rebuilt here by replaying the run's history with the workflow code alone: no agent,
no model, no tool runs; the result is exactly what the query would have returned.

The same happens when the worker that took the query cannot replay the run: during a deploy
with versioning off, an older build polling the queue fails on a history that holds a patch it
does not know, while this (newer) code replays it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio.api.enums.v1 import EventType, TaskQueueType, VersioningBehavior
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from rein import settings
from rein.temporal.sdk_private import query_handler, stream_log

if TYPE_CHECKING:
    from temporalio.client import WorkflowHistory

QUERY_TIMEOUT_S = 10.0

_SILENT: dict[tuple[str, str | None], float] = {}
"""Runs whose worker let a query's grace run out, by when (monotonic): within REIN_POLLER_FRESH_S, while
that worker may still be listed as a poller, later queries race the history at once instead of
waiting out the grace again (`rein result` asks five queries)."""

_UNSERVED = (RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)
NONDETERMINISM = "[TMPRL1100]"
"""How the SDK's core starts a nondeterminism error: the worker's code cannot replay the history."""


async def query(
    client: Client, run_id: str, name: str, *args: Any, run: str | None = None, serving: bool | None = None
) -> Any:
    """The query's answer from a worker when one serves the run, else from the replayed history.

    `run`: one run of a continue-as-new chain (default: the newest). `serving`: see `answer`.
    """
    return (await answer(client, run_id, name, *args, run=run, serving=serving))[0]


async def answer(
    client: Client, run_id: str, name: str, *args: Any, run: str | None = None, serving: bool | None = None,
    published: Any = None,
) -> tuple[Any, bool]:
    """(the query's answer, whether a worker gave it). A worker that does not answer within
    REIN_QUERY_GRACE_S (one stopped a moment ago still looks alive; at once after it went silent on this
    run) races the history's download; once
    the history is here it is replayed, and a worker's answer that came meanwhile still wins.

    `serving`: whether a worker serves the run, when the caller already asked (`served`, `polled`):
    reading several queries then costs one describe and one DescribeTaskQueue, not one each.
    `published`: the answer as the run published it where a describe shows it whole (rein.ops.runs), taken
    instead of the history when no worker answers: no download, no replay.
    Only the download is cancelled, never a replay (see `replay_history`).
    """
    handle = client.get_workflow_handle(run_id, run_id=run)
    if not (serving if serving is not None else await served(client, handle)):
        if published is not None:
            return published, False
        return (await replayed(client, run_id, run)).query(name, *args), False
    asked = asyncio.ensure_future(handle.query(name, *args, rpc_timeout=_timedelta(QUERY_TIMEOUT_S)))
    done, _ = await asyncio.wait({asked}, timeout=_grace((run_id, run)))
    if not done:
        _SILENT[run_id, run] = time.monotonic()
        if published is not None:
            asked.cancel()
            return published, False
        fetched = asyncio.ensure_future(handle.fetch_history())
        await asyncio.wait({asked, fetched}, return_when=asyncio.FIRST_COMPLETED)
        if not (asked.done() and asked.exception() is None):
            replay = await replay_history(client, run_id, await fetched)
            if not (asked.done() and asked.exception() is None):
                asked.cancel()
                return replay.query(name, *args), False
        fetched.cancel()
    try:
        answered = asked.result()
        _SILENT.pop((run_id, run), None)
        return answered, True
    except RPCError as err:
        if err.status not in _UNSERVED:
            raise
    except WorkflowQueryFailedError as err:  # a worker of a build that cannot replay the run
        if NONDETERMINISM not in str(err):
            raise
    if published is not None:
        return published, False
    return (await replayed(client, run_id, run)).query(name, *args), False


def _grace(run: tuple[str, str | None]) -> float:
    """How long to wait for a worker's answer before racing the history (0 once it went silent)."""
    since, now = _SILENT.get(run), settings.current()
    if since is not None and time.monotonic() - since < now.poller_fresh_s:
        return 0.0
    _SILENT.pop(run, None)
    return now.query_grace_s


class Replayed:
    """The workflow object as the end of its history left it."""

    def __init__(self, instance: Any):
        self.instance = instance

    def query(self, name: str, *args: Any) -> Any:
        """What the workflow's query handler `name` returns for this state."""
        return query_handler(self.instance, name)(*args)


async def replayed(
    client: Client, run_id: str, run: str | None = None, prepare: Callable[[Any], None] | None = None
) -> Replayed:
    """Replay the newest run of `run_id` (or the run `run`) in this process (workflow code only).

    `prepare` is given the workflow instance before its run starts (to observe the replay as it goes).
    """
    history = await client.get_workflow_handle(run_id, run_id=run).fetch_history()
    return await replay_history(client, run_id, history, prepare)


async def replay_history(
    client: Client, run_id: str, history: WorkflowHistory, prepare: Callable[[Any], None] | None = None
) -> Replayed:
    """Replay a fetched history in this process, as far as a worker has processed it (`as_processed`).

    Shielded: a caller's cancellation leaves the replay to finish on its own. temporalio's
    Replayer cancelled a second time while it shuts its worker down (as `asyncio.run` does to
    every task left at exit) waits forever: a `rein status` whose slow worker's answer beat the
    replay hung at exit with no output (1 of 50 calls under CI load; tests/test_replay_cancel.py).

    Without temporalio's deadlock detector (its "debug mode"): a worker takes an activation slower than
    2 s for a workflow stuck in a loop, fails it, and raises an exception asynchronously into the thread
    that runs it. Replaying a run a worker has already run, in a process whose CPU is starved, is slow,
    not stuck: with the detector the replay stopped part-way (`running` for a run waiting for approval;
    17 of 80 starved replays here) and its eviction could fail ("Eviction processed, but 1 tasks
    remain", which temporalio retries every 2 s until it succeeds; tests/test_status_reads.py). A replay
    that fails raises: its state is not the run's.
    """
    return await asyncio.shield(_replay(client, run_id, as_processed(history), prepare))


def as_processed(history: WorkflowHistory) -> WorkflowHistory:
    """The history up to its last completed workflow task and the events that task's commands and
    update messages wrote; unchanged before any task completed.

    What follows (a model's reply, a signal, a fired timer) is the next task's input, and the
    Replayer takes it in as if that task had run: a replay then showed a state the run had not
    reached. Under load a client saw a run `waiting_approval` a moment before its worker got the
    model's reply, and the approval it sent was refused ("the run is running"): the worker applies
    the update before that reply.
    """
    from temporalio.client import WorkflowHistory

    events = list(history.events)
    completed = [i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]
    if not completed:
        return history
    task = events[completed[-1]].event_id
    end = completed[-1] + 1
    while end < len(events) and _written_by(events[end], task):
        end += 1
    return history if end == len(events) else WorkflowHistory(history.workflow_id, events[:end])


def _written_by(event: HistoryEvent, task: int) -> bool:
    """Whether `event` was written by the completion of workflow task `task` (a command's or an update's)."""
    if event.event_type in _UPDATE_OUTCOMES:
        return True
    attributes = getattr(event, event.WhichOneof("attributes") or "", None)
    return getattr(attributes, "workflow_task_completed_event_id", None) == task


_UPDATE_OUTCOMES = (
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
)


async def _replay(
    client: Client, run_id: str, history: WorkflowHistory, prepare: Callable[[Any], None] | None
) -> Replayed:
    # temporalio.worker (the Replayer) is imported only here: a worker answers most queries.
    from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

    from rein.workflows import AgentWorkflow

    capture = _capture(prepare)
    replayer = Replayer(
        workflows=[AgentWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(),
        interceptors=[capture],
        data_converter=client.data_converter,
        namespace=client.namespace,
        runtime=client.service_client.config.runtime,  # rein's (connection.core_runtime) for its own clients
        # No deadlock detector: see `replay_history`. (temporalio calls it debug mode; it also runs
        # each activation on this thread instead of a pool's, and sets sys.breakpointhook, put back below.)
        debug_mode=True,
    )
    breakpointhook = sys.breakpointhook
    try:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    finally:
        sys.breakpointhook = breakpointhook
    if capture.outside is not None:
        raise capture.outside  # one line: the build the run needs
    if capture.instance is None or result.replay_failure is not None:
        # A failed replay stopped part-way: its state is not the run's (it showed `running` for a run
        # that waited for approval).
        raise RuntimeError(f"run {run_id} could not be replayed here: {result.replay_failure}")
    return Replayed(capture.instance)


async def served(client: Client, handle: Any) -> bool:
    """Whether a worker that can take the run polled its task queue recently (else a query would hang,
    then fail, and a decision would wait on the server for one): a worker of the build the run is pinned
    to, else of the queue's current version (where an AUTO_UPGRADE or unversioned run's next task goes)."""
    try:
        description = await handle.describe()
        return await polled(client, description.task_queue, pinned_build(description), current=True)
    except RPCError:
        return True  # cannot tell: let the query decide


def pinned_build(description: Any) -> tuple[str, str] | None:
    """(deployment, build id) of the Worker Deployment version a run is pinned to, by its versioning
    behaviour or an override; None for a run any version may take (unversioned, AUTO_UPGRADE)."""
    info = description.raw_description.workflow_execution_info.versioning_info
    override = info.versioning_override
    if override.HasField("pinned"):
        version = override.pinned.version
    elif override.HasField("auto_upgrade") or info.behavior != VersioningBehavior.VERSIONING_BEHAVIOR_PINNED:
        return None
    else:
        version = info.deployment_version
    return (version.deployment_name, version.build_id) if version.build_id else None


async def polled(client: Client, queue: str, build: tuple[str, str] | None = None, *, besides: str | None = None,
                 current: bool = False) -> bool:
    """Whether a worker polled `queue` for workflow tasks recently (True when the server cannot tell); with
    `build`, a worker of that Worker Deployment version (a newer build polling the same queue must not pass for
    its worker); with `current` and no build, a worker of the version the queue routes new tasks to, when it
    has one. `besides`: a worker identity not counted. For what a person is told (a query, a decision not sent),
    never to route anything."""
    try:
        described = await describe_queue(client, queue)
    except RPCError:
        return True
    return polled_in(described, build, besides=besides, current=current)


def polled_in(described: Any, build: tuple[str, str] | None = None, *, besides: str | None = None,
              current: bool = False) -> bool:
    """`polled`, from the queue's DescribeTaskQueue answer."""
    routed = described.versioning_info.current_deployment_version
    if build is None and current and routed.build_id:
        build = (routed.deployment_name, routed.build_id)
    return any(p.identity != besides
               and (build is None or (p.deployment_options.deployment_name, p.deployment_options.build_id) == build)
               for p in _fresh(described.pollers))


async def live_pollers(client: Client, queue: str) -> list[Any]:
    """The workers (PollerInfo) that polled `queue` for workflow tasks within REIN_POLLER_FRESH_S."""
    return _fresh((await describe_queue(client, queue)).pollers)


async def describe_queue(client: Client, queue: str) -> Any:
    return await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW))


def _fresh(pollers: Any) -> list[Any]:
    return [p for p in pollers if p.last_access_time.ToSeconds() > fresh_since()]


def fresh_since() -> float:
    """The time (epoch seconds) after which a poll means a live worker (REIN_POLLER_FRESH_S)."""
    return time.time() - settings.current().poller_fresh_s


async def queue_pollers(client: Client, queue: str, kind: Any = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                        build: tuple[str, str] | None = None) -> list[Any]:
    """Every poller the server lists on `queue` (fresh or not), or those of the version `build`."""
    described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind))
    return [p for p in described.pollers if build in (None, (p.deployment_options.deployment_name,
                                                            p.deployment_options.build_id))]


async def version_pollers(client: Client, described: Any) -> list[Any]:
    """The pollers the server lists of a Worker Deployment version (DescribeWorkerDeploymentVersion's answer), on
    each of its task queues: when each last polled says whether its workers live."""
    version = described.worker_deployment_version_info.deployment_version
    return [p for q in described.version_task_queues for p in await queue_pollers(
        client, q.name, q.type, (version.deployment_name, version.build_id))]


def _timedelta(seconds: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=seconds)


def _capture(prepare: Callable[[Any], None] | None = None) -> Any:
    """An interceptor that keeps the workflow instance the replay creates (in its `instance`)."""
    from temporalio import workflow
    from temporalio.worker import Interceptor, WorkflowInboundInterceptor, WorkflowInterceptorClassInput

    from rein.workflows.window import OutsideWindow

    class Capture(Interceptor):
        def __init__(self) -> None:
            self.instance: Any = None
            self.outside: OutsideWindow | None = None
            """The run is older than this build's support window (rein.workflows.window): its one line."""

        def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
            capture = self

            class Inbound(WorkflowInboundInterceptor):
                async def execute_workflow(self, input: Any) -> Any:
                    capture.instance = workflow.instance()
                    if prepare is not None:
                        prepare(capture.instance)
                    try:
                        return await super().execute_workflow(input)
                    except OutsideWindow as outside:
                        capture.outside = outside
                        raise

            return Inbound

    return Capture()


async def stream_items(client: Client, run_id: str, topic: str, from_offset: int = 0) -> list[Any]:
    """A run's retained stream items on `topic` from `from_offset`, decoded, read from its replayed history.

    For a run that has closed with no worker to answer the stream's poll query (which would
    wait, then fail): its history holds everything the stream published.
    """
    instance = (await replayed(client, run_id)).instance
    stream = instance.stream
    log, base = stream_log(stream)
    converter = client.data_converter.payload_converter
    return [converter.from_payload(item.data) for item in log[max(0, from_offset - base):] if item.topic == topic]

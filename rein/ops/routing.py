"""What an operator sees and does with a deployment's routing: `rein deployment status|set-current|rollback`, the runs
that wait on a build no worker serves (`rein list --stuck`), and which build one run waits for (`rein status`).

A run waits on a build when its next workflow task goes there: the current build for the deployment's AUTO_UPGRADE
runs (whichever version they last ran on) and unversioned runs on its queues, else the build it is pinned to. A
build has a worker when one polled in the last POLLER_FRESH_S (70 s: an idle worker re-polls within 60 s); until
then a killed one shows as "last poll N s ago". Moving the current version moves its runs: the target's own workers
replay them first (rein.temporal.promotion); what the target cannot replay stays pinned where it is.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.enums.v1 import WorkerDeploymentVersionStatus as Status
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, ListWorkerDeploymentsRequest
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

from rein.core.contract import WORKFLOW_TYPE
from rein.ops.stuck import StuckRun
from rein.temporal import deployment as d
from rein.temporal.history import POLLER_FRESH_S, pinned_build, seconds
from rein.temporal.promotion import Check, ReplayFailure, check, runs_that_move


WORKFLOW_QUEUE = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW


class RoutingError(Exception):
    """The routing was not changed, and why (one line); `replay`: because a build cannot take the runs."""

    def __init__(self, message: str, replay: bool = False) -> None:
        super().__init__(message)
        self.replay = replay


@dataclass
class VersionState:
    build_id: str
    status: str
    """current, ramping, draining, drained, inactive."""
    behavior: str | None = None
    """auto-upgrade or pinned (what its workers said); None: a rein build from before, or not rein's."""
    last_poll: datetime | None = None
    polling: bool = False
    last_current: datetime | None = None
    waiting: int = 0
    """Open agent runs whose next workflow task goes to it."""
    check: dict | None = None
    """Its last replay check of the runs that would move to it (rein.temporal.promotion)."""
    queues: list[str] = field(default_factory=list)

    def workers(self) -> str:
        if self.last_poll is None:
            return "no worker (the server lists none: it forgets a stopped worker at once, a lost one after minutes)"
        ago = int(time.time() - self.last_poll.timestamp())
        return f"last poll {ago} s ago" if self.polling else f"no worker since {self.last_poll:%Y-%m-%d %H:%M:%S} UTC"


@dataclass
class DeploymentState:
    name: str
    current: str | None
    ramping: str | None
    ramping_percentage: float
    manager: str | None
    versions: list[VersionState] = field(default_factory=list)

    def version(self, build_id: str | None) -> VersionState | None:
        return next((v for v in self.versions if v.build_id == build_id), None)

    def waiting_query(self, v: VersionState) -> str:
        """The open agent runs whose next workflow task goes to `v`."""
        on = [f'TemporalWorkerDeploymentVersion = "{self.name}:{v.build_id}" AND '
              'TemporalWorkflowVersioningBehavior = "Pinned"']
        if v.build_id == self.current:
            on.append(f'TemporalWorkerDeployment = "{self.name}" AND TemporalWorkflowVersioningBehavior = "AutoUpgrade"')
            on += [f'TaskQueue = "{q}" AND TemporalWorkerDeploymentVersion IS NULL' for q in v.queues]
        return (f'WorkflowType = "{WORKFLOW_TYPE}" AND ExecutionStatus = "Running" AND '
                f'({" OR ".join(f"({c})" for c in on)})')

    def outage(self, v: VersionState) -> str:
        """One line for a build with runs waiting on it and no worker, with what would move them."""
        since = v.workers().removeprefix("no worker ").removeprefix("(").removesuffix(")")
        if v.build_id == self.current:
            previous = previous_build(self)
            move = (f"`rein deployment rollback` moves them to {previous}" if previous else
                    "`rein deployment set-current BUILD` moves them to another build")
            return (f"deployment {self.name}: the current build {v.build_id} has had no worker {since}: its {v.waiting} "
                    f"open runs wait (nothing changes by itself); start its workers again, or {move}")
        return (f"deployment {self.name}: build {v.build_id} has had no worker {since}: {v.waiting} runs pinned to it "
                f"wait; start a worker of it (REIN_DEPLOYMENT={self.name} REIN_BUILD_ID={v.build_id}), or move them "
                f"to the current build: temporal workflow update-options --query 'TemporalWorkerDeploymentVersion="
                f"\"{self.name}:{v.build_id}\"' --versioning-override-behavior auto_upgrade")

    def outages(self) -> list[str]:
        return [self.outage(v) for v in self.versions if v.waiting and not v.polling]

    def refusals(self) -> list[str]:
        """A build its check kept out of the routing, and runs the current build's check left as they were."""
        lines = []
        for v in self.versions:
            done = (v.check or {}).get("at", "")[:19].replace("T", " ")
            if v.check and v.check.get("refused") and v.status == "inactive":
                lines.append(f"deployment {self.name}: build {v.build_id} is not current: {v.check['refused']} "
                             f"(checked {done} UTC)")
            if v.check and v.check.get("left") and v.build_id == self.current and v.check.get("open_left"):
                lines.append(f"deployment {self.name}: build {v.build_id} became current on {done} UTC; {v.check['left']}")
        return lines

    def to_json(self) -> dict[str, Any]:
        versions = [{**asdict(v), "last_poll": v.last_poll.isoformat() if v.last_poll else None,
                     "last_current": v.last_current.isoformat() if v.last_current else None} for v in self.versions]
        outages = self.outages()
        return {"deployment": self.name, "current": self.current, "ramping": self.ramping,
                "ramping_percentage": self.ramping_percentage, "manager": self.manager, "versions": versions,
                "outage": outages[0] if outages else None, "outages": outages, "refusals": self.refusals(),
                "open_runs": sum(v.waiting for v in self.versions if v.build_id == self.current)}


async def deployment_state(client: Client, name: str) -> DeploymentState | None:
    """The deployment's routing, and each version's workers, waiting runs and last check; None if it does not exist."""
    described = await d.describe(client, name)
    if described is None:
        return None
    info, fresh = described.worker_deployment_info, time.time() - seconds("REIN_POLLER_FRESH_S", POLLER_FRESH_S)
    routing = info.routing_config
    state = DeploymentState(name, routing.current_deployment_version.build_id or None,
                            routing.ramping_deployment_version.build_id or None, routing.ramping_version_percentage,
                            info.manager_identity or None)
    for summary in info.version_summaries:
        v = VersionState(summary.deployment_version.build_id, Status.Name(summary.status).lower().rsplit("_", 1)[-1],
                         last_current=next((getattr(summary, f).ToDatetime(UTC) for f in (
                             "current_since_time", "last_current_time") if summary.HasField(f)), None))
        state.versions.append(v)
        if v.status == "drained":
            continue  # no runs, nothing to say
        version = await d.describe_version(client, name, v.build_id)
        meta = d.rein_metadata(version) or {}
        v.behavior, v.check = meta.get("behavior"), meta.get("check")
        v.queues = [q.name for q in version.version_task_queues if q.type == WORKFLOW_QUEUE]
        polls = [p.last_access_time.ToSeconds() for q in version.version_task_queues
                 for p in await _pollers(client, q.name, q.type, (name, v.build_id))]
        v.last_poll = datetime.fromtimestamp(max(polls), UTC) if polls else None
        v.polling = any(t > fresh for t in polls)
        v.waiting = (await client.count_workflows(state.waiting_query(v))).count
    current = state.version(state.current)
    if current and current.check and current.check.get("left_ids"):
        ids = " OR ".join(f'WorkflowId = "{w}"' for w in current.check["left_ids"])
        current.check["open_left"] = (await client.count_workflows(f'ExecutionStatus = "Running" AND ({ids})')).count
    return state


async def _pollers(client: Client, queue: str, kind: Any, version: tuple[str, str] | None = None) -> list[Any]:
    described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind))
    return [p for p in described.pollers if version is None or
            (p.deployment_options.deployment_name, p.deployment_options.build_id) == version]


def previous_build(state: DeploymentState) -> str | None:
    """The build that was current last before the current one (a rollback's target)."""
    earlier = [v for v in state.versions if v.build_id != state.current and v.last_current is not None]
    return max(earlier, key=lambda v: v.last_current or datetime.min.replace(tzinfo=UTC)).build_id if earlier else None


async def unserved(client: Client, limit: int = 50) -> tuple[list[str], list[StuckRun]]:
    """For `rein list --stuck`: each deployment's outage line, and the runs that wait on a build with no worker."""
    lines: list[str] = []
    rows: list[StuckRun] = []
    token = b""
    while True:
        try:
            page = await client.workflow_service.list_worker_deployments(ListWorkerDeploymentsRequest(
                namespace=client.namespace, next_page_token=token))
        except RPCError as err:
            if err.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
                return lines, rows  # no worker deployments on this namespace
            raise
        for summary in page.worker_deployments:
            state = await deployment_state(client, summary.name)
            for v in [v for v in state.versions if v.waiting and not v.polling] if state else []:
                lines.append(state.outage(v))  # type: ignore[union-attr]
                why = f"waits for build {v.build_id} of deployment {state.name} ({v.workers()})"  # type: ignore[union-attr]
                rows += [StuckRun(run.id, str(run.search_attributes.get("ReinAgent", [""])[0]),
                                  str(run.search_attributes.get("ReinStatus", ["running"])[0]), [], 0, why, run.start_time)
                         async for run in client.list_workflows(state.waiting_query(v), limit=limit)]  # type: ignore[union-attr]
        token = page.next_page_token
        if not token:
            return lines, rows


@dataclass
class RunBuild:
    """The build a run's next workflow task goes to, why, whether a worker of it polls, and what moves the run."""

    deployment: str
    build: str
    why: str
    last_poll: datetime | None
    polling: bool
    others: list[str]
    """Other builds whose workers poll the run's queue."""
    move: str

    def line(self) -> str:
        ago = f" ({int(time.time() - self.last_poll.timestamp())} s ago)" if self.last_poll else ""
        workers = ("a worker of it polls" if self.polling else f"no worker of it has polled since "
                   f"{self.last_poll:%Y-%m-%d %H:%M:%S} UTC{ago}" if self.last_poll else "no worker of it polls")
        others = f" (workers of build {', '.join(self.others)} poll its queue)" if self.others and not self.polling else ""
        return (f"{self.build} of deployment {self.deployment} ({self.why}); {workers}{others}"
                + ("" if self.polling else f"; moves it: {self.move}"))


async def run_build(client: Client, description: Any) -> RunBuild | None:
    """Which build an open run waits for (None: an unversioned queue)."""
    pinned, queue, run = pinned_build(description), description.task_queue, description.id
    if pinned:
        override = description.raw_description.workflow_execution_info.versioning_info.HasField("versioning_override")
        why = ("pinned to it by a versioning override: a script pins the runs it starts while it serves them, an "
               "operator may too" if override else "pinned to it: its workers run their runs PINNED")
        move = f"temporal workflow update-options --workflow-id {run} --versioning-override-behavior auto_upgrade"
    else:
        routed = (await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=WORKFLOW_QUEUE))).versioning_info
        if not routed.current_deployment_version.build_id:
            return None
        pinned = (routed.current_deployment_version.deployment_name, routed.current_deployment_version.build_id)
        why, move = "the current build: the run follows it at its next task", f"`rein deployment rollback -d {pinned[0]}`"
    fresh = time.time() - seconds("REIN_POLLER_FRESH_S", POLLER_FRESH_S)
    pollers = await _pollers(client, queue, WORKFLOW_QUEUE)
    polls = [p.last_access_time.ToSeconds() for p in pollers
             if (p.deployment_options.deployment_name, p.deployment_options.build_id) == pinned]
    others = sorted({p.deployment_options.build_id for p in pollers if p.last_access_time.ToSeconds() > fresh and
                     p.deployment_options.build_id and p.deployment_options.build_id != pinned[1]})
    return RunBuild(pinned[0], pinned[1], why, datetime.fromtimestamp(max(polls), UTC) if polls else None,
                    any(t > fresh for t in polls), others, move)


@dataclass
class RoutingChange:
    deployment: str
    previous: str | None
    target: str
    ramp: float | None
    moved: int
    stayed: list[ReplayFailure]
    left: list[ReplayFailure]
    checked: bool


async def move_routing(client: Client, deployment: str, target: str, *, ramp: float | None = None,
                       unchecked: bool = False, progress: Any = None) -> RoutingChange:
    """Make `target` current (or ramp it) once its workers replayed the runs that move; those it cannot replay are
    pinned to the build they are on first."""
    from rein.settings import current as settings

    described = await d.describe(client, deployment)
    if described is None:
        raise RoutingError(f"no worker deployment {deployment!r} (no versioned worker has polled yet)")
    builds = [s.deployment_version.build_id for s in described.worker_deployment_info.version_summaries]
    if target not in builds:
        raise RoutingError(f"deployment {deployment!r} has no build {target!r} (its builds: {', '.join(builds) or 'none'})")
    current = d.current_build_id(described)
    if target == current and ramp is None:
        raise RoutingError(f"build {target} is current already")
    version, timeout = WorkerDeploymentVersion(deployment, target), settings().promote_timeout_s
    queues = await d.version_queues(client, deployment, target)
    moving = await runs_that_move(client, deployment, queues)
    found = Check(moving, len(moving)) if unchecked else await _checked(client, version, moving, queues, timeout, progress)
    if found.checked < len(moving):
        raise RoutingError(f"build {target} is not current: {found.refusal(timeout)}; nothing moved", replay=True)
    for failure in found.blocking():
        stays = failure.run.build or current
        if stays is None:
            raise RoutingError(f"build {target} cannot replay unversioned run {failure.line()}: it has no build to stay "
                               "pinned to; pass --unchecked to move it anyway", replay=True)
        await d.override_run(client, failure.run.workflow_id, failure.run.run_id, WorkerDeploymentVersion(deployment, stays))
    await d.set_current(client, version, ramp=ramp, conflict_token=described.conflict_token)
    return RoutingChange(deployment, current, target, ramp, len(moving) - len(found.failures), found.blocking(),
                         found.left(), not unchecked)


async def _checked(client: Client, version: WorkerDeploymentVersion, runs: list[Any], queues: list[str], timeout: float,
                   progress: Any) -> Check:
    if not runs:
        return Check(runs)
    meta = d.rein_metadata(await d.describe_version(client, version.deployment_name, version.build_id))
    if not meta or not meta.get("replay_check"):
        return Check(runs, len(runs), [ReplayFailure(r, f"build {version.build_id} cannot be asked to replay runs (an "
                                                        "earlier rein, or not rein's)") for r in runs])
    key = (version.deployment_name, version.build_id)
    fresh = time.time() - seconds("REIN_POLLER_FRESH_S", POLLER_FRESH_S)
    polls = [p.last_access_time.ToSeconds() for q in queues for p in await _pollers(client, q, WORKFLOW_QUEUE, key)]
    if not any(t > fresh for t in polls):
        raise RoutingError(f"no worker of build {version.build_id} polls: start its workers first (they serve the runs "
                           "this moves), or pass --unchecked")
    return await check(client, version, runs, timeout=timeout, progress=progress)

"""What an operator does to a deployment's routing: see it, move it (`rein deployment status|set-current|rollback`).

Moving the current version moves every AUTO_UPGRADE run of the old one at its next workflow task. Before
it moves, the target build's own workers replay those runs (rein.temporal.replay_check); a run the target
cannot replay is pinned to the build it is on (it finishes there) instead of failing on the target. A
build from before rein's replay checks cannot be asked: its runs stay pinned unless `unchecked`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import WorkerDeploymentVersionStatus
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion

from rein.temporal.deployment import (
    current_build_id,
    describe,
    describe_version,
    override_run,
    rein_metadata,
    set_current,
    version_queues,
)
from rein.temporal.promotion import ReplayFailure, RunRef, proof_limit, runs_that_move
from rein.temporal.replay_check import check_on


class RoutingError(Exception):
    """The routing was not changed, and why (one line)."""


@dataclass
class VersionState:
    build_id: str
    status: str
    """current, ramping, draining, drained, inactive."""
    behavior: str | None
    """auto-upgrade or pinned (what its workers said); None: a rein build from before, or not rein's."""
    last_poll: datetime | None
    """The latest poll of any of its workers the server still lists (it lists them for a few minutes)."""
    polling: bool
    last_current: datetime | None = None
    """When it was last current (now, for the current version); None: never."""


@dataclass
class DeploymentState:
    name: str
    current: str | None
    ramping: str | None
    ramping_percentage: float
    manager: str | None
    versions: list[VersionState] = field(default_factory=list)
    open_runs: int = 0
    """Open runs on the current version (they wait for its workers when it has none)."""

    def version(self, build_id: str | None) -> VersionState | None:
        return next((v for v in self.versions if v.build_id == build_id), None)

    def outage(self) -> str | None:
        """One line when the current build has no worker, with what would move its runs; else None."""
        current = self.version(self.current)
        if current is None or current.polling:
            return None
        since = (f"since {current.last_poll:%Y-%m-%d %H:%M:%S} UTC" if current.last_poll else
                 "(the server lists none: it forgets a stopped worker at once and a lost one after minutes)")
        previous = previous_build(self)
        move = (f"`rein deployment rollback` moves them to {previous}" if previous else
                "`rein deployment set-current BUILD` moves them to another build")
        return (f"deployment {self.name}: the current build {self.current} has had no worker {since}: its "
                f"{self.open_runs} open runs wait (nothing changes by itself); start its workers again, or {move}")

    def to_json(self) -> dict[str, Any]:
        return {
            "deployment": self.name, "current": self.current, "ramping": self.ramping,
            "ramping_percentage": self.ramping_percentage, "manager": self.manager, "outage": self.outage(),
            "open_runs": self.open_runs,
            "versions": [{"build_id": v.build_id, "status": v.status, "behavior": v.behavior, "polling": v.polling,
                          "last_poll": v.last_poll.isoformat() if v.last_poll else None,
                          "last_current": v.last_current.isoformat() if v.last_current else None}
                         for v in self.versions],
        }


async def deployment_state(client: Client, name: str, *, current_only: bool = False) -> DeploymentState | None:
    """The deployment's routing and each version's workers as the server lists them (`current_only`: the current
    version's); None if it does not exist."""
    from rein.temporal.history import POLLER_FRESH_S, seconds

    described = await describe(client, name)
    if described is None:
        return None
    info = described.worker_deployment_info
    routing = info.routing_config
    state = DeploymentState(name, routing.current_deployment_version.build_id or None,
                            routing.ramping_deployment_version.build_id or None, routing.ramping_version_percentage,
                            info.manager_identity or None)
    if state.current:
        state.open_runs = (await client.count_workflows(
            f'TemporalWorkerDeploymentVersion = "{name}:{state.current}" AND ExecutionStatus = "Running"')).count
    fresh = time.time() - seconds("REIN_POLLER_FRESH_S", POLLER_FRESH_S)
    for summary in info.version_summaries:
        build = summary.deployment_version.build_id
        version = VersionState(
            build, WorkerDeploymentVersionStatus.Name(summary.status).removeprefix("WORKER_DEPLOYMENT_VERSION_STATUS_").lower(),
            None, None, False, _last_current(summary))
        state.versions.append(version)
        if current_only and build != state.current:
            continue  # its workers and metadata are not asked
        described_version = await describe_version(client, name, build)
        polls = [p.last_access_time.ToSeconds() for q in described_version.version_task_queues
                 for p in await _pollers(client, q.name, q.type, name, build)]
        meta = rein_metadata(described_version)
        version.behavior = meta.get("behavior") if meta else None
        version.last_poll = datetime.fromtimestamp(max(polls), UTC) if polls else None
        version.polling = any(t > fresh for t in polls)
    return state


def _last_current(summary: Any) -> datetime | None:
    for name in ("current_since_time", "last_current_time"):
        if summary.HasField(name):
            return getattr(summary, name).ToDatetime(UTC)
    return None


async def _pollers(client: Client, queue: str, kind: Any, deployment: str, build: str) -> list[Any]:
    described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind))
    return [p for p in described.pollers
            if (p.deployment_options.deployment_name, p.deployment_options.build_id) == (deployment, build)]


def previous_build(state: DeploymentState) -> str | None:
    """The build that was current last before the current one (a rollback's target)."""
    earlier = [v for v in state.versions if v.build_id != state.current and v.last_current is not None]
    return max(earlier, key=lambda v: v.last_current or datetime.min.replace(tzinfo=UTC)).build_id if earlier else None


@dataclass
class RoutingChange:
    deployment: str
    previous: str | None
    target: str
    ramp: float | None
    moved: int
    stayed: list[ReplayFailure]
    checked: bool


async def move_routing(client: Client, deployment: str, target: str, *, ramp: float | None = None,
                       unchecked: bool = False) -> RoutingChange:
    """Make `target` current (or ramp it) after its workers replayed the runs that move; those it cannot
    replay are pinned to the build they are on first."""
    described = await describe(client, deployment)
    if described is None:
        raise RoutingError(f"no worker deployment {deployment!r} (no versioned worker has polled yet)")
    builds = [s.deployment_version.build_id for s in described.worker_deployment_info.version_summaries]
    if target not in builds:
        raise RoutingError(f"deployment {deployment!r} has no build {target!r} (its builds: {', '.join(builds) or 'none'})")
    current = current_build_id(described)
    if target == current and ramp is None:
        raise RoutingError(f"build {target} is current already")
    version = WorkerDeploymentVersion(deployment, target)
    moving = await runs_that_move(client, deployment, current, await version_queues(client, deployment, target),
                                  proof_limit())
    stayed = [] if unchecked else await _not_replayed(client, version, moving)
    if stayed and current is None:
        raise RoutingError(f"build {target} cannot replay {len(stayed)} unversioned runs ({stayed[0].line()}): they have no "
                           "build to stay pinned to; pass --unchecked to move them anyway")
    for failure in stayed:
        assert current is not None
        await override_run(client, failure.run.workflow_id, failure.run.run_id, WorkerDeploymentVersion(deployment, current))
    await set_current(client, version, ramp=ramp, conflict_token=described.conflict_token)
    return RoutingChange(deployment, current, target, ramp, len(moving) - len(stayed), stayed, not unchecked)


async def _not_replayed(client: Client, version: WorkerDeploymentVersion, runs: list[RunRef]) -> list[ReplayFailure]:
    if not runs:
        return []
    meta = rein_metadata(await describe_version(client, version.deployment_name, version.build_id))
    if not meta or not meta.get("replay_check"):
        return [ReplayFailure(r, f"build {version.build_id} cannot be asked to replay runs (an earlier rein, or not "
                                 "rein's)") for r in runs]
    try:
        return await check_on(client, version, runs)
    except TimeoutError as err:
        raise RoutingError(f"{err}: start its workers first (they serve the runs this moves), or pass --unchecked") from None


async def outages(client: Client) -> list[str]:
    """The line `deployment_state(...).outage()` says, for every deployment whose current build has no worker
    and open runs (a script's engine that ended leaves a current build without workers, and nothing waiting)."""
    from temporalio.api.workflowservice.v1 import ListWorkerDeploymentsRequest
    from temporalio.service import RPCError, RPCStatusCode

    lines: list[str] = []
    token = b""
    while True:
        try:
            page = await client.workflow_service.list_worker_deployments(ListWorkerDeploymentsRequest(
                namespace=client.namespace, next_page_token=token))
        except RPCError as err:
            if err.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
                return lines  # no worker deployments on this namespace
            raise
        for summary in page.worker_deployments:
            if summary.routing_config.current_deployment_version.build_id:
                state = await deployment_state(client, summary.name, current_only=True)
                line = state.outage() if state is not None and state.open_runs else None
                if line:
                    lines.append(line)
        token = page.next_page_token
        if not token:
            return lines

"""A deployment's routing as an operator sees and moves it (`rein deployment status|set-current|rollback`).

A run waits on a build when its next workflow task goes there: the current build for the deployment's AUTO_UPGRADE
runs and unversioned runs on its queues, else the build it is pinned to. A build has a worker when one polled in the
last POLLER_FRESH_S (an idle worker polls again within 60 s): a killed one reads "last poll N s ago" for up to 70 s.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import WorkerDeploymentVersionStatus
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion

from rein.core.contract import WORKFLOW_TYPE
from rein.temporal import deployment as d
from rein.temporal.history import fresh_since, version_pollers
from rein.temporal.promotion import Check, ReplayFailure, check, runs_that_move


class RoutingError(Exception):
    """The routing was not changed, and why; `replay`: the build cannot take the runs (exit 9)."""

    def __init__(self, message: str, replay: bool = False) -> None:
        super().__init__(message)
        self.replay = replay


@dataclass
class VersionState:
    build_id: str
    status: str  # current, ramping, draining, drained, inactive
    behavior: str | None = None  # what its workers said; None: a rein build from before, or not rein's
    last_poll: datetime | None = None
    polling: bool = False
    last_current: datetime | None = None
    waiting: int = 0  # open agent runs whose next workflow task goes to it
    check: dict | None = None  # its last check of the runs that would move to it (rein.temporal.promotion)
    queues: list[str] = field(default_factory=list)

    def line(self) -> str:
        """`rein deployment status`'s row: state, behaviour, workers, the runs waiting on it, a check under way."""
        check = self.check or {}
        checking = (f" · replaying the runs that would move to it: {check['checked']} of {check['runs']} (at "
                    f"{check['at'][11:19]} UTC)") if check.get("checking") else ""
        waiting = f" · {self.waiting} runs wait on it" if self.waiting else ""
        return f"{self.build_id}  {self.status}  {self.behavior or 'earlier rein (pinned)'}  {self.workers()}{waiting}{checking}"

    def workers(self) -> str:
        if self.last_poll is None:
            return "no worker (the server lists none: it forgets a stopped worker at once, a lost one after minutes)"
        if self.polling:
            return f"last poll {int(time.time() - self.last_poll.timestamp())} s ago"
        return f"no worker since {self.last_poll:%Y-%m-%d %H:%M:%S} UTC"


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
        on = [f'TemporalWorkerDeploymentVersion = "{self.name}:{v.build_id}" AND TemporalWorkflowVersioningBehavior = "Pinned"']
        if v.build_id == self.current:
            on += [f'TemporalWorkerDeployment = "{self.name}" AND TemporalWorkflowVersioningBehavior = "AutoUpgrade"',
                   *(f'TaskQueue = "{q}" AND TemporalWorkerDeploymentVersion IS NULL' for q in v.queues)]
        return f'WorkflowType = "{WORKFLOW_TYPE}" AND ExecutionStatus = "Running" AND ({" OR ".join(f"({c})" for c in on)})'

    def outage(self, v: VersionState) -> str:
        """One line for a build with runs waiting on it and no worker, with what would move them."""
        since = f"since {v.last_poll:%Y-%m-%d %H:%M:%S} UTC" if v.last_poll else "listed (the server forgets a stopped one at once)"
        if v.build_id == self.current:
            move = (f"`rein deployment rollback` moves them to {previous}" if (previous := previous_build(self)) else
                    "`rein deployment set-current BUILD` moves them to another build")
            return (f"deployment {self.name}: the current build {v.build_id} has had no worker {since}: its {v.waiting} "
                    f"open runs wait (nothing changes by itself); start its workers again, or {move}")
        return (f"deployment {self.name}: build {v.build_id} has had no worker {since}: {v.waiting} runs pinned to it "
                f"wait; start a worker of it (REIN_DEPLOYMENT={self.name} REIN_BUILD_ID={v.build_id}), or let them follow "
                f"the current build: temporal workflow update-options --query 'TemporalWorkerDeploymentVersion="
                f"\"{self.name}:{v.build_id}\"' --versioning-override-behavior auto_upgrade")

    def outages(self) -> list[str]:
        return [self.outage(v) for v in self.versions if v.waiting and not v.polling]

    def refusals(self) -> list[str]:
        """Builds their check kept out of the routing; runs the current build's check left as they were (still open)."""
        lines = []
        for v, said in ((v, v.check) for v in self.versions if v.check):
            at = f"{said['at'][:19].replace('T', ' ')} UTC"
            if said.get("refused") and v.status not in ("current", "ramping") and (
                    v.last_current is None or v.last_current.isoformat() < said["at"]):  # not current since
                lines.append(f"deployment {self.name}: build {v.build_id} is not current: {said['refused']} ({at})")
            elif v.build_id == self.current and said.get("open_left"):
                lines.append(f"deployment {self.name}: build {v.build_id} is current since {at}; {said['left']}")
        return lines

    def to_json(self) -> dict[str, Any]:
        outages, current = self.outages(), self.version(self.current)
        versions = [asdict(v) | {"last_poll": v.last_poll and v.last_poll.isoformat(),
                                 "last_current": v.last_current and v.last_current.isoformat()} for v in self.versions]
        return {"deployment": self.name, "current": self.current, "ramping": self.ramping, "manager": self.manager,
                "ramping_percentage": self.ramping_percentage, "versions": versions, "outages": outages,
                "outage": outages[0] if outages else None, "refusals": self.refusals(),
                "open_runs": current.waiting if current else 0}


async def deployment_state(client: Client, name: str) -> DeploymentState | None:
    """The routing, and each build's workers, waiting runs and last check; None if the deployment does not exist."""
    if (described := await d.describe(client, name)) is None:
        return None
    info, fresh = described.worker_deployment_info, fresh_since()
    routing = info.routing_config
    state = DeploymentState(name, routing.current_deployment_version.build_id or None,
                            routing.ramping_deployment_version.build_id or None, routing.ramping_version_percentage,
                            info.manager_identity or None)
    for s in info.version_summaries:
        v = VersionState(s.deployment_version.build_id, WorkerDeploymentVersionStatus.Name(s.status).rsplit("_", 1)[-1].lower(),
                         last_current=next((getattr(s, f).ToDatetime(UTC) for f in ("current_since_time", "last_current_time")
                                            if s.HasField(f)), None))
        state.versions.append(v)
        if v.status == "drained":
            continue  # no runs: nothing more to say
        described_version = await d.describe_version(client, name, v.build_id)
        v.behavior, v.check = ((meta := d.rein_metadata(described_version) or {}).get("behavior"), meta.get("check"))
        v.queues = [q.name for q in described_version.version_task_queues if q.type == 1]  # workflow task queues
        polls = [p.last_access_time.ToSeconds() for p in await version_pollers(client, described_version)]
        v.last_poll, v.polling = datetime.fromtimestamp(max(polls), UTC) if polls else None, any(t > fresh for t in polls)
        v.waiting = (await client.count_workflows(state.waiting_query(v))).count
    if (current := state.version(state.current)) and current.check and current.check.get("left_ids"):
        ids = " OR ".join(f'WorkflowId = "{w}"' for w in current.check["left_ids"])
        current.check["open_left"] = (await client.count_workflows(f'ExecutionStatus = "Running" AND ({ids})')).count
    return state


def previous_build(state: DeploymentState) -> str | None:
    """The build that was current last before the current one (a rollback's target)."""
    earlier = [v for v in state.versions if v.build_id != state.current and v.last_current is not None]
    return max(earlier, key=lambda v: v.last_current or datetime.min.replace(tzinfo=UTC)).build_id if earlier else None


async def move_routing(client: Client, deployment: str, target: str, *, ramp: float | None = None, unchecked: bool = False,
                       progress: Any = None) -> tuple[str | None, Check]:
    """Make `target` current (or ramp it) once its workers replayed every run that moves; those it cannot replay
    are pinned to the build they are on first. (The build current before, the check.)"""
    from rein.settings import current as settings

    if (described := await d.describe(client, deployment)) is None:
        raise RoutingError(f"no worker deployment {deployment!r} (no versioned worker has polled yet)")
    builds = [s.deployment_version.build_id for s in described.worker_deployment_info.version_summaries]
    if target not in builds:
        raise RoutingError(f"deployment {deployment!r} has no build {target!r} (its builds: {', '.join(builds) or 'none'})")
    if target == (current := d.current_build_id(described)) and ramp is None:
        raise RoutingError(f"build {target} is current already")
    version, timeout = WorkerDeploymentVersion(deployment, target), settings().promote_timeout_s
    moving = await runs_that_move(client, deployment, await d.version_queues(client, deployment, target))
    found = Check(moving, len(moving)) if unchecked or not moving else await _checked(client, version, moving, timeout, progress)
    if found.checked < len(moving):
        raise RoutingError(f"build {target} is not current: {found.refusal(timeout)}; nothing moved", replay=True)
    for failure in found.blocking:
        if not (stays := failure.run.build or current):
            raise RoutingError(f"build {target} cannot replay unversioned {failure.line()}: it has no build to stay "
                               "pinned to; pass --unchecked to move it anyway", replay=True)
        await d.override_run(client, failure.run.workflow_id, failure.run.run_id, WorkerDeploymentVersion(deployment, stays))
    await d.set_current(client, version, ramp=ramp, conflict_token=described.conflict_token)
    return current, found


async def _checked(client: Client, version: WorkerDeploymentVersion, runs: list[Any], timeout: float, progress: Any) -> Check:
    described = await d.describe_version(client, version.deployment_name, version.build_id)
    if not (d.rein_metadata(described) or {}).get("replay_check"):
        why = f"build {version.build_id} cannot be asked to replay runs (an earlier rein, or not rein's)"
        return Check(runs, len(runs), [ReplayFailure(r, why) for r in runs])
    if not any(p.last_access_time.ToSeconds() > fresh_since() for p in await version_pollers(client, described)):
        raise RoutingError(f"no worker of build {version.build_id} polls: start its workers first (they serve the runs "
                           "this moves), or pass --unchecked")
    return await check(client, version, runs, timeout=timeout, progress=progress)

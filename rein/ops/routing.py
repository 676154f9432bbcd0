"""A deployment's routing as an operator sees and moves it (`rein deployment status|set-current|rollback`).

A run waits on a build when its next workflow task goes there: the current build for the runs that follow it, else
the build it is pinned to. A build has a worker when one polled in the last REIN_POLLER_FRESH_S (an idle worker polls
again within 60 s): a killed one reads "last poll N s ago" for up to 70 s.
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
from rein.temporal.promotion import Check, ReplayFailure, any_of, check, follow_current, running


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
    token: bytes = b""  # the routing's conflict token: a move is refused if the routing changed since

    def version(self, build_id: str | None) -> VersionState | None:
        return next((v for v in self.versions if v.build_id == build_id), None)

    def previous(self) -> str | None:
        """The build that was current last before the current one (a rollback's target)."""
        earlier = [v for v in self.versions if v.build_id != self.current and v.last_current is not None]
        return max(earlier, key=lambda v: v.last_current or datetime.min.replace(tzinfo=UTC)).build_id if earlier else None

    def waiting_query(self, v: VersionState) -> str:
        """The open agent runs whose next workflow task goes to `v`."""
        on = [f'TemporalWorkerDeploymentVersion = "{self.name}:{v.build_id}" AND TemporalWorkflowVersioningBehavior = "Pinned"',
              *(follow_current(self.name, v.queues) if v.build_id == self.current else [])]
        return f'WorkflowType = "{WORKFLOW_TYPE}" AND ExecutionStatus = "Running" AND ({any_of(on)})'

    def outage(self, v: VersionState) -> str:
        """One line for a build with runs waiting on it and no worker, with what would move them."""
        since = f"since {v.last_poll:%Y-%m-%d %H:%M:%S} UTC" if v.last_poll else "listed (the server forgets a stopped one at once)"
        if v.build_id == self.current:
            move = (f"`rein deployment rollback` moves them to {previous}" if (previous := self.previous()) else
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


async def _routing(client: Client, name: str) -> DeploymentState | None:
    """The routing and each build's state as one describe says; None: no such deployment."""
    if (described := await d.describe(client, name)) is None:
        return None
    info = described.worker_deployment_info
    routing = info.routing_config
    return DeploymentState(name, routing.current_deployment_version.build_id or None,
                           routing.ramping_deployment_version.build_id or None, routing.ramping_version_percentage,
                           info.manager_identity or None, [
        VersionState(s.deployment_version.build_id, WorkerDeploymentVersionStatus.Name(s.status).rsplit("_", 1)[-1].lower(),
                     last_current=next((getattr(s, f).ToDatetime(UTC) for f in ("current_since_time", "last_current_time")
                                        if s.HasField(f)), None)) for s in info.version_summaries], described.conflict_token)


async def deployment_state(client: Client, name: str) -> DeploymentState | None:
    """The routing, and each build's workers, waiting runs and last check; None if the deployment does not exist."""
    if (state := await _routing(client, name)) is None:
        return None
    fresh = fresh_since()
    for v in (v for v in state.versions if v.status != "drained"):  # a drained build has no runs: nothing more to say
        described = await d.describe_version(client, name, v.build_id)
        v.behavior, v.check = ((meta := d.rein_metadata(described) or {}).get("behavior"), meta.get("check"))
        v.queues = [q.name for q in described.version_task_queues if q.type == 1]  # workflow task queues
        polls = [p.last_access_time.ToSeconds() for p in await version_pollers(client, described)]
        v.last_poll, v.polling = datetime.fromtimestamp(max(polls), UTC) if polls else None, any(t > fresh for t in polls)
        v.waiting = (await client.count_workflows(state.waiting_query(v))).count
    if (current := state.version(state.current)) and current.check and current.check.get("left_ids"):
        ids = " OR ".join(f'WorkflowId = "{w}"' for w in current.check["left_ids"])
        current.check["open_left"] = (await client.count_workflows(f'ExecutionStatus = "Running" AND ({ids})')).count
    return state


async def move_routing(client: Client, deployment: str, target: str | None, *, ramp: float | None = None,
                       unchecked: bool = False, progress: Any = None) -> tuple[str | None, Check]:
    """Make `target` (None: the previous build) current, or ramp it, once its workers replayed every run that moves;
    those it cannot replay are pinned to the build they are on first. (The build current before, the check.)"""
    if (state := await _routing(client, deployment)) is None:
        raise RoutingError(f"no worker deployment {deployment!r} (no versioned worker has polled yet)")
    if target is None and (target := state.previous()) is None:
        raise RoutingError(f"deployment {deployment!r} has no build that was current before: pass --to BUILD")
    if state.version(target) is None:
        builds = ", ".join(v.build_id for v in state.versions) or "none"
        raise RoutingError(f"deployment {deployment!r} has no build {target!r} (its builds: {builds})")
    if target == state.current and ramp is None:
        raise RoutingError(f"build {target} is current already")
    version = WorkerDeploymentVersion(deployment, target)
    moving = await running(client, follow_current(deployment, await d.version_queues(client, deployment, target)))
    found = Check(moving, len(moving), build=target) if unchecked or not moving else await _checked(client, version, moving, progress)
    if found.checked < len(moving):
        raise RoutingError(f"build {target} is not current: {found.refusal()}; nothing moved", replay=True)
    for failure in found.blocking:
        if not (stays := failure.run.build or state.current):
            raise RoutingError(f"build {target} cannot replay unversioned {failure.line()}: it has no build to stay "
                               "pinned to; pass --unchecked to move it anyway", replay=True)
        await d.override_run(client, failure.run.workflow_id, failure.run.run_id, WorkerDeploymentVersion(deployment, stays))
    await d.set_current(client, version, ramp=ramp, conflict_token=state.token)
    return state.current, found


async def _checked(client: Client, version: WorkerDeploymentVersion, runs: list[Any], progress: Any) -> Check:
    described = await d.describe_version(client, version.deployment_name, version.build_id)
    if not (d.rein_metadata(described) or {}).get("replay_check"):
        why = f"build {version.build_id} cannot be asked to replay runs (an earlier rein, or not rein's)"
        return Check(runs, len(runs), [ReplayFailure(r, why) for r in runs], version.build_id)
    if not any(p.last_access_time.ToSeconds() > fresh_since() for p in await version_pollers(client, described)):
        raise RoutingError(f"no worker of build {version.build_id} polls: start its workers first (they serve the runs "
                           "this moves), or pass --unchecked")
    return await check(client, version, runs, progress=progress)

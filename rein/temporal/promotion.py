"""A build checks every run that would move to it before it takes them: a new build's promotion, an operator's move.

As a versioned worker starts (REIN_PROMOTE=new), a build never current nor ramping becomes current, once, after its
own workers replayed every open run that would move to it: the deployment's AUTO_UPGRADE runs, unversioned runs on
its queues (an earlier, unversioned rein) and runs an earlier rein pinned by default. `check` starts ReinReplayCheck
pinned to the build: CHUNK runs per activity, spread over the build's workers, bounded by REIN_PROMOTE_TIMEOUT_S,
its progress logged and kept in the version's metadata, where `rein deployment status` reads it. A run that fails:
- and cannot go on where it is either (its task keeps failing there, it is older than the support window, or an
  earlier rein pinned it, where it stays): named and left as it is; it never blocks a build;
- else the build cannot take it: the build stays out of the routing and says so, naming the runs and the first
  mismatch. Replicas share one check (its workflow id); the routing's conflict token lets one of them switch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowHistory
from temporalio.common import PinnedVersioningOverride, VersioningBehavior, WorkerDeploymentVersion, WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer

from rein.core.contract import PROBLEMS, REPLAY_CHECK, REPLAY_CHECK_WORKFLOW_TYPE
from rein.temporal import deployment as d

CHUNK = 50
"""Runs one activity replays: a check of N runs is N / CHUNK activities, taken by any of the build's workers."""
REGISTER_TIMEOUT_S = 60.0
"""How long a new version may take to register its queues with the server before it can be made current."""
PROGRESS_S = 10.0
log = logging.getLogger("rein.deployment")


@dataclass(frozen=True)
class RunRef:
    workflow_id: str
    run_id: str
    build: str = ""
    """The version its last workflow task ran on ("": none yet)."""
    stuck: bool = False
    """Its workflow task keeps failing where it is (TemporalReportedProblems)."""
    pinned: bool = False
    """Pinned by an earlier rein: it moves only if the build replays it, else it stays pinned."""


@dataclass(frozen=True)
class ReplayFailure:
    run: RunRef
    error: str

    @property
    def left(self) -> bool:
        """It cannot go on where it is either, or stays where it is: it never blocks a build."""
        return self.run.stuck or self.run.pinned or "support window" in self.error

    def line(self) -> str:
        """`run ID (why)` on one line: a nondeterminism error's own sentence when there is one."""
        why = " ".join(self.error.split()) or "?"
        if "Nondeterminism error:" in why:
            why = "nondeterminism: " + why.split("Nondeterminism error:", 1)[1].split('", source')[0].strip()
        return f"run {self.run.workflow_id} ({why[:300]})"


@dataclass
class Check:
    """A build's answer for `runs`, as far as it got."""

    runs: list[RunRef]
    checked: int = 0
    failures: list[ReplayFailure] = field(default_factory=list)

    def blocking(self) -> list[ReplayFailure]:
        return [f for f in self.failures if not f.left]

    def left(self) -> list[ReplayFailure]:
        return [f for f in self.failures if f.left]

    def refusal(self, timeout: float) -> str | None:
        """Why the build cannot take the runs (one line), or None."""
        if self.checked < len(self.runs):
            return (f"it replayed {self.checked} of the {len(self.runs)} runs that would move to it within "
                    f"{timeout:g} s (REIN_PROMOTE_TIMEOUT_S)")
        blocking = self.blocking()
        if not blocking:
            return None
        more = f" and {len(blocking) - 1} more" if len(blocking) > 1 else ""
        return (f"it cannot replay {len(blocking)} of the {len(self.runs)} runs that would move to it: "
                f"{blocking[0].line()}{more}; see it with `{replay_command(blocking[0].run)}`")

    def left_line(self) -> str:
        left = self.left()
        return (f"{len(left)} run{'s' if len(left) != 1 else ''} it cannot replay left as they are (they cannot go "
                f"on where they are either, or stay pinned): {', '.join(f.line() for f in left[:3])}") if left else ""

    def record(self, refusal: str | None) -> dict[str, Any]:
        """What the version's metadata keeps of it (`rein deployment status`)."""
        return {"at": datetime.now(UTC).isoformat(), "runs": len(self.runs), "checked": self.checked,
                "refused": refusal, "left": self.left_line()[:1000],
                "left_ids": [f.run.workflow_id for f in self.left()[:20]]}


def replay_command(run: RunRef) -> str:
    return f"rein replay --query 'WorkflowId=\"{run.workflow_id}\"'"


def replayer_of(worker: Any) -> Replayer:
    """A Replayer with the worker's own workflows, sandbox and converter: what decides whether it can take a run."""
    config = worker.config(active_config=True)
    return Replayer(workflows=config["workflows"], workflow_runner=config["workflow_runner"],
                    data_converter=worker.client.data_converter, namespace=worker.client.namespace,
                    workflow_failure_exception_types=config.get("workflow_failure_exception_types") or [])


async def replay_failures(client: Client, replayer: Replayer, runs: list[RunRef]) -> list[ReplayFailure]:
    """The runs this code does not replay, in one replay worker; runs that closed and were deleted are skipped."""
    async def fetch(run: RunRef) -> WorkflowHistory | None:
        try:
            return await client.get_workflow_handle(run.workflow_id, run_id=run.run_id).fetch_history()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise

    fetched = await asyncio.gather(*(fetch(r) for r in runs))
    of = {id(h): r for h, r in zip(fetched, runs, strict=True) if h is not None}

    async def histories() -> Any:
        for history in fetched:
            if history is not None:
                yield history

    failures = []
    async with replayer.workflow_replay_iterator(histories()) as results:
        async for result in results:
            if result.replay_failure is not None:
                failures.append(ReplayFailure(of[id(result.history)], str(result.replay_failure)))
    return failures


class ReplayCheckActivity:
    """The activity a versioned worker serves; `replayer` is the worker's own, set as it starts running."""

    def __init__(self) -> None:
        self.replayer: Replayer | None = None

    @activity.defn(name=REPLAY_CHECK)
    async def replay_check(self, runs: list[list[str]]) -> list[list[str]]:
        if self.replayer is None:
            raise RuntimeError("this worker has not started yet")
        failures = await replay_failures(activity.client(), self.replayer, [RunRef(w, r) for w, r in runs])
        return [[f.run.workflow_id, f.run.run_id, f.error] for f in failures]


async def check(client: Client, version: WorkerDeploymentVersion, runs: list[RunRef], *, timeout: float,
                progress: Callable[[Check], Awaitable[None]] | None = None, workflow_id: str | None = None) -> Check:
    """`version`'s workers replay `runs` (ReinReplayCheck pinned to it), within `timeout` s; `progress` is told every
    PROGRESS_S. Raises TimeoutError when the version has polled no queue."""
    found = Check(runs)
    if not runs:
        return found
    queues = await d.version_queues(client, version.deployment_name, version.build_id)
    if not queues:
        raise TimeoutError(f"build {version.build_id} has polled no queue")
    handle = await client.start_workflow(
        REPLAY_CHECK_WORKFLOW_TYPE, args=[[[r.workflow_id, r.run_id] for r in runs], CHUNK],
        id=workflow_id or f"rein-replay-check-{uuid.uuid4().hex[:12]}", task_queue=queues[0],
        execution_timeout=timedelta(seconds=timeout), versioning_override=PinnedVersioningOverride(version),
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=f"does build {version.build_id} replay {len(runs)} runs?")
    of = {(r.workflow_id, r.run_id): r for r in runs}

    def take(checked: int, failed: list[list[str]]) -> None:
        found.checked, found.failures = checked, [ReplayFailure(of[w, r], why) for w, r, why in failed]

    answer = asyncio.ensure_future(handle.result())
    deadline = asyncio.get_running_loop().time() + timeout
    while not answer.done() and asyncio.get_running_loop().time() < deadline:
        await asyncio.wait({answer}, timeout=PROGRESS_S)
        if not answer.done():
            with contextlib.suppress(Exception):  # not answered yet: the progress so far stays
                take(*await handle.query("progress"))
            if progress is not None:
                await progress(found)
    if answer.done() and answer.exception() is None:
        take(len(runs), answer.result())
    answer.cancel()
    return found


async def _running(client: Client, query: str, pinned: bool = False) -> list[RunRef]:
    def build(run: Any) -> str:
        return str((run.search_attributes.get("TemporalWorkerDeploymentVersion") or [""])[0]).partition(":")[2]

    return [RunRef(run.id, run.run_id, build(run), bool(run.search_attributes.get(PROBLEMS)), pinned)
            async for run in client.list_workflows(f'ExecutionStatus = "Running" AND ({query})')]


async def runs_that_move(client: Client, deployment: str, queues: list[str]) -> list[RunRef]:
    """The open runs that follow the deployment's current version when it changes: its AUTO_UPGRADE runs (of any
    of its versions), and unversioned runs on `queues` (an earlier, unversioned rein)."""
    clauses = [f'TemporalWorkerDeployment = "{deployment}" AND TemporalWorkflowVersioningBehavior = "AutoUpgrade"',
               *(f'TaskQueue = "{q}" AND TemporalWorkerDeploymentVersion IS NULL' for q in queues)]
    return await _running(client, " OR ".join(f"({c})" for c in clauses))


async def pinned_by_an_earlier_rein(client: Client, deployment: str, build_id: str) -> list[RunRef]:
    """Open runs PINNED to other versions that a rein build from before AUTO_UPGRADE wrote no metadata for (their
    runs were pinned by rein's default then, not by anyone's choice)."""
    pinned = await _running(client, f'TemporalWorkerDeployment = "{deployment}" AND TemporalWorkflowVersioningBehavior'
                                    f' = "Pinned" AND TemporalWorkerDeploymentVersion != "{deployment}:{build_id}" AND '
                                    f'WorkflowType != "{REPLAY_CHECK_WORKFLOW_TYPE}"', pinned=True)
    earlier = {b for b in {r.build for r in pinned}
               if b and d.rein_metadata(await d.describe_version(client, deployment, b)) is None}
    return [r for r in pinned if r.build in earlier]


async def promote(client: Client, version: WorkerDeploymentVersion, behavior: VersioningBehavior,
                  policy: str = "new", queues: Callable[[], set[str]] = set) -> bool:
    """Once, as a versioned worker starts: mark the version as rein's, and make it current when it is new (or the
    deployment has none; "manual": only then), once its workers replayed the runs that move. `queues`: the task
    queues this process polls as the version, which the server must list first. True if it made it current."""
    from rein.settings import current as settings

    deadline = asyncio.get_running_loop().time() + REGISTER_TIMEOUT_S
    name, build = version.deployment_name, version.build_id
    behavior_name = next(n for n, b in d.BEHAVIORS.items() if b == behavior)
    if not await _retried(lambda: d.write_metadata(client, version, behavior=behavior_name, replay_check=1), deadline):
        return False
    described = await d.describe(client, name)
    current = d.current_build_id(described)
    if described is None or current == build:
        return False
    if described.worker_deployment_info.manager_identity not in ("", client.identity):
        log.info("rein deployment %s: routed by %s: build %s waits for it", name,
                 described.worker_deployment_info.manager_identity, build)
        return False
    if d.was_routed(described, build) or (policy != "new" and d.was_routed(described)):
        return False  # a build started again (a drain, a restart, a rollback's leftover) or promotion by hand
    registered = await _registered(client, version, queues, deadline)
    earlier = await pinned_by_an_earlier_rein(client, name, build)
    runs = [*await runs_that_move(client, name, registered), *earlier]
    timeout = settings().promote_timeout_s
    log.info("rein deployment %s: build %s replays the %d runs that would move to it first", name, build, len(runs))
    found = await check(client, version, runs, timeout=timeout, progress=lambda c: _told(client, version, c),
                        workflow_id=f"rein-promotion-{name}-{build}")
    refusal = found.refusal(timeout)
    await d.write_metadata(client, version, check=found.record(refusal))
    left = f"; {found.left_line()}" if found.left() else ""
    if refusal:
        log.warning("rein deployment %s: build %s is not current: %s%s; it serves only runs pinned to it "
                    "(`rein deployment set-current %s` routes new runs here anyway)", name, build, refusal, left, build)
        return False
    if not await _switch(client, version, described.conflict_token, current, deadline, len(runs), left):
        return False
    for run in set(earlier) - {f.run for f in found.failures}:
        await d.override_run(client, run.workflow_id, run.run_id, None)
        log.info("rein deployment %s: run %s follows the current build now (an earlier rein had pinned it)", name,
                 run.workflow_id)
    return True


async def _told(client: Client, version: WorkerDeploymentVersion, found: Check) -> None:
    """A check's progress: in the log and in the version's metadata (`rein deployment status`)."""
    log.info("rein deployment %s: build %s replayed %d of the %d runs that would move to it (%d do not)",
             version.deployment_name, version.build_id, found.checked, len(found.runs), len(found.failures))
    with contextlib.suppress(RPCError):
        await d.write_metadata(client, version, check={**found.record(None), "refused": None, "checking": True})


async def _retried(call: Callable[[], Awaitable[Any]], deadline: float) -> bool:
    """`call`, again while the version is not registered yet (its first poll registers it), bounded."""
    while True:
        try:
            await call()
            return True
        except RPCError as err:
            if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION,
                                  RPCStatusCode.RESOURCE_EXHAUSTED) or asyncio.get_running_loop().time() > deadline:
                log.warning("rein deployment: could not record this build's metadata: %s", err.message)
                return False
            await asyncio.sleep(0.2)


async def _registered(client: Client, version: WorkerDeploymentVersion, queues: Callable[[], set[str]],
                      deadline: float) -> list[str]:
    """The version's workflow task queues once every queue this process polls is among them (bounded)."""
    while True:
        registered = await d.version_queues(client, version.deployment_name, version.build_id)
        if queues() <= set(registered) or asyncio.get_running_loop().time() > deadline:
            return registered
        await asyncio.sleep(0.2)


async def _switch(client: Client, version: WorkerDeploymentVersion, token: bytes, current: str | None,
                  deadline: float, runs: int, left: str) -> bool:
    """set-current with the conflict token: another replica's promotion (or an operator's change) meanwhile wins."""
    name, build, missing_ok = version.deployment_name, version.build_id, False
    while True:
        try:
            await d.set_current(client, version, conflict_token=token, ignore_missing_task_queues=missing_ok)
            log.info("rein deployment %s: build %s is current (%s; it replayed the %d runs that move to it%s)", name,
                     build, f"was {current}" if current else "the first", runs, left)
            return True
        except RPCError as err:
            if err.status == RPCStatusCode.FAILED_PRECONDITION and "conflict" in err.message.lower():
                return False  # the routing changed since it was read: someone else decided
            if "missing active task queues" in err.message and not missing_ok:
                log.warning("rein deployment %s: build %s is current, but the version before it polls queues it does "
                            "not (yet); their new runs go to unversioned workers until this build's workers poll them "
                            "(the server: %s)", name, build, err.message)
                missing_ok = True
            elif asyncio.get_running_loop().time() > deadline:
                log.warning("rein deployment %s: build %s is not current: %s; make it current with `rein deployment "
                            "set-current %s`", name, build, err.message, build)
                return False
            else:
                await asyncio.sleep(0.5)  # a queue of this version is not registered yet

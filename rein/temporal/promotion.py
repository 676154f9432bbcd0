"""A build replays every run that would move to it before it takes them: a new build's promotion, an operator's move.

The check is ReinReplayCheck pinned to the build: its workers replay CHUNK runs per activity, within
REIN_PROMOTE_TIMEOUT_S. A run that cannot go on where it is either (stuck there, older than the support window) or
that an earlier rein pinned never blocks a build: it is named and left as it is (docs/deploys.md).
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
from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride, VersioningBehavior, WorkerDeploymentVersion, WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer

from rein import settings
from rein.core.contract import PROBLEMS, REPLAY_CHECK, REPLAY_CHECK_WORKFLOW_TYPE
from rein.temporal import deployment as d

CHUNK, PROGRESS_S, REGISTER_TIMEOUT_S = 50, 10.0, 300.0
"""REGISTER_TIMEOUT_S: how long a starting build waits for the server to register its version and queues (its first
polls; the server's own workflows do it, which a loaded server may take minutes for) before it gives up its promotion."""
log = logging.getLogger("rein.deployment")


@dataclass(frozen=True)
class RunRef:
    workflow_id: str
    run_id: str
    build: str = ""  # the version its last workflow task ran on
    stuck: bool = False  # its task keeps failing where it is
    pinned: bool = False  # pinned by an earlier rein: it moves only if the build replays it


@dataclass(frozen=True)
class ReplayFailure:
    run: RunRef
    error: str

    @property
    def left(self) -> bool:
        return self.run.stuck or self.run.pinned or "support window" in self.error

    def line(self) -> str:
        why = " ".join(self.error.split()) or "?"
        if "Nondeterminism error:" in why:
            why = "nondeterminism: " + why.split("Nondeterminism error:", 1)[1].split('", source')[0].strip()
        return f"run {self.run.workflow_id} ({why[:300]})"


@dataclass
class Check:
    runs: list[RunRef]
    checked: int = 0
    failures: list[ReplayFailure] = field(default_factory=list)
    build: str = ""  # the build asked

    @property
    def blocking(self) -> list[ReplayFailure]:
        return [f for f in self.failures if not f.left]

    @property
    def left(self) -> list[ReplayFailure]:
        return [f for f in self.failures if f.left]

    def refusal(self, timeout: float | None = None) -> str | None:
        """Why the build cannot take the runs, or None."""
        if self.checked < len(self.runs):
            return (f"it replayed {self.checked} of the {len(self.runs)} runs that would move to it within "
                    f"{timeout or settings.current().promote_timeout_s:g} s (REIN_PROMOTE_TIMEOUT_S)")
        if not (blocking := self.blocking):
            return None
        also = ", ".join(f.run.workflow_id for f in blocking[1:4]) + (f" and {len(blocking) - 4} more" if len(blocking) > 4 else "")
        return (f"it cannot replay {len(blocking)} of the {len(self.runs)} runs that would move to it: {blocking[0].line()}"
                + (f", also {also}" if also else "")
                + f"; see it with `rein replay --query 'WorkflowId=\"{blocking[0].run.workflow_id}\"'`")

    def record(self, refusal: str | None, **more: Any) -> dict[str, Any]:
        """What the version's metadata keeps (`rein deployment status`)."""
        said = f"{len(self.left)} runs it cannot replay are left as they are: {', '.join(f.line() for f in self.left[:3])}"
        return {"at": datetime.now(UTC).isoformat(), "runs": len(self.runs), "checked": self.checked, "refused": refusal,
                "left": said[:1000] if self.left else "", "left_ids": [f.run.workflow_id for f in self.left[:20]], **more}


def replayer_of(worker: Any) -> Replayer:
    """The worker's own workflows, sandbox and converter: what decides whether it can take a run."""
    config = worker.config(active_config=True)
    return Replayer(workflows=config["workflows"], workflow_runner=config["workflow_runner"],
                    data_converter=worker.client.data_converter, namespace=worker.client.namespace,
                    workflow_failure_exception_types=config.get("workflow_failure_exception_types") or [])


class ReplayCheckActivity:
    """The activity a versioned worker serves; `replayer` is the worker's own, set as it starts running."""

    def __init__(self) -> None:
        self.replayer: Replayer | None = None

    @activity.defn(name=REPLAY_CHECK)
    async def replay_check(self, runs: list[list[str]]) -> list[list[str]]:
        """[workflow id, run id, why] of each run this code does not replay (in one replay worker)."""
        if self.replayer is None:
            raise RuntimeError("this worker has not started yet")  # retried: it will have
        fetched = {id(h): (h, run) for h, run in zip(await asyncio.gather(*map(_history, runs)), runs, strict=True) if h}
        async with self.replayer.workflow_replay_iterator(_each(fetched)) as results:
            return [[*fetched[id(r.history)][1], str(r.replay_failure)] async for r in results if r.replay_failure]


async def _history(run: list[str]) -> Any:
    """None: deleted meanwhile (nothing to replay)."""
    return await d.absent(activity.client().get_workflow_handle(run[0], run_id=run[1]).fetch_history())


async def _each(fetched: dict[int, Any]) -> Any:
    for history, _ in fetched.values():
        yield history


async def check(client: Client, version: WorkerDeploymentVersion, runs: list[RunRef], *,
                progress: Callable[[Check], Awaitable[None]] | None = None, workflow_id: str | None = None) -> Check:
    """`version`'s workers replay `runs` within REIN_PROMOTE_TIMEOUT_S (`progress` told every PROGRESS_S)."""
    found, of, loop = Check(runs, build=version.build_id), {(r.workflow_id, r.run_id): r for r in runs}, asyncio.get_running_loop()
    if not runs:
        return found
    timeout = settings.current().promote_timeout_s
    handle = await client.start_workflow(
        REPLAY_CHECK_WORKFLOW_TYPE, args=[[[r.workflow_id, r.run_id] for r in runs], CHUNK],
        id=workflow_id or f"rein-replay-check-{uuid.uuid4().hex[:12]}", execution_timeout=timedelta(seconds=timeout),
        task_queue=(await d.version_queues(client, version.deployment_name, version.build_id))[0],
        versioning_override=PinnedVersioningOverride(version), id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=f"does build {version.build_id} replay {len(runs)} runs?")

    def take(checked: int, failed: list[list[str]]) -> None:
        # A replica's check of the same build may list a run started meanwhile: it is known by its ids alone.
        found.checked, found.failures = checked, [ReplayFailure(of.get((w, r), RunRef(w, r)), why) for w, r, why in failed]

    answer, deadline = asyncio.ensure_future(handle.result()), loop.time() + timeout
    while not answer.done() and loop.time() < deadline:
        await asyncio.wait({answer}, timeout=min(PROGRESS_S, deadline - loop.time()))
        if not answer.done():
            with contextlib.suppress(Exception):  # not answered yet: the progress so far stays
                take(*await handle.query("progress"))
            if progress is not None:
                await progress(found)
    if answer.done() and answer.exception() is None:
        take(len(runs), answer.result())
    answer.cancel()
    return found


def follow_current(deployment: str, queues: list[str]) -> list[str]:
    """Visibility clauses of the runs that follow the current version: the deployment's AUTO_UPGRADE runs, and
    unversioned runs on `queues` (an earlier, unversioned rein)."""
    return [f'TemporalWorkerDeployment = "{deployment}" AND TemporalWorkflowVersioningBehavior = "AutoUpgrade"',
            *(f'TaskQueue = "{q}" AND TemporalWorkerDeploymentVersion IS NULL' for q in queues)]


def any_of(clauses: list[str]) -> str:
    return " OR ".join(f"({c})" for c in clauses)


async def running(client: Client, clauses: list[str], pinned: bool = False) -> list[RunRef]:
    """The open runs any of `clauses` matches."""
    return [RunRef(run.id, run.run_id, str((run.search_attributes.get("TemporalWorkerDeploymentVersion") or [""])[0])
                   .partition(":")[2], bool(run.search_attributes.get(PROBLEMS)), pinned)
            async for run in client.list_workflows(f'ExecutionStatus = "Running" AND ({any_of(clauses)})')]


async def promote(client: Client, version: WorkerDeploymentVersion, behavior: VersioningBehavior,
                  policy: str = "new", queues: Callable[[], set[str]] = set) -> bool:
    """Once, as a versioned worker starts: mark the version as rein's; make it current when it is new (or the
    deployment has none; "manual": only then) and can take the runs. `queues`: what this process polls.
    Replicas share one check (its workflow id) and one switch (the routing's conflict token)."""
    loop, (name, build) = asyncio.get_running_loop(), (version.deployment_name, version.build_id)
    deadline, kind = loop.time() + REGISTER_TIMEOUT_S, next(n for n, b in d.BEHAVIORS.items() if b == behavior)
    while True:  # the version exists once its first poll registered it
        try:
            await d.write_metadata(client, version, behavior=kind, replay_check=1)
            break
        except RPCError as err:
            if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION) or loop.time() > deadline:
                log.warning("rein deployment %s: build %s's metadata not written: %s", name, build, err.message)
                return False
            await asyncio.sleep(0.2)
    described = await d.describe(client, name)
    current, manager = d.current_build_id(described), described.worker_deployment_info.manager_identity if described else ""
    if described is None or current == build or manager not in ("", client.identity) or d.was_routed(described, build) \
            or (policy != "new" and d.was_routed(described)):
        return False  # nothing to do; a routing manager of its own; a build started again; promotion by hand
    while not queues() <= set(registered := await d.version_queues(client, name, build)) and loop.time() < deadline:
        await asyncio.sleep(0.2)
    pinned = await running(client, [f'TemporalWorkerDeployment = "{name}" AND TemporalWorkflowVersioningBehavior = '
                                     f'"Pinned" AND WorkflowType != "{REPLAY_CHECK_WORKFLOW_TYPE}"'], pinned=True)
    earlier = {b for b in {r.build for r in pinned} if d.rein_metadata(await d.describe_version(client, name, b)) is None}
    runs = [*await running(client, follow_current(name, registered)), *(r for r in pinned if r.build in earlier)]
    log.info("rein deployment %s: build %s replays the %d runs that would move to it first", name, build, len(runs))
    found = await check(client, version, runs, progress=lambda c: _told(client, version, c),
                        workflow_id=f"rein-promotion-{name}-{build}")
    refusal, left = found.refusal(), "; " + found.record(None)["left"] if found.left else ""
    await d.write_metadata(client, version, check=found.record(refusal))
    if refusal:
        log.warning("rein deployment %s: build %s is not current: %s%s; it serves only runs pinned to it (`rein "
                    "deployment set-current %s` routes new runs here anyway)", name, build, refusal, left, build)
        return False
    try:
        await d.set_current(client, version, conflict_token=described.conflict_token, ignore_missing_task_queues=True)
    except RPCError as err:
        if err.status != RPCStatusCode.FAILED_PRECONDITION:
            raise
        return False  # the routing changed since it was read: another replica or an operator decided
    log.info("rein deployment %s: build %s is current (%s; it replayed the %d runs that move to it%s)", name, build,
             f"was {current}" if current else "the first", len(runs), left)
    for run in {r for r in runs if r.pinned} - {f.run for f in found.failures}:  # an earlier rein pinned it
        await d.override_run(client, run.workflow_id, run.run_id, None)
        log.info("rein deployment %s: run %s follows the current build now (an earlier rein had pinned it)", name,
                 run.workflow_id)
    return True


async def _told(client: Client, version: WorkerDeploymentVersion, found: Check) -> None:
    log.info("rein deployment %s: build %s replayed %d of the %d runs that would move to it (%d do not)",
             version.deployment_name, version.build_id, found.checked, len(found.runs), len(found.failures))
    with contextlib.suppress(RPCError):
        await d.write_metadata(client, version, check=found.record(None, checking=True))

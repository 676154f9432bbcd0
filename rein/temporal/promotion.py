"""A new build promotes itself once, after proving it replays the runs it would take over.

As a versioned worker starts (REIN_PROMOTE=new, the default), a build that was never current nor ramping
becomes the deployment's current version, so a deploy needs no second step. First it replays, with its
own workflows, sandbox and converter, the histories of the open runs that would move to it: the current
version's AUTO_UPGRADE runs, the unversioned runs on its queues (an earlier, unversioned rein), and the
runs an earlier rein pinned by default (below); stuck runs first, then the newest, at most REIN_PROMOTE_REPLAYS
(200). A run it cannot replay stops the promotion: one line (run, first mismatch, the command that shows
it), and the build serves only the runs pinned to it. Replicas of one build all try once; the routing's
conflict token lets one through and the others see it done. Nothing here runs again later.

Runs that a rein build from before AUTO_UPGRADE (no rein metadata on its version) pinned by default are
moved with the promotion: each one this build replays gets the AUTO_UPGRADE override, so it carries on
here instead of waiting for a build its operator has replaced. Runs pinned by choice (REIN_VERSIONING=pinned,
or an operator's override) stay where they are.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer

from rein.temporal.deployment import (
    current_build_id,
    describe,
    describe_version,
    mark_version,
    override_run,
    rein_metadata,
    set_current,
    version_queues,
    was_routed,
)

PROOF_LIMIT = 200
"""How many open runs a promotion replays at most (REIN_PROMOTE_REPLAYS): stuck runs first, then the newest."""
REGISTER_TIMEOUT_S = 60.0
"""How long a new version may take to register its queues with the server before it can be made current."""

log = logging.getLogger("rein.deployment")


@dataclass(frozen=True)
class RunRef:
    workflow_id: str
    run_id: str


@dataclass(frozen=True)
class ReplayFailure:
    run: RunRef
    error: str

    def line(self) -> str:
        """`run ID (why)` on one line: a nondeterminism error's own sentence when there is one."""
        why = " ".join(self.error.split()) or "?"
        if "Nondeterminism error:" in why:
            why = "nondeterminism: " + why.split("Nondeterminism error:", 1)[1].split('", source')[0].strip()
        return f"run {self.run.workflow_id} ({why[:300]})"


def replayer_of(worker: Any) -> Replayer:
    """A Replayer with the worker's own workflows, sandbox and converter: what decides whether it can take a run."""
    config = worker.config(active_config=True)
    return Replayer(workflows=config["workflows"], workflow_runner=config["workflow_runner"],
                    data_converter=worker.client.data_converter, namespace=worker.client.namespace,
                    workflow_failure_exception_types=config.get("workflow_failure_exception_types") or [])


async def replay_failures(client: Client, replayer: Replayer, runs: list[RunRef], *,
                          first_only: bool = False) -> list[ReplayFailure]:
    """The runs of `runs` whose histories this code does not replay (`first_only`: stop at the first); runs that
    closed and were deleted meanwhile are skipped."""
    failures: list[ReplayFailure] = []
    for run in runs:
        try:
            history = await client.get_workflow_handle(run.workflow_id, run_id=run.run_id).fetch_history()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                continue
            raise
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            failures.append(ReplayFailure(run, str(result.replay_failure)))
            if first_only:
                break
    return failures


def proof_limit() -> int:
    try:
        return max(int(os.environ.get("REIN_PROMOTE_REPLAYS", PROOF_LIMIT)), 0)
    except ValueError:
        raise ValueError("REIN_PROMOTE_REPLAYS must be a number of runs") from None


async def list_runs(client: Client, query: str, limit: int) -> list[RunRef]:
    """Open runs matching `query`: stuck ones first, then the newest, at most `limit`."""
    found: list[RunRef] = []
    for extra in ("TemporalReportedProblems IS NOT NULL", "TemporalReportedProblems IS NULL"):
        if len(found) >= limit:
            break
        async for run in client.list_workflows(f'ExecutionStatus = "Running" AND ({query}) AND {extra}',
                                               limit=limit - len(found)):
            found.append(RunRef(run.id, run.run_id))
    return found


async def runs_that_move(client: Client, deployment: str, current: str | None, queues: list[str],
                         limit: int) -> list[RunRef]:
    """The open runs that follow the deployment's current version when it changes: AUTO_UPGRADE runs of the
    current version, and unversioned runs on the new version's queues (an earlier, unversioned rein)."""
    clauses = [f'TaskQueue = "{q}" AND TemporalWorkerDeploymentVersion IS NULL' for q in queues]
    if current is not None:
        clauses.append(f'TemporalWorkerDeploymentVersion = "{deployment}:{current}" AND '
                       f'TemporalWorkflowVersioningBehavior = "AutoUpgrade"')
    return await list_runs(client, " OR ".join(f"({c})" for c in clauses), limit) if clauses else []


async def pinned_by_an_earlier_rein(client: Client, deployment: str, build_id: str, limit: int) -> list[RunRef]:
    """Open runs PINNED to other versions of the deployment that a rein build from before AUTO_UPGRADE wrote
    no metadata for (their runs were pinned by rein's default then, not by anyone's choice)."""
    found: dict[str, list[RunRef]] = {}
    async for run in client.list_workflows(
            f'ExecutionStatus = "Running" AND TemporalWorkerDeployment = "{deployment}" AND '
            f'TemporalWorkflowVersioningBehavior = "Pinned" AND '
            f'TemporalWorkerDeploymentVersion != "{deployment}:{build_id}"', limit=limit):
        version = str((run.search_attributes.get("TemporalWorkerDeploymentVersion") or [""])[0])
        found.setdefault(version.partition(":")[2], []).append(RunRef(run.id, run.run_id))
    earlier = []
    for build, runs in found.items():
        if build and rein_metadata(await describe_version(client, deployment, build)) is None:
            earlier.extend(runs)
    return earlier


def replay_command(run: RunRef) -> str:
    return f"rein replay --query 'WorkflowId=\"{run.workflow_id}\"'"


async def promote(client: Client, version: WorkerDeploymentVersion, replayer: Replayer, behavior: VersioningBehavior,
                  policy: str = "new", queues: Callable[[], set[str]] = set) -> bool:
    """Once, as a versioned worker starts: mark the version as rein's, and make it current when it is new (or the
    deployment has none; policy "manual": only then), after replaying the runs that would move. `queues`: the
    task queues this process polls as the version, which the server must list before it is proven. True if
    it made the version current."""
    deadline = asyncio.get_running_loop().time() + REGISTER_TIMEOUT_S
    while True:  # the version exists once its first poll registered it: wait for that, bounded
        try:
            await mark_version(client, version, behavior)
            break
        except RPCError as err:
            if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION,
                                  RPCStatusCode.RESOURCE_EXHAUSTED) or asyncio.get_running_loop().time() > deadline:
                log.warning("rein deployment %s: could not record build %s's metadata: %s", version.deployment_name,
                            version.build_id, err.message)
                return False
            await asyncio.sleep(0.2)
    described = await describe(client, version.deployment_name)
    current = current_build_id(described)
    if described is None or current == version.build_id:
        return False
    if described.worker_deployment_info.manager_identity not in ("", client.identity):
        log.info("rein deployment %s: routed by %s: build %s waits for it", version.deployment_name,
                 described.worker_deployment_info.manager_identity, version.build_id)
        return False
    if was_routed(described, version.build_id) or (policy != "new" and was_routed(described)):
        return False  # a build started again (a drain, a restart, a rollback's leftover) or promotion by hand
    limit = proof_limit()
    registered = await _registered(client, version, queues, deadline)
    moving = await runs_that_move(client, version.deployment_name, current, registered, limit)
    earlier = await pinned_by_an_earlier_rein(client, version.deployment_name, version.build_id, limit)
    failures = await replay_failures(client, replayer, [*moving, *earlier], first_only=True)
    if failures:
        failure = failures[0]
        log.warning("rein deployment %s: build %s is not current: it cannot replay %s; see it with `%s`; it serves "
                    "only runs pinned to it (`rein deployment set-current %s` routes new runs here anyway)",
                    version.deployment_name, version.build_id, failure.line(), replay_command(failure.run),
                    version.build_id)
        return False
    if not await _switch(client, version, described.conflict_token, current, deadline):
        return False
    for run in earlier:
        await override_run(client, run.workflow_id, run.run_id, None)
        log.info("rein deployment %s: run %s follows the current build now (an earlier rein had pinned it)",
                 version.deployment_name, run.workflow_id)
    return True


async def _registered(client: Client, version: WorkerDeploymentVersion, queues: Callable[[], set[str]],
                      deadline: float) -> list[str]:
    """The version's workflow task queues once every queue this process polls is among them (bounded)."""
    while True:
        registered = await version_queues(client, version.deployment_name, version.build_id)
        if queues() <= set(registered) or asyncio.get_running_loop().time() > deadline:
            return registered
        await asyncio.sleep(0.2)


async def _switch(client: Client, version: WorkerDeploymentVersion, token: bytes, current: str | None,
                  deadline: float) -> bool:
    """set-current with the conflict token: another replica's promotion (or an operator's change) meanwhile wins."""
    missing_ok = False
    while True:
        try:
            await set_current(client, version, conflict_token=token, ignore_missing_task_queues=missing_ok)
            log.info("rein deployment %s: build %s is current (%s; it replayed the runs that move to it)",
                     version.deployment_name, version.build_id, f"was {current}" if current else "the first")
            return True
        except RPCError as err:
            if err.status == RPCStatusCode.FAILED_PRECONDITION and "conflict" in err.message.lower():
                return False  # the routing changed since it was read: someone else decided
            if "missing active task queues" in err.message and not missing_ok:
                # Queues the current version's workers polled that this build does not (yet): a rolling deploy's
                # other workers. Say so and go on: those queues' new runs wait for this build's workers there.
                log.warning("rein deployment %s: build %s is current, but the workers of the version before it poll "
                            "queues it does not (yet); their new runs go to unversioned workers until this build's "
                            "workers poll them (the server: %s)", version.deployment_name, version.build_id, err.message)
                missing_ok = True
                continue
            if asyncio.get_running_loop().time() > deadline:
                log.warning("rein deployment %s: build %s is not current: %s; make it current with `rein deployment "
                            "set-current %s`", version.deployment_name, version.build_id, err.message, version.build_id)
                return False
            await asyncio.sleep(0.5)  # a queue of this version is not registered yet


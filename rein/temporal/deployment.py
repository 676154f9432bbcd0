"""Versioned deploys on Temporal's Worker Versioning: which deployment and build a worker is.

A worker with a deployment name (`REIN_DEPLOYMENT`; `rein worker` names one after its shared queue
when given none) runs as one version of a Temporal worker deployment: `<deployment>.<build id>`. The
build id is `REIN_BUILD_ID`, or a digest of rein's workflow-side and activity sources, so two workers
of the same rein code share a build and a changed rein is a new one. Runs are PINNED (the deployment
config's default behaviour): a run finishes on the build it started on, and new runs go to the
deployment's current version, which a new build becomes when its first worker starts (`promote`).
See docs/deploys.md.

No deployment name, or `none`: versioning off (in-process workers and `Agent.run`'s embedded engine
by default).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib.util
import logging
import os
from pathlib import Path

from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentResponse,
    DescribeWorkerDeploymentVersionRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from rein.temporal.history import polled, seconds
from rein.temporal.sandbox import PURE_MODULES

DEPLOYMENT_ENV = "REIN_DEPLOYMENT"
BUILD_ID_ENV = "REIN_BUILD_ID"
PROMOTE_ENV = "REIN_PROMOTE"
PROMOTE_POLICIES = ("new", "manual")
WATCH_INTERVAL_S = 10.0
"""How often a worker looks at who serves its queue, and for runs to carry on (REIN_ADOPT_INTERVAL_S)."""
VERSIONING_OFF = "none"
"""The deployment name that turns versioning off (`rein worker --deployment none`, REIN_DEPLOYMENT=none)."""
BUILD_SOURCES = ("rein.workflows", "rein.activities")
"""Packages whose sources (with rein's pure modules) make the default build id."""

log = logging.getLogger("rein.deployment")


def default_build_id() -> str:
    """`rein-<digest>` of the code a run depends on: rein's workflow-side modules and activities."""
    digest = hashlib.sha256()
    for path in sorted(_source_files((*BUILD_SOURCES, *PURE_MODULES))):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"rein-{digest.hexdigest()[:12]}"


def _source_files(modules: tuple[str, ...]) -> set[Path]:
    files: set[Path] = set()
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        if spec.submodule_search_locations:  # a package: all its modules
            files.update(p for p in origin.parent.glob("*.py"))
        else:
            files.add(origin)
    return files


def worker_version(deployment: str | None = None, build_id: str | None = None, *,
                   default: str | None = None) -> WorkerDeploymentVersion | None:
    """This worker's version: the arguments, else REIN_DEPLOYMENT / REIN_BUILD_ID, else `default` (what
    `rein worker` names after its queue); None when versioning is off (no name, or the name `none`)."""
    deployment = deployment or os.environ.get(DEPLOYMENT_ENV) or default or None
    if deployment is None or deployment == VERSIONING_OFF:
        if build_id:
            raise ValueError(f"a build id needs a deployment name too (set {DEPLOYMENT_ENV})")
        return None
    if "." in deployment:
        raise ValueError(f"deployment name {deployment!r} may not contain '.' (Temporal joins <deployment>.<build id>)")
    return WorkerDeploymentVersion(deployment, build_id or os.environ.get(BUILD_ID_ENV) or default_build_id())


def deployment_for_queue(task_queue: str) -> str:
    """`rein worker`'s deployment when none is named: its shared queue's name (a queue's new runs go to
    one deployment's current version, so the workers of one queue are one deployment)."""
    return task_queue.replace(".", "-")


def promote_policy(given: str | None = None) -> str:
    """"new" (default: a new build becomes current when its worker starts) or "manual" (REIN_PROMOTE)."""
    policy = (given or os.environ.get(PROMOTE_ENV) or "new").strip().lower()
    if policy not in PROMOTE_POLICIES:
        raise ValueError(f"{PROMOTE_ENV}={policy!r}: expected one of {', '.join(PROMOTE_POLICIES)}")
    return policy


def deployment_config(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    """Versioned polling, runs PINNED to the build they start on."""
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True,
                                  default_versioning_behavior=VersioningBehavior.PINNED)


def with_default_behavior(config: WorkerDeploymentConfig) -> WorkerDeploymentConfig:
    """A user's versioned config without a default behaviour gets PINNED: rein's workflows declare
    none (the server rejects a behaviour from an unversioned worker, and they serve both kinds)."""
    if config.use_worker_versioning and config.default_versioning_behavior == VersioningBehavior.UNSPECIFIED:
        return dataclasses.replace(config, default_versioning_behavior=VersioningBehavior.PINNED)
    return config


async def describe(client: Client, deployment: str) -> DescribeWorkerDeploymentResponse | None:
    """The deployment as the server sees it; None before any of its workers has polled."""
    try:
        return await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment))
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


def current_build_id(described: DescribeWorkerDeploymentResponse | None) -> str | None:
    if described is None:
        return None
    routing = described.worker_deployment_info.routing_config
    return routing.current_deployment_version.build_id or None


async def set_current(client: Client, version: WorkerDeploymentVersion, *, ramp: float | None = None) -> None:
    """Make `version` current (new runs start on it), or ramp `ramp` percent of new runs to it."""
    if ramp is None:
        await client.workflow_service.set_worker_deployment_current_version(SetWorkerDeploymentCurrentVersionRequest(
            namespace=client.namespace, deployment_name=version.deployment_name, build_id=version.build_id,
            identity=client.identity))
    else:
        await client.workflow_service.set_worker_deployment_ramping_version(SetWorkerDeploymentRampingVersionRequest(
            namespace=client.namespace, deployment_name=version.deployment_name, build_id=version.build_id,
            identity=client.identity, percentage=ramp))


async def promote(client: Client, version: WorkerDeploymentVersion, policy: str = "new", timeout: float = 60) -> bool:
    """Make this version current when its deployment has none (the first build) or, under policy "new",
    when it is a new build: never current nor ramping before. True if it did.

    So a build rolled out is current once its first worker polls, with nobody acting, while an older
    build started again (a restarted replica, a drain) never takes new runs back: that is a rollback,
    `rein deployment set-current`. Policy "manual": only the first build; the operator promotes the
    others (a ramp). Runs already started stay PINNED to their build either way.
    """
    key = version.to_canonical_string()
    if key in _PROMOTING:  # another of this process's workers (one per queue) asks already
        return False
    _PROMOTING.add(key)
    try:
        return await _promote(client, version, policy, timeout)
    finally:
        _PROMOTING.discard(key)


_PROMOTING: set[str] = set()


async def _promote(client: Client, version: WorkerDeploymentVersion, policy: str, timeout: float) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            described = await describe(client, version.deployment_name)
        except RPCError as err:
            if err.status != RPCStatusCode.RESOURCE_EXHAUSTED:  # a server without worker deployments
                log.warning("rein deployment %s: cannot describe it: %s", version.deployment_name, err)
                return False
            described = None  # the deployment's own rate limit: ask again later
        current = current_build_id(described)
        if current == version.build_id or (current is not None and policy != "new"):
            return False
        summary = None if described is None else next(
            (s for s in described.worker_deployment_info.version_summaries
             if s.deployment_version.build_id == version.build_id), None)
        if current is not None and summary is not None and summary.HasField("first_activation_time"):
            return False  # an older build: it was current or ramping before
        foreign = [] if current is None or summary is None else await queues_left_unserved(
            client, version.deployment_name, current, await version_queues(client, version.deployment_name,
                                                                           version.build_id))
        if summary is not None and not foreign:
            try:
                await set_current(client, version)
                log.info("rein deployment %s: %s is current (%s)", version.deployment_name, version.build_id,
                         "the first version" if current is None else f"a new build; was {current}")
                return True
            except RPCError as err:  # another worker won the race, or a task queue is not registered yet
                log.debug("could not make %s current yet: %s", version.to_canonical_string(), err)
        if asyncio.get_running_loop().time() > deadline:
            why = (f"the current version {current} serves queues this build does not ({', '.join(foreign)}), which "
                   "it would leave to nobody; the workers of one queue are one deployment: give this application a "
                   "--task-queue (or --deployment) of its own, or" if foreign else "did not register in time;")
            log.warning("rein deployment %s: %s is not current: %s make it current by hand with `rein deployment "
                        "set-current %s --deployment %s`", version.deployment_name, version.build_id, why,
                        version.build_id, version.deployment_name)
            return False
        await asyncio.sleep(1.0)


async def version_queues(client: Client, deployment: str, build_id: str) -> list[str]:
    """The workflow task queues the workers of that version have polled."""
    described = await client.workflow_service.describe_worker_deployment_version(
        DescribeWorkerDeploymentVersionRequest(namespace=client.namespace, deployment_version=VersionProto(
            deployment_name=deployment, build_id=build_id)))
    return [q.name for q in described.version_task_queues if q.type == TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW]


async def queues_this_build_would_strand(client: Client, version: WorkerDeploymentVersion, queues: list[str],
                                         described: DescribeWorkerDeploymentResponse | None) -> tuple[str, list[str]] | None:
    """For a new build about to poll `queues`: the current version and its live queues it would not serve, when
    another build is current and this one was never current (an older build started again is a drain)."""
    current = current_build_id(described)
    if described is None or current is None or current == version.build_id:
        return None
    if any(s.deployment_version.build_id == version.build_id and s.HasField("first_activation_time")
           for s in described.worker_deployment_info.version_summaries):
        return None
    foreign = await queues_left_unserved(client, version.deployment_name, current, queues)
    return (current, foreign) if foreign else None


async def queues_left_unserved(client: Client, deployment: str, current: str, served: list[str]) -> list[str]:
    """Queues a live worker of the `current` version polls that are not in `served`: made current, a build
    serving only those would take their new runs and serve none (a queue's new runs go to its deployment's
    current version)."""
    return [q for q in await version_queues(client, deployment, current)
            if q not in served and await polled(client, q, (deployment, current))]


async def hand_back(client: Client, queue: str, keep: WorkerDeploymentVersion | None = None, *,
                    identity: str | None = None) -> str | None:
    """Route `queue`'s new runs to unversioned workers again when the version they go to has no live worker.

    A versioned worker takes over its queues: new runs there go to its deployment's current version,
    and an unversioned worker started later on them (an `Agent.run` script, `create_worker`, a rollback
    to an unversioned build) would get none, after that worker is gone too. So an unversioned rein worker
    asks this as it starts, and a versioned one as it stops (`keep`: its own version, `identity`: its own
    pollers, not counted): with no other live poller of that version, the deployment's current version
    becomes "unversioned" (runs pinned to the version stay pinned; a worker of a versioned build makes
    itself current again as it starts). Returns the deployment handed back, if any.
    """
    described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW))
    current = described.versioning_info.current_deployment_version
    if not current.build_id or (keep is not None and (current.deployment_name, current.build_id) != (
            keep.deployment_name, keep.build_id)):
        return None
    if await polled(client, queue, (current.deployment_name, current.build_id), besides=identity):
        return None
    await client.workflow_service.set_worker_deployment_current_version(SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace, deployment_name=current.deployment_name, build_id="", identity=client.identity,
        ignore_missing_task_queues=True))
    log.warning("rein deployment %s: no worker of its current version %s serves queue %s any more: its new runs go "
                "to unversioned workers again", current.deployment_name, current.build_id, queue)
    return current.deployment_name


async def keep_queue_unversioned(client: Client, queue: str) -> None:
    """An unversioned worker's watch: `queue`'s new runs go to unversioned workers whenever no worker of the
    version a deployment routes them to is alive (deployment.hand_back); at start, then every WATCH_INTERVAL_S."""
    while True:
        try:
            await hand_back(client, queue)
        except RPCError as err:
            log.debug("could not ask who serves %s: %s", queue, err)
        interval = seconds("REIN_ADOPT_INTERVAL_S", WATCH_INTERVAL_S)
        await asyncio.sleep(interval if interval > 0 else WATCH_INTERVAL_S)


async def leave_queue(client: Client, queue: str, version: WorkerDeploymentVersion, identity: str) -> None:
    """A stopping versioned worker hands `queue` back when no other worker of its version serves it (bounded:
    a stop never waits on the server for long)."""
    try:
        await asyncio.wait_for(hand_back(client, queue, version, identity=identity), 5)
    except (TimeoutError, RPCError) as err:
        log.debug("could not hand %s back: %s", queue, err)

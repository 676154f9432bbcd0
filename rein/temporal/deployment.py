"""Versioned deploys on Temporal's Worker Versioning: which deployment and build a worker is.

A worker with a deployment name (`REIN_DEPLOYMENT`) runs as one version of a Temporal worker
deployment: `<deployment>.<build id>`. The build id is `REIN_BUILD_ID`, or a digest of rein's
workflow-side and activity sources, so two workers of the same rein code share a build and a
changed rein is a new one. Runs are PINNED (the deployment config's default behaviour): a run
finishes on the build it started on, and new runs go to the deployment's current version. See docs/deploys.md.

No deployment name: versioning is off (the default, also for `Agent.run`'s embedded engine).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib.util
import logging
import os
from pathlib import Path

from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentResponse,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from rein.temporal.sandbox import PURE_MODULES

DEPLOYMENT_ENV = "REIN_DEPLOYMENT"
BUILD_ID_ENV = "REIN_BUILD_ID"
PROMOTE_ENV = "REIN_PROMOTE"
PROMOTE_POLICIES = ("new", "manual")
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
        if summary is not None:
            try:
                await set_current(client, version)
                log.info("rein deployment %s: %s is current (%s)", version.deployment_name, version.build_id,
                         "the first version" if current is None else f"a new build; was {current}")
                return True
            except RPCError as err:  # another worker won the race, or a task queue is not registered yet
                log.debug("could not make %s current yet: %s", version.to_canonical_string(), err)
        if asyncio.get_running_loop().time() > deadline:
            log.warning("rein deployment %s: %s did not become current within %gs; make it current with "
                        "`rein deployment set-current %s --deployment %s`", version.deployment_name,
                        version.build_id, timeout, version.build_id, version.deployment_name)
            return False
        await asyncio.sleep(1.0)

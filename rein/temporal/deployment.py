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


def worker_version(deployment: str | None = None, build_id: str | None = None) -> WorkerDeploymentVersion | None:
    """This worker's version: the arguments, else REIN_DEPLOYMENT / REIN_BUILD_ID; None when versioning is off."""
    deployment = deployment or os.environ.get(DEPLOYMENT_ENV) or None
    if deployment is None:
        if build_id:
            raise ValueError(f"a build id needs a deployment name too (set {DEPLOYMENT_ENV})")
        return None
    if "." in deployment:
        raise ValueError(f"deployment name {deployment!r} may not contain '.' (Temporal joins <deployment>.<build id>)")
    return WorkerDeploymentVersion(deployment, build_id or os.environ.get(BUILD_ID_ENV) or default_build_id())


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


async def current_if_first(client: Client, version: WorkerDeploymentVersion, timeout: float = 60) -> bool:
    """Make this version current when the deployment has none yet (its first worker); True if it did.

    A deployment that already has a current version is the operator's: a new build becomes
    current by `rein deployment set-current` or `temporal worker deployment set-current-version`.
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
        if current_build_id(described) is not None:
            return False
        known = described is not None and any(
            s.deployment_version.build_id == version.build_id for s in described.worker_deployment_info.version_summaries)
        if known:
            try:
                await set_current(client, version)
                log.info("rein deployment %s: %s is current (the first version)", version.deployment_name, version.build_id)
                return True
            except RPCError as err:  # another first worker won the race, or the poller is not registered yet
                log.debug("could not make %s current yet: %s", version.to_canonical_string(), err)
        if asyncio.get_running_loop().time() > deadline:
            log.warning("rein deployment %s: %s did not register within %gs; set the current version by hand",
                        version.deployment_name, version.build_id, timeout)
            return False
        await asyncio.sleep(1.0)

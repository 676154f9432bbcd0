"""Versioned deploys on Temporal's Worker Versioning: which deployment and build a worker is, and its routing.

A worker with a deployment runs as one version of a Temporal worker deployment: `<deployment>.<build id>`.
The deployment is the application: `REIN_DEPLOYMENT`, `rein` for `rein worker` and the in-process engine
by default, whatever queues a worker polls (its shared queue, its agents' own queues, a model queue), so
one build of one application is one version. The build id is `REIN_BUILD_ID`, or a digest of rein's
workflow-side and activity sources, so two workers of the same rein code share a build.

Runs are AUTO_UPGRADE by default: a run moves to the deployment's current version at its next workflow
task, so a fixed build carries on what a buggy one left stuck, and a run waiting for a person for weeks
meets the build that is current when the person answers (rein's patch table and replay gate make that
safe; a promotion replays the runs it would move first: rein.temporal.promotion). `REIN_VERSIONING=pinned`
(`rein worker --versioning pinned`) keeps each run on the build it started on instead.

Routing changes only when someone deploys or decides: a new build promotes itself once as it starts
(REIN_PROMOTE=new, the default), and an operator runs `rein deployment set-current` / `rollback` (or
Temporal's own CLI or Worker Controller). Nothing here watches workers or changes routing later.
See docs/deploys.md. No deployment name, or `none`: versioning off.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib.util
import json
import logging
import os
from pathlib import Path

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentResponse,
    DescribeWorkerDeploymentVersionRequest,
    DescribeWorkerDeploymentVersionResponse,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
    UpdateWorkerDeploymentVersionMetadataRequest,
    UpdateWorkflowExecutionOptionsRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from rein.temporal.sandbox import PURE_MODULES

DEPLOYMENT_ENV = "REIN_DEPLOYMENT"
BUILD_ID_ENV = "REIN_BUILD_ID"
PROMOTE_ENV = "REIN_PROMOTE"
VERSIONING_ENV = "REIN_VERSIONING"
DEFAULT_DEPLOYMENT = "rein"
"""The application's deployment when none is named: `rein worker`'s and the in-process engine's."""
PROMOTE_POLICIES = ("new", "manual")
BEHAVIORS = {"auto-upgrade": VersioningBehavior.AUTO_UPGRADE, "pinned": VersioningBehavior.PINNED}
VERSIONING_OFF = "none"
"""The deployment name that turns versioning off (`rein worker --deployment none`, REIN_DEPLOYMENT=none)."""
BUILD_SOURCES = ("rein.workflows", "rein.activities")
"""Packages whose sources (with rein's pure modules) make the default build id."""
METADATA_KEY = "rein"
"""A version's metadata entry a rein worker writes as it starts: how its runs behave, and that it answers
replay checks (rein.temporal.replay_check). A version without it is a rein build from before (its runs were
PINNED by default) or not rein's."""

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
    """This worker's version: the arguments, else REIN_DEPLOYMENT / REIN_BUILD_ID, else `default` (`rein worker`
    and the engine: DEFAULT_DEPLOYMENT); None when versioning is off (no name, or the name `none`)."""
    deployment = deployment or os.environ.get(DEPLOYMENT_ENV) or default or None
    if deployment is None or deployment == VERSIONING_OFF:
        if build_id:
            raise ValueError(f"a build id needs a deployment name too (set {DEPLOYMENT_ENV})")
        return None
    if "." in deployment:
        raise ValueError(f"deployment name {deployment!r} may not contain '.' (Temporal joins <deployment>.<build id>)")
    return WorkerDeploymentVersion(deployment, build_id or os.environ.get(BUILD_ID_ENV) or default_build_id())


def promote_policy(given: str | None = None) -> str:
    """"new" (default: a new build becomes current when its worker starts) or "manual" (REIN_PROMOTE)."""
    policy = (given or os.environ.get(PROMOTE_ENV) or "new").strip().lower()
    if policy not in PROMOTE_POLICIES:
        raise ValueError(f"{PROMOTE_ENV}={policy!r}: expected one of {', '.join(PROMOTE_POLICIES)}")
    return policy


def versioning_behavior(given: str | None = None) -> VersioningBehavior:
    """How this worker's runs behave (REIN_VERSIONING): `auto-upgrade` (default) or `pinned`."""
    name = (given or os.environ.get(VERSIONING_ENV) or "auto-upgrade").strip().lower().replace("_", "-")
    if name not in BEHAVIORS:
        raise ValueError(f"{VERSIONING_ENV}={name!r}: expected one of {', '.join(BEHAVIORS)}")
    return BEHAVIORS[name]


def behavior_name(behavior: VersioningBehavior) -> str:
    return next(name for name, value in BEHAVIORS.items() if value == behavior)


def deployment_config(version: WorkerDeploymentVersion, behavior: VersioningBehavior) -> WorkerDeploymentConfig:
    """Versioned polling; runs follow `behavior` (rein's workflows declare none of their own)."""
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True, default_versioning_behavior=behavior)


def with_default_behavior(config: WorkerDeploymentConfig) -> WorkerDeploymentConfig:
    """A user's versioned config without a default behaviour gets AUTO_UPGRADE: rein's workflows declare none
    (the server rejects a behaviour from an unversioned worker, and they serve both kinds)."""
    if config.use_worker_versioning and config.default_versioning_behavior == VersioningBehavior.UNSPECIFIED:
        return dataclasses.replace(config, default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
    return config


async def describe(client: Client, deployment: str) -> DescribeWorkerDeploymentResponse | None:
    """The deployment as the server sees it; None before any of its workers has polled. The server limits how
    often one deployment is read (RESOURCE_EXHAUSTED): asked again, for a few seconds at most."""
    for attempt in range(DESCRIBE_ATTEMPTS):
        try:
            return await client.workflow_service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment))
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            if err.status != RPCStatusCode.RESOURCE_EXHAUSTED or attempt == DESCRIBE_ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.1 * (attempt + 1))
    raise AssertionError("unreachable")


DESCRIBE_ATTEMPTS = 10


async def describe_version(client: Client, deployment: str, build_id: str) -> DescribeWorkerDeploymentVersionResponse:
    return await client.workflow_service.describe_worker_deployment_version(DescribeWorkerDeploymentVersionRequest(
        namespace=client.namespace, deployment_version=VersionProto(deployment_name=deployment, build_id=build_id)))


def current_build_id(described: DescribeWorkerDeploymentResponse | None) -> str | None:
    if described is None:
        return None
    return described.worker_deployment_info.routing_config.current_deployment_version.build_id or None


def was_routed(described: DescribeWorkerDeploymentResponse | None, build_id: str | None = None) -> bool:
    """Whether the build (None: any build) was ever current or ramping (a new build was not: it may promote itself)."""
    return described is not None and any(
        build_id in (None, s.deployment_version.build_id) and s.HasField("first_activation_time")
        for s in described.worker_deployment_info.version_summaries)


async def set_current(client: Client, version: WorkerDeploymentVersion, *, ramp: float | None = None,
                      conflict_token: bytes = b"", ignore_missing_task_queues: bool = False) -> None:
    """Make `version` current (new runs start on it; AUTO_UPGRADE runs move to it at their next task), or ramp
    `ramp` percent of them to it. `conflict_token`: refused if the routing changed since it was read."""
    if ramp is None:
        await client.workflow_service.set_worker_deployment_current_version(SetWorkerDeploymentCurrentVersionRequest(
            namespace=client.namespace, deployment_name=version.deployment_name, build_id=version.build_id,
            identity=client.identity, conflict_token=conflict_token,
            ignore_missing_task_queues=ignore_missing_task_queues))
    else:
        await client.workflow_service.set_worker_deployment_ramping_version(SetWorkerDeploymentRampingVersionRequest(
            namespace=client.namespace, deployment_name=version.deployment_name, build_id=version.build_id,
            identity=client.identity, percentage=ramp, conflict_token=conflict_token,
            ignore_missing_task_queues=ignore_missing_task_queues))


async def version_queues(client: Client, deployment: str, build_id: str) -> list[str]:
    """The workflow task queues the workers of that version have polled."""
    described = await describe_version(client, deployment, build_id)
    return [q.name for q in described.version_task_queues if q.type == TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW]


async def mark_version(client: Client, version: WorkerDeploymentVersion, behavior: VersioningBehavior) -> None:
    """Record in the version's metadata that it is a rein build of this kind (METADATA_KEY)."""
    from temporalio.api.common.v1 import Payload

    value = json.dumps({"behavior": behavior_name(behavior), "replay_check": 1}).encode()
    await client.workflow_service.update_worker_deployment_version_metadata(UpdateWorkerDeploymentVersionMetadataRequest(
        namespace=client.namespace, identity=client.identity,
        deployment_version=VersionProto(deployment_name=version.deployment_name, build_id=version.build_id),
        upsert_entries={METADATA_KEY: Payload(metadata={"encoding": b"json/plain"}, data=value)}))


def rein_metadata(described: DescribeWorkerDeploymentVersionResponse) -> dict | None:
    """What a rein worker wrote in its version's metadata (mark_version), or None for a build from before."""
    entries = described.worker_deployment_version_info.metadata.entries
    if METADATA_KEY not in entries:
        return None
    try:
        return dict(json.loads(entries[METADATA_KEY].data))
    except ValueError:
        return None


async def override_run(client: Client, workflow_id: str, run_id: str, pinned_to: WorkerDeploymentVersion | None) -> None:
    """A run's versioning override, as `temporal workflow update-options` sets it: PINNED to `pinned_to`, or
    (None) AUTO_UPGRADE: it follows the current version from its next workflow task."""
    if pinned_to is None:
        override = VersioningOverride(auto_upgrade=True)
    else:
        override = VersioningOverride(pinned=VersioningOverride.PinnedOverride(
            behavior=VersioningOverride.PinnedOverrideBehavior.PINNED_OVERRIDE_BEHAVIOR_PINNED,
            version=VersionProto(deployment_name=pinned_to.deployment_name, build_id=pinned_to.build_id)))
    await client.workflow_service.update_workflow_execution_options(UpdateWorkflowExecutionOptionsRequest(
        namespace=client.namespace, identity=client.identity,
        workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
        workflow_execution_options=WorkflowExecutionOptions(versioning_override=override),
        update_mask=FieldMask(paths=["versioning_override"])))

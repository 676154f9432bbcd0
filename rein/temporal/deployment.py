"""Which Worker Deployment version a worker is, and the RPCs around versions (docs/deploys.md).

The deployment is the application, whatever queues a worker polls; a build's id defaults to a digest of the code
its runs depend on, so a changed workflow is a new version.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib.util
import json
import random
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice import v1 as rpc
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

from rein import settings

if TYPE_CHECKING:
    from temporalio.worker import WorkerDeploymentConfig  # the worker side: what the CLI's readers never load

DEFAULT_DEPLOYMENT, VERSIONING_OFF = "rein", "none"
BEHAVIORS = {"auto-upgrade": VersioningBehavior.AUTO_UPGRADE, "pinned": VersioningBehavior.PINNED}
BUILD_SOURCES = ("rein.workflows", "rein.activities")
T = TypeVar("T")
METADATA_KEY = "rein"
"""The version's metadata entry its rein workers write (behaviour, replay checks, the last check); a version
without it is a rein build from before (its runs were PINNED by default) or not rein's."""


def default_build_id() -> str:
    """`rein-<digest>` of rein's workflow-side modules and activities."""
    from rein.temporal.sandbox import PURE_MODULES  # the sandbox's list (temporalio's worker side: not for readers)

    digest = hashlib.sha256()
    for path in sorted(_source_files((*BUILD_SOURCES, *PURE_MODULES))):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"rein-{digest.hexdigest()[:12]}"


def _source_files(modules: tuple[str, ...]) -> set[Path]:
    files: set[Path] = set()
    for spec in filter(None, map(importlib.util.find_spec, modules)):
        if spec.origin is not None:  # a package: all its modules
            files.update(Path(spec.origin).parent.glob("*.py") if spec.submodule_search_locations else [Path(spec.origin)])
    return files


def deployment_name(given: str | None = None, default: str | None = DEFAULT_DEPLOYMENT) -> str | None:
    """`given`, else REIN_DEPLOYMENT, else `default`."""
    return given or settings.current().deployment or default


def worker_version(deployment: str | None = None, build_id: str | None = None, *,
                   default: str | None = None) -> WorkerDeploymentVersion | None:
    """The arguments, else REIN_DEPLOYMENT / REIN_BUILD_ID, else `default`; None when versioning is off."""
    if (deployment := deployment_name(deployment, default)) in (None, VERSIONING_OFF):
        if build_id:
            raise ValueError("a build id needs a deployment name too (set REIN_DEPLOYMENT)")
        return None
    if "." in deployment:
        raise ValueError(f"deployment name {deployment!r} may not contain '.' (Temporal joins <deployment>.<build id>)")
    return WorkerDeploymentVersion(deployment, build_id or settings.current().build_id or default_build_id())


def _choice(env: str, given: str | None, configured: str, choices: Any) -> str:
    """`given` (an argument), else the setting's value (checked by rein.settings)."""
    if (name := (given or configured).strip().lower().replace("_", "-")) not in choices:
        raise ValueError(f"{env}={name!r}: expected one of {', '.join(choices)}")
    return name


def promote_policy(given: str | None = None) -> str:
    """"new" (a new build becomes current when its worker starts) or "manual" (REIN_PROMOTE)."""
    return _choice("REIN_PROMOTE", given, settings.current().promote, ("new", "manual"))


def versioning_behavior(given: str | None = None) -> VersioningBehavior:
    """How this worker's runs behave (REIN_VERSIONING): `auto-upgrade` (default) or `pinned`."""
    return BEHAVIORS[_choice("REIN_VERSIONING", given, settings.current().versioning, BEHAVIORS)]


def deployment_config(version: WorkerDeploymentVersion, behavior: VersioningBehavior) -> WorkerDeploymentConfig:
    from temporalio.worker import WorkerDeploymentConfig

    return WorkerDeploymentConfig(version, use_worker_versioning=True, default_versioning_behavior=behavior)


def with_default_behavior(config: WorkerDeploymentConfig) -> WorkerDeploymentConfig:
    """A user's versioned config without a default behaviour gets AUTO_UPGRADE (rein's workflows declare none)."""
    if config.use_worker_versioning and config.default_versioning_behavior == VersioningBehavior.UNSPECIFIED:
        return dataclasses.replace(config, default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
    return config


async def _rpc(client: Client, method: str, **fields: Any) -> Any:
    """The workflow service's `method` in the client's namespace, asked again while the server rate-limits the
    deployment RPCs (RESOURCE_EXHAUSTED), ~10 s at most."""
    request = getattr(rpc, "".join(w.title() for w in method.split("_")) + "Request")(namespace=client.namespace, **fields)
    for attempt in range(10):
        try:
            return await getattr(client.workflow_service, method)(request)
        except RPCError as err:
            if err.status != RPCStatusCode.RESOURCE_EXHAUSTED or attempt == 9:
                raise
            await asyncio.sleep(0.2 * (attempt + 1) * (0.5 + random.random()))


async def absent(call: Awaitable[T], *statuses: RPCStatusCode) -> T | None:
    """`call`'s answer, or None when the server says one of `statuses` (default: NOT_FOUND)."""
    try:
        return await call
    except RPCError as err:
        if err.status not in (statuses or (RPCStatusCode.NOT_FOUND,)):
            raise
        return None


async def describe(client: Client, deployment: str) -> rpc.DescribeWorkerDeploymentResponse | None:
    """None before any of its workers polled."""
    return await absent(_rpc(client, "describe_worker_deployment", deployment_name=deployment))


async def describe_version(client: Client, deployment: str, build: str) -> rpc.DescribeWorkerDeploymentVersionResponse:
    version = VersionProto(deployment_name=deployment, build_id=build)
    return await _rpc(client, "describe_worker_deployment_version", deployment_version=version)


def current_build_id(described: rpc.DescribeWorkerDeploymentResponse | None) -> str | None:
    return described.worker_deployment_info.routing_config.current_deployment_version.build_id or None if described else None


def was_routed(described: rpc.DescribeWorkerDeploymentResponse, build_id: str | None = None) -> bool:
    """Whether the build (None: any) was ever current or ramping (a new build was not: it may promote itself)."""
    return any(build_id in (None, s.deployment_version.build_id) and s.HasField("first_activation_time")
               for s in described.worker_deployment_info.version_summaries)


async def set_current(client: Client, version: WorkerDeploymentVersion, *, ramp: float | None = None,
                      conflict_token: bytes = b"", ignore_missing_task_queues: bool = False) -> None:
    """Make `version` current (or ramp `ramp` percent of new runs to it), refused if the routing changed since
    `conflict_token` was read."""
    await _rpc(client, "set_worker_deployment_current_version" if ramp is None else "set_worker_deployment_ramping_version",
               deployment_name=version.deployment_name, build_id=version.build_id, identity=client.identity,
               conflict_token=conflict_token, ignore_missing_task_queues=ignore_missing_task_queues,
               **({} if ramp is None else {"percentage": ramp}))


async def version_queues(client: Client, deployment: str, build_id: str) -> list[str]:
    """The workflow task queues the workers of that version have polled (none before its first poll registered it)."""
    described = await absent(describe_version(client, deployment, build_id))
    return [q.name for q in described.version_task_queues if q.type == TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW] if described else []


async def write_metadata(client: Client, version: WorkerDeploymentVersion, **entries: Any) -> None:
    """Merge `entries` into the version's rein metadata."""
    described = await describe_version(client, version.deployment_name, version.build_id)
    value = json.dumps({**(rein_metadata(described) or {}), **entries}).encode()
    await _rpc(client, "update_worker_deployment_version_metadata", identity=client.identity,
               deployment_version=described.worker_deployment_version_info.deployment_version,
               upsert_entries={METADATA_KEY: Payload(metadata={"encoding": b"json/plain"}, data=value)})


def rein_metadata(described: rpc.DescribeWorkerDeploymentVersionResponse) -> dict | None:
    entries = described.worker_deployment_version_info.metadata.entries
    try:
        return dict(json.loads(entries[METADATA_KEY].data)) if METADATA_KEY in entries else None
    except ValueError:
        return None


async def override_run(client: Client, workflow_id: str, run_id: str, pinned_to: WorkerDeploymentVersion | None) -> None:
    """As `temporal workflow update-options` does: PINNED to `pinned_to`, or (None) AUTO_UPGRADE."""
    override = VersioningOverride(auto_upgrade=True) if pinned_to is None else VersioningOverride(pinned=(
        VersioningOverride.PinnedOverride(behavior=VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED, version=VersionProto(
            deployment_name=pinned_to.deployment_name, build_id=pinned_to.build_id))))
    await _rpc(client, "update_workflow_execution_options", identity=client.identity,
               workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
               workflow_execution_options=WorkflowExecutionOptions(versioning_override=override),
               update_mask=FieldMask(paths=["versioning_override"]))

"""The in-process engine (`Agent.run`, `rein run`) as a build of the application's deployment.

A script's worker joins the deployment its `rein worker`s run as (REIN_DEPLOYMENT, else `rein`) as its own build
(REIN_BUILD_ID, else rein's digest: the same build as a `rein worker` of the same rein). It never takes the routing:
its build becomes current only when the deployment has none (the first build on a fresh server). When another build
is current it starts its runs pinned to its own build, so they run on the script's code while it serves them, and
as it stops it lets go of them: those still open get the AUTO_UPGRADE override and follow the current build from
their next task, so none waits on the script's build once no worker serves it (docs/deploys.md, "Scripts").
`REIN_DEPLOYMENT=none`, or a server without worker deployments: unversioned.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

from rein.core.log import logger
from rein.temporal import deployment as d
from rein.temporal.plugin import promoted

WAIT_S = 10.0
"""How long a run's start waits for this process's first promotion, or for its version to list the run's queue."""


async def engine_version(client: Client) -> WorkerDeploymentVersion | None:
    """The version this process's workers poll as, or None (versioning off, or the server has no deployments)."""
    try:
        version = d.worker_version(default=d.DEFAULT_DEPLOYMENT)
    except ValueError as err:
        logger.warning("the in-process worker runs unversioned: %s", err)
        return None
    try:
        if version is not None:
            await d.describe(client, version.deployment_name)
    except RPCError as err:
        if err.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
            return None  # worker deployments disabled on this namespace or server
        raise
    return version


def worker_versioning(version: WorkerDeploymentVersion | None) -> dict[str, Any]:
    """create_worker's versioning arguments for the engine's workers: its version, current only if none is."""
    if version is None:
        return {"deployment": d.VERSIONING_OFF}
    return {"deployment": version.deployment_name, "build_id": version.build_id, "promote": "manual"}


class StartRouting:
    """Where the engine's runs start (following the routing when this build is current, else pinned to it), and
    letting go of the pinned ones as the engine stops."""

    def __init__(self, client: Client, version: WorkerDeploymentVersion | None) -> None:
        self.client, self.version = client, version
        self.current = False
        self.pinned: set[str] = set()
        """Runs this engine pinned to its build, until they end or it lets go of them."""

    async def override(self, queue: str, workflow_id: str) -> PinnedVersioningOverride | None:
        """The start's versioning override (a deployment with no current version is this process's to promote:
        the start waits for that, bounded)."""
        version = self.version
        if version is None or self.current:
            return None
        deadline = asyncio.get_running_loop().time() + WAIT_S
        routed = await _queue_routes_to(self.client, queue) or await self._first_build(version, deadline)
        if routed == version.build_id:
            self.current = True
            return None
        while queue not in await _queues(self.client, version) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)  # a pinned start is refused before the version lists the queue
        self.pinned.add(workflow_id)
        return PinnedVersioningOverride(version)

    async def _first_build(self, version: WorkerDeploymentVersion, deadline: float) -> str | None:
        """The deployment's current build, once this process's own promotion ended if it has none yet."""
        while True:
            current = d.current_build_id(await d.describe(self.client, version.deployment_name))
            if current is not None or asyncio.get_running_loop().time() > deadline:
                return current
            done = await promoted(version)
            if done is False:
                return None
            await asyncio.sleep(0.05)  # this process's worker has not begun its promotion yet

    async def release(self) -> None:
        """As the engine stops: its pinned runs still open follow the current build from their next task."""
        async def let_go(workflow_id: str) -> None:
            with contextlib.suppress(RPCError):  # it ended meanwhile: nothing to let go of
                await d.override_run(self.client, workflow_id, "", None)

        pinned, self.pinned = self.pinned, set()
        await asyncio.gather(*(let_go(w) for w in pinned))


async def _queues(client: Client, version: WorkerDeploymentVersion) -> list[str]:
    try:
        return await d.version_queues(client, version.deployment_name, version.build_id)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return []  # its first poll has not registered it yet
        raise


async def _queue_routes_to(client: Client, queue: str) -> str | None:
    """The build the queue sends new runs to (None: unversioned workers, or not synced to the queue yet)."""
    described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW))
    return described.versioning_info.current_deployment_version.build_id or None

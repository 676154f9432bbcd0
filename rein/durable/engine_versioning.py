"""The in-process engine (`Agent.run`, `rein run`) as its own build of the application's deployment.

It never takes the routing: its build becomes current only when the deployment has none. When another build is
current it starts its runs pinned to its own build (they run on the script's code while it serves them), and as it
stops it lets go of those still open (the AUTO_UPGRADE override): they follow the current build, so none waits on
the script's build once no worker serves it (docs/deploys.md, "Scripts").
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
"""How long a start waits for this process's first promotion, or for its version to list the run's queue."""


async def engine_version(client: Client) -> WorkerDeploymentVersion | None:
    """None when versioning is off, or the server has no worker deployments."""
    try:
        version = d.worker_version(default=d.DEFAULT_DEPLOYMENT)
        if version is not None:
            await d.describe(client, version.deployment_name)
        return version
    except ValueError as err:
        logger.warning("the in-process worker runs unversioned: %s", err)
    except RPCError as err:
        if err.status not in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
            raise
    return None


def worker_versioning(version: WorkerDeploymentVersion | None) -> dict[str, Any]:
    """create_worker's arguments for the engine's workers: its version, current only if none is."""
    if version is None:
        return {"deployment": d.VERSIONING_OFF}
    return {"deployment": version.deployment_name, "build_id": version.build_id, "promote": "manual"}


class StartRouting:
    def __init__(self, client: Client, version: WorkerDeploymentVersion | None) -> None:
        self.client, self.version, self.current = client, version, False
        self.pinned: set[str] = set()
        """Runs this engine pinned to its build, until they end or it lets go of them."""

    async def override(self, queue: str, workflow_id: str) -> PinnedVersioningOverride | None:
        """The start's override: none when this build is current (a fresh deployment's first build: once its
        promotion ended), else pinned to it."""
        version, deadline = self.version, asyncio.get_running_loop().time() + WAIT_S
        if version is None or self.current:
            return None
        routed = (await self.client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=self.client.namespace, task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW))).versioning_info.current_deployment_version.build_id
        while not routed:  # the queue routes nowhere yet: the deployment's current, once this process's promotion ended
            routed = d.current_build_id(await d.describe(self.client, version.deployment_name)) or ""
            if routed or asyncio.get_running_loop().time() > deadline or await promoted(version) is False:
                break
            await asyncio.sleep(0.05)
        if routed == version.build_id:
            self.current = True
            return None
        while queue not in await _queues(self.client, version) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)  # a pinned start is refused before the version lists the queue
        self.pinned.add(workflow_id)
        return PinnedVersioningOverride(version)

    async def release(self) -> None:
        """As the engine stops: its pinned runs still open follow the current build from their next task."""
        async def let_go(workflow_id: str) -> None:
            with contextlib.suppress(RPCError):  # it ended meanwhile: nothing to let go of
                await d.override_run(self.client, workflow_id, "", None)

        pinned, self.pinned = self.pinned, set()
        await asyncio.gather(*map(let_go, pinned))


async def _queues(client: Client, version: WorkerDeploymentVersion) -> list[str]:
    try:
        return await d.version_queues(client, version.deployment_name, version.build_id)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return []  # its first poll has not registered it yet

"""The in-process engine (`Agent.run`, `rein run`) as a build of the application's deployment.

A script's worker joins the deployment its `rein worker`s run as (REIN_DEPLOYMENT, else `rein`), as its own
build (REIN_BUILD_ID, else rein's digest: the same build as a `rein worker` of the same rein). So after a
`rein worker` on the same queues stopped, a script of the same rein is that build and gets its runs at once.
The engine never takes routing from anyone: it makes its build current only when the deployment has none yet
(the first build on a fresh server), and when another build is current it pins the runs it starts to its own
build, so a script's runs run on the script's code and the deployment's routing stays the deploy's
(docs/deploys.md, "Scripts and the deployment"). `REIN_DEPLOYMENT=none`, or a server without worker
deployments: unversioned, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

from rein.core.log import logger
from rein.temporal.deployment import (
    DEFAULT_DEPLOYMENT,
    VERSIONING_OFF,
    current_build_id,
    describe,
    version_queues,
    worker_version,
)
from rein.temporal.plugin import promoted

PROMOTION_WAIT_S = 10.0
"""How long a run's start waits for this process's first promotion (a fresh deployment's first build)."""


async def engine_version(client: Client) -> WorkerDeploymentVersion | None:
    """The version this process's workers poll as, or None (versioning off, or the server has no deployments)."""
    try:
        version = worker_version(default=DEFAULT_DEPLOYMENT)
    except ValueError as err:
        logger.warning("the in-process worker runs unversioned: %s", err)
        return None
    if version is None:
        return None
    try:
        await describe(client, version.deployment_name)
    except RPCError as err:
        if err.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
            return None  # worker deployments disabled on this namespace or server
        raise
    return version


def worker_versioning(version: WorkerDeploymentVersion | None) -> dict[str, Any]:
    """create_worker's versioning arguments for the engine's workers: its version, current only if none is."""
    if version is None:
        return {"deployment": VERSIONING_OFF}
    return {"deployment": version.deployment_name, "build_id": version.build_id, "promote": "manual"}


class StartRouting:
    """Where the engine's runs start: following the deployment's routing when this build is current, else pinned
    to this build. The deployment's own reads are rate-limited by the server, so concurrent starts share one
    answer: "current" for good (the engine never changes the routing back), another build's for a moment."""

    MEMO_S = 2.0

    def __init__(self, client: Client, version: WorkerDeploymentVersion | None) -> None:
        self.client, self.version = client, version
        self._current = False
        self._other_until = 0.0
        self._lock = asyncio.Lock()

    async def override(self, queue: str) -> PinnedVersioningOverride | None:
        """The start's versioning override. A deployment with no current version yet is this process's to
        promote: the start waits for that (bounded)."""
        version = self.version
        if version is None or self._current:
            return None
        if await _queue_routes_to(self.client, queue) == version.build_id:  # the common case, from the queue
            self._current = True
            return None
        async with self._lock:
            loop = asyncio.get_running_loop()
            if not self._current and loop.time() >= self._other_until:
                self._current = await self._becomes_current(loop.time() + PROMOTION_WAIT_S)
                self._other_until = 0.0 if self._current else loop.time() + self.MEMO_S
        if self._current:
            return None
        return await _pinned(self.client, version, queue, asyncio.get_running_loop().time() + PROMOTION_WAIT_S)

    async def _becomes_current(self, deadline: float) -> bool:
        assert self.version is not None
        while True:
            current = current_build_id(await describe(self.client, self.version.deployment_name))
            if current is not None or asyncio.get_running_loop().time() > deadline:
                return current == self.version.build_id
            done = await promoted(self.version)
            if done is None:
                await asyncio.sleep(0.05)  # this process's worker has not begun its promotion yet
            elif not done:
                return False


async def _pinned(client: Client, version: WorkerDeploymentVersion, queue: str, deadline: float) -> PinnedVersioningOverride:
    """The override, once the server knows this version polls `queue` (a pinned start is refused before)."""
    while queue not in await _registered_queues(client, version):
        if asyncio.get_running_loop().time() > deadline:
            break  # the start says why
        await asyncio.sleep(0.05)
    return PinnedVersioningOverride(version)


async def _registered_queues(client: Client, version: WorkerDeploymentVersion) -> list[str]:
    """The version's queues; none while its first poll has not registered it."""
    try:
        return await version_queues(client, version.deployment_name, version.build_id)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return []
        raise


async def _queue_routes_to(client: Client, queue: str) -> str | None:
    """The build the queue sends new runs to (None: unversioned workers, or not synced to the queue yet)."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW))
    return described.versioning_info.current_deployment_version.build_id or None

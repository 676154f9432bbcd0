"""The in-process engine (`Agent.run`, `rein run`) as its own build of the application's deployment.

It takes the routing only when the deployment has none; elsewhere its runs start pinned to its build (the script's
code serves them) and, as it stops, follow the current build again: none waits on a build no worker serves
(docs/deploys.md, "Scripts").
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

from rein.core.log import logger
from rein.temporal import deployment as d
from rein.temporal.history import describe_queue
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
    def __init__(self, client: Client | None, version: WorkerDeploymentVersion | None) -> None:
        self.client, self.version, self.current = client, version, False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pinned: set[str] = set()
        """Runs this engine pinned to its build, until they end or it lets go of them."""

    async def override(self, queue: str, workflow_id: str) -> PinnedVersioningOverride | None:
        """None where the queue routes to this build, else pinned to it."""
        if self.version is None or self.client is None or self.current:
            return None
        self.loop, (name, build) = asyncio.get_running_loop(), (self.version.deployment_name, self.version.build_id)
        deadline = self.loop.time() + WAIT_S
        routed = (await describe_queue(self.client, queue)).versioning_info.current_deployment_version.build_id
        # A deployment with no current version: this process's own promotion makes it one.
        while not routed and self.loop.time() < deadline and await promoted(self.version) is not False:
            if not (routed := d.current_build_id(await d.describe(self.client, name)) or ""):
                await asyncio.sleep(0.05)
        if routed == build:
            self.current = True
            return None
        while queue not in await d.version_queues(self.client, name, build) and self.loop.time() < deadline:
            await asyncio.sleep(0.05)
        self.pinned.add(workflow_id)
        return PinnedVersioningOverride(self.version)

    def let_go(self, timeout: float = 3.0) -> None:
        """`release`, from another thread than the engine's (Ctrl-C's handler), waiting at most `timeout` s."""
        if self.pinned and self.loop is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.release(), self.loop).result(timeout)

    async def release(self) -> None:
        """As the engine stops: its pinned runs still open follow the current build from their next task (bounded)."""
        async def let_go(workflow_id: str) -> None:
            with contextlib.suppress(RPCError):  # it ended: nothing to let go of
                await d.override_run(self.client, workflow_id, "", None)  # type: ignore[arg-type]

        pinned, self.pinned = self.pinned, set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*map(let_go, pinned)), 5)


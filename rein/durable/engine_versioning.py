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
from rein.temporal.deployment import DEFAULT_DEPLOYMENT, VERSIONING_OFF, current_build_id, describe, worker_version
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


async def own_build_unless_current(client: Client, version: WorkerDeploymentVersion | None
                                   ) -> PinnedVersioningOverride | None:
    """The start's versioning override: none when this build is current (the run follows the deployment's
    routing), else PINNED to this build (this process serves it; the routing is not the script's to change).
    A deployment with no current version yet is this process's to promote: the start waits for that (bounded)."""
    if version is None:
        return None
    deadline = asyncio.get_running_loop().time() + PROMOTION_WAIT_S
    while True:
        current = current_build_id(await describe(client, version.deployment_name))
        if current == version.build_id:
            return None
        if current is not None or asyncio.get_running_loop().time() > deadline:
            return PinnedVersioningOverride(version)
        done = await promoted(version)
        if done is None:
            await asyncio.sleep(0.05)  # this process's worker has not begun its promotion yet
        elif not done:
            return PinnedVersioningOverride(version)

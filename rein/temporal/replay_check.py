"""Whether another build replays a set of runs, asked of that build's own workers (a rollback's proof).

`rein deployment set-current` / `rollback` move the runs that follow the current version to another build.
Only that build's code can tell whether it replays them, so the client starts ReinReplayCheck pinned to it
(temporal's versioning override): the check's activity runs on a worker of that build and replays each run
with the worker's own workflows, sandbox and converter. Runs it cannot replay stay pinned to the build they
are on.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride, WorkerDeploymentVersion
from temporalio.worker import Replayer

from rein.core.contract import REPLAY_CHECK, REPLAY_CHECK_WORKFLOW_TYPE
from rein.temporal.deployment import version_queues
from rein.temporal.promotion import ReplayFailure, RunRef, replay_failures


class ReplayCheckActivity:
    """The activity a versioned worker serves; `replayer` is the worker's own, set as it starts running."""

    def __init__(self) -> None:
        self.replayer: Replayer | None = None

    @activity.defn(name=REPLAY_CHECK)
    async def replay_check(self, runs: list[list[str]]) -> list[list[str]]:
        if self.replayer is None:
            raise RuntimeError("this worker has not started yet")
        failures = await replay_failures(activity.client(), self.replayer, [RunRef(w, r) for w, r in runs])
        return [[f.run.workflow_id, f.run.run_id, f.error] for f in failures]


async def check_on(client: Client, version: WorkerDeploymentVersion, runs: list[RunRef],
                   timeout: timedelta = timedelta(seconds=60)) -> list[ReplayFailure]:
    """The runs `version`'s workers do not replay. Raises TimeoutError when none of its workers answers."""
    if not runs:
        return []
    queues = await version_queues(client, version.deployment_name, version.build_id)
    if not queues:
        raise TimeoutError(f"build {version.build_id} has polled no queue")
    handle = await client.start_workflow(
        REPLAY_CHECK_WORKFLOW_TYPE, [[r.workflow_id, r.run_id] for r in runs], id=f"rein-replay-check-{uuid.uuid4().hex[:12]}",
        task_queue=queues[0], execution_timeout=timeout, versioning_override=PinnedVersioningOverride(version),
        static_summary=f"does build {version.build_id} replay {len(runs)} runs?")
    try:
        answer: Any = await handle.result()
    except Exception as err:
        raise TimeoutError(f"no worker of build {version.build_id} answered: {err}") from None
    return [ReplayFailure(RunRef(w, r), why) for w, r, why in answer]

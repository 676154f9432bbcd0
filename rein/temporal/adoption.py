"""The current build carries on the runs other builds cannot: stuck on a bug, or left without a worker.

A PINNED run finishes on the build it started on (docs/deploys.md). Two kinds of run would wait
there for a person: one whose workflow task or rein activity keeps failing on that build's bug
(`TemporalReportedProblems`, `ReinStatus="stuck"`), and one pinned to a build whose workers are all
gone. The workers of a deployment's current version (a new build, once it starts; the build rolled
back to) look for both every ADOPT_INTERVAL_S, replay each such run's history with their own code
and, where it replays, pin the run to their own build
(UpdateWorkflowExecutionOptions: the override `temporal workflow update-options` sets). A run the
current build cannot replay stays where it is, and the worker logs why, once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.enums.v1 import VersionDrainageStatus
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import (
    UpdateWorkflowExecutionOptionsRequest,
)
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError
from temporalio.worker import Replayer

from rein.temporal.deployment import WATCH_INTERVAL_S, current_build_id, describe, set_current, version_queues
from rein.temporal.history import polled, seconds

ADOPT_INTERVAL_S = WATCH_INTERVAL_S
"""How often the current build looks for runs to carry on (REIN_ADOPT_INTERVAL_S; 0 turns it off)."""

log = logging.getLogger("rein.deployment")


@dataclass
class Adopter:
    """One versioned worker's search for runs of older builds of its deployment that it can carry on."""

    client: Client
    version: WorkerDeploymentVersion
    replayer: Replayer
    refused: set[str] = field(default_factory=set)
    """Runs (`id/run id`) this build cannot replay: logged once, not tried again."""
    carried: set[str] = field(default_factory=set)
    """Runs (`id/run id`) pinned to this build already (their search attributes may lag)."""

    async def run(self) -> None:
        """Until cancelled: look every ADOPT_INTERVAL_S (jittered, so replicas of a build take turns)."""
        while (interval := seconds("REIN_ADOPT_INTERVAL_S", ADOPT_INTERVAL_S)) > 0:
            await asyncio.sleep(interval * random.uniform(0.5, 1.0))
            try:
                await self.adopt()
            except RPCError as err:  # the server is busy or restarting: the next round asks again
                log.warning("rein deployment %s: looking for runs to carry on failed: %s",
                            self.version.deployment_name, err)

    async def adopt(self) -> list[str]:
        """One round: the workflow ids of the runs pinned to this build now. Only the current version
        adopts; with none current (its last worker handed the queue back as it stopped) or a current
        one whose workers are all gone (killed), this build claims it unless a newer build still runs."""
        described = await describe(self.client, self.version.deployment_name)
        if described is None:
            return []
        summaries = {s.deployment_version.build_id: s for s in described.worker_deployment_info.version_summaries}
        mine = summaries.get(self.version.build_id)
        current = current_build_id(described)
        if mine is None or (current not in (None, self.version.build_id) and await self._served(current)):
            return []
        if current != self.version.build_id:
            newer = [b for b, s in summaries.items() if s.create_time.ToNanoseconds() > mine.create_time.ToNanoseconds()]
            if [b for b in newer if b != current and await self._served(b)]:
                return []
            await set_current(self.client, self.version)
            log.info("rein deployment %s: %s is current (%s)", self.version.deployment_name, self.version.build_id,
                     f"the workers of {current} are gone" if current else "none was")
        others = [b for b, s in summaries.items() if b != self.version.build_id
                  and s.drainage_status != VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINED]
        if not others:
            return []
        runs = await self._stuck()
        for build_id in others:
            if not await self._served(build_id):
                runs.update(await self._runs(f'TemporalWorkerDeploymentVersion = "{self._name(build_id)}"'))
        adopted = []
        for (workflow_id, run_id), build_id in runs.items():
            if await self._replays(workflow_id, run_id):
                await self._pin(workflow_id, run_id)
                self.carried.add(f"{workflow_id}/{run_id}")
                log.info("rein deployment %s: run %s carried on by %s (it was on %s)", self.version.deployment_name,
                         workflow_id, self.version.build_id, build_id)
                adopted.append(workflow_id)
        return adopted

    def _name(self, build_id: str) -> str:
        return f"{self.version.deployment_name}:{build_id}"

    async def _stuck(self) -> dict[tuple[str, str], str]:
        """Open runs of the deployment's other builds whose task keeps failing or whose rein activity is stuck."""
        base = (f'TemporalWorkerDeployment = "{self.version.deployment_name}" AND '
                f'TemporalWorkerDeploymentVersion != "{self._name(self.version.build_id)}"')
        try:
            return await self._runs(f'{base} AND (TemporalReportedProblems IS NOT NULL OR ReinStatus = "stuck")')
        except RPCError:  # ReinStatus is not registered on this namespace
            return await self._runs(f"{base} AND TemporalReportedProblems IS NOT NULL")

    async def _runs(self, query: str) -> dict[tuple[str, str], str]:
        found = {}
        async for run in self.client.list_workflows(f'ExecutionStatus = "Running" AND {query}'):
            build = run.search_attributes.get("TemporalWorkerDeploymentVersion") or ["?"]
            if f"{run.id}/{run.run_id}" not in self.refused | self.carried:
                found[(run.id, run.run_id)] = str(build[0]).rpartition(":")[2]
        return found

    async def _served(self, build_id: str) -> bool:
        """Whether a worker of that build polled one of its workflow task queues lately."""
        queues = await version_queues(self.client, self.version.deployment_name, build_id)
        for queue in queues:
            if await polled(self.client, queue, (self.version.deployment_name, build_id)):
                return True
        return not queues

    async def _replays(self, workflow_id: str, run_id: str) -> bool:
        history = await self.client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        result = await self.replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            self.refused.add(f"{workflow_id}/{run_id}")
            log.warning("rein deployment %s: run %s stays on its build: %s cannot replay it: %s",
                        self.version.deployment_name, workflow_id, self.version.build_id, result.replay_failure)
            return False
        return True

    async def _pin(self, workflow_id: str, run_id: str) -> None:
        override = VersioningOverride(pinned=VersioningOverride.PinnedOverride(
            behavior=VersioningOverride.PinnedOverrideBehavior.PINNED_OVERRIDE_BEHAVIOR_PINNED,
            version=VersionProto(deployment_name=self.version.deployment_name, build_id=self.version.build_id)))
        await self.client.workflow_service.update_workflow_execution_options(UpdateWorkflowExecutionOptionsRequest(
            namespace=self.client.namespace, identity=self.client.identity,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
            workflow_execution_options=WorkflowExecutionOptions(versioning_override=override),
            update_mask=FieldMask(paths=["versioning_override"])))


_RUNNING: dict[str, asyncio.Task[None]] = {}
"""The Adopter of each version a worker of this process serves: one search per process, however many queues."""


async def carry_on_runs(worker: Any, version: WorkerDeploymentVersion) -> None:
    """The Adopter of this worker's version while the worker runs, unless another of this process's workers runs it."""
    key = version.to_canonical_string()
    if key in _RUNNING:
        return
    _RUNNING[key] = asyncio.ensure_future(Adopter(worker.client, version, replayer_of(worker)).run())
    try:
        await _RUNNING[key]
    finally:
        _RUNNING.pop(key).cancel()


def stop_carrying_on(version: WorkerDeploymentVersion) -> None:
    """As the process's first worker of `version` stops: no more rounds (one would make a version whose
    workers are stopping current again, after it handed its queues back)."""
    task = _RUNNING.get(version.to_canonical_string())
    if task is not None:
        task.cancel()


def replayer_of(worker: Any) -> Replayer:
    """A Replayer with the worker's own workflows, sandbox and converter: what decides whether it can take a run."""
    config = worker.config(active_config=True)
    return Replayer(workflows=config["workflows"], workflow_runner=config["workflow_runner"],
                    data_converter=worker.client.data_converter, namespace=worker.client.namespace,
                    workflow_failure_exception_types=config.get("workflow_failure_exception_types") or [])

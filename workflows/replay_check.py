"""ReinReplayCheck: asks one build whether it replays a list of runs (a rollback's proof, docs/deploys.md).

A client starts it pinned to the build it asks (a versioning override), so its activity runs on a worker
of that build, which replays each run's history with its own code (rein.temporal.replay_check). One
activity, no other commands.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from rein.core.contract import REPLAY_CHECK, REPLAY_CHECK_WORKFLOW_TYPE


@workflow.defn(name=REPLAY_CHECK_WORKFLOW_TYPE)
class ReplayCheckWorkflow:
    @workflow.run
    async def run(self, runs: list[list[str]]) -> list[list[str]]:
        """`runs`: [workflow id, run id] pairs; the answer: [workflow id, run id, why] for each that does not replay."""
        return await workflow.execute_activity(
            REPLAY_CHECK, runs, result_type=list[list[str]], start_to_close_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_attempts=3), summary=f"replay {len(runs)} runs")

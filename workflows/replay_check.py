"""ReinReplayCheck: pinned to a build, its workers replay runs, `chunk` per activity side by side (rein.temporal.promotion)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from rein.core.contract import REPLAY_CHECK, REPLAY_CHECK_WORKFLOW_TYPE


@workflow.defn(name=REPLAY_CHECK_WORKFLOW_TYPE)
class ReplayCheckWorkflow:
    def __init__(self) -> None:
        self.checked, self.failed = 0, list[list[str]]()

    @workflow.run
    async def run(self, runs: list[list[str]], chunk: int = 0) -> list[list[str]]:
        """`runs`: [workflow id, run id]; the answer: [workflow id, run id, why] of each that does not replay."""
        size = chunk or len(runs) or 1
        await asyncio.gather(*(self._replay(runs[i:i + size]) for i in range(0, len(runs), size)))
        return self.failed

    async def _replay(self, runs: list[list[str]]) -> None:
        self.failed += await workflow.execute_activity(
            REPLAY_CHECK, runs, result_type=list[list[str]], start_to_close_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_attempts=3), summary=f"replay {len(runs)} runs")
        self.checked += len(runs)

    @workflow.query(name="progress")
    def progress(self) -> list:
        return [self.checked, self.failed]

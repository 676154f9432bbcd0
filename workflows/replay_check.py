"""ReinReplayCheck: asks one build whether it replays a list of runs (rein.temporal.promotion, docs/deploys.md).

Started pinned to the build it asks (a versioning override), so its activities run on that build's workers, each
replaying `chunk` runs with the worker's own code; they run side by side, spread over the build's workers. The
`progress` query says how many runs were checked and which did not replay.
"""

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
        self.checked = 0
        self.failed: list[list[str]] = []

    @workflow.run
    async def run(self, runs: list[list[str]], chunk: int = 0) -> list[list[str]]:
        """`runs`: [workflow id, run id] pairs; the answer: [workflow id, run id, why] for each that does not replay."""
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
        """[runs checked, [workflow id, run id, why] of each that did not replay]."""
        return [self.checked, self.failed]

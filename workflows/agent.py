"""AgentWorkflow: every rein run. Its body is `rein.workflows.loop.AgentLoop`.

PINNED under Worker Versioning: a run finishes on the build it started on (docs/deploys.md);
without versioning the behaviour is ignored.

Kept to a few lines on purpose: the workflow sandbox re-imports (and, without cached
bytecode, recompiles) a workflow's module for every run, while the loop, pure like
everything the workflow imports, is passed through and imported once per worker.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from rein.contract import WORKFLOW_TYPE
    from rein.workflows.loop import AgentLoop


@workflow.defn(name=WORKFLOW_TYPE, versioning_behavior=VersioningBehavior.PINNED)
class AgentWorkflow(AgentLoop):
    @workflow.init
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)

    @workflow.run
    async def run(self, *args: Any) -> dict[str, Any]:
        """Guarded: whatever goes wrong in here fails the run (status `failed`), never a workflow task."""
        return await super().run(*args)

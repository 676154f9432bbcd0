"""AgentWorkflow: every rein run. Its body is `rein.workflows.loop.AgentLoop`.

It declares no versioning behaviour (the server rejects one from an unversioned worker): a
versioned rein worker's deployment config makes PINNED the default (rein.temporal.deployment),
so a run finishes on the build it started on (docs/deploys.md).

Kept to a few lines on purpose: the workflow sandbox re-imports (and, without cached
bytecode, recompiles) a workflow's module for every run, while the loop, pure like
everything the workflow imports, is passed through and imported once per worker.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from rein.core.contract import WORKFLOW_TYPE
    from rein.workflows.loop import AgentLoop


@workflow.defn(name=WORKFLOW_TYPE)
class AgentWorkflow(AgentLoop):
    @workflow.init
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)

    @workflow.run
    async def run(self, *args: Any) -> dict[str, Any]:
        """The run's own fault fails the run; a bug in workflow code fails the workflow task (see AgentLoop.run)."""
        return await super().run(*args)


"""What AgentWorkflow may import inside temporalio's workflow sandbox: rein's pure modules.

Its own module so that what depends on the list (the plugin's sandbox, the default build id of a
versioned worker) does not depend on each other.
"""

from __future__ import annotations

import dataclasses

from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import (
    SandboxedWorkflowRunner,
    SandboxRestrictions,
)

PURE_MODULES = (
    "rein.core.circuit",
    "rein.core.compaction",
    "rein.core.config",
    "rein.core.contract",
    "rein.core.events",
    "rein.core.ir",
    "rein.core.machine",
    "rein.core.result",
    "rein.core.search_names",
    "rein.core.session",
    "rein.core.summaries",
    "rein.core.threads",
    "rein.core.evals",
    "rein.core.inbox",
    "rein.core.policy",
    "rein.temporal.child",
    "rein.core.digest",
    "rein.core.errors",
    "rein.core.failures",
    "rein.core.agent_identity",
    "rein.core.shared_state",
    "rein.core.waits",
    "rein.workflows",
)
"""rein modules AgentWorkflow (and rein.temporal.workflows helpers) import: pure, no I/O.
`rein.workflows` is the whole workflows/ package, AgentWorkflow included: deterministic code
(tests/test_layers.py keeps its imports to this list), imported once per worker. Re-imported in every
run's sandbox it cost a third of a one-call run's worker CPU (bench/README.md, short runs)."""

IMPORT_HOOKS = ("beartype",)
"""Libraries that install import hooks in the worker's process: beartype's claw (`beartype_this_package`,
which fastmcp's key-value store calls) loads every module through its own loader, and that loader
imports beartype. Outside passthrough the sandbox imported all of beartype again for every new run of a
workflow whose module it re-imports (AgentWorkflow's did until it passed through; a user's own still
do), on the event loop thread: seconds per run start with 60 runs at once."""

SANDBOX_PASSTHROUGH = ("pydantic", "pydantic_core", "annotated_types", "typing_inspection", "jsonpatch", "jsonpointer",
                       *IMPORT_HOOKS, *PURE_MODULES)
"""Imported once per worker instead of once per run inside the sandbox; all deterministic (jsonpatch: a thread's
shared state, rein.core.shared_state)."""


def sandbox_runner(runner: WorkflowRunner | None) -> WorkflowRunner:
    """temporalio's own sandbox with rein's passthrough added (the stock runner: no private SDK state on
    the task path); any other runner is kept as chosen."""
    if runner is None:
        return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*SANDBOX_PASSTHROUGH))
    if isinstance(runner, SandboxedWorkflowRunner):
        return dataclasses.replace(runner, restrictions=runner.restrictions.with_passthrough_modules(*SANDBOX_PASSTHROUGH))
    return runner

"""Run a rein agent as a child workflow of your own workflow.

    from temporalio import workflow
    with workflow.unsafe.imports_passed_through():
        from rein.temporal.child import run_agent

    @workflow.defn
    class Triage:
        @workflow.run
        async def run(self, ticket: str) -> str:
            result = await run_agent("support-bot", f"Triage: {ticket}")
            return result.output

The child is an ordinary `AgentWorkflow` run: the worker serving that agent
(`ReinPlugin(agents=[...])` or `python worker.py --agent ...`) runs it, and its
interrupts are answered with signals to the child's workflow id. Pure: safe to
import inside the workflow sandbox.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import CancelledError, ChildWorkflowError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from rein.core.contract import WORKFLOW_TYPE, AgentInput, RunOutcome
from rein.core.session import Session


def _input(agent: str, prompt: str | None, session: Session | None, config: dict[str, Any] | None,
           metadata: dict[str, Any] | None) -> dict[str, Any]:
    return AgentInput(agent=agent, prompt=prompt, session=session, config=config, metadata=metadata or {}).model_dump(
        mode="json", exclude_none=True
    )


async def start_agent(
    agent: str,
    prompt: str | None = None,
    *,
    session: Session | None = None,
    config: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    id: str | None = None,
    task_queue: str | None = None,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.TERMINATE,
    **child_options: Any,
) -> ChildWorkflowHandle[Any, RunOutcome]:
    """Start agent `agent` (its registered name) as a child AgentWorkflow; returns its handle.

    `id` defaults to `<parent id>/<agent>-<n>` (deterministic); `task_queue` to the parent's.
    """
    if id is None:
        id = f"{workflow.info().workflow_id}/{agent}-{workflow.uuid4().hex[:8]}"
    return await workflow.start_child_workflow(
        WORKFLOW_TYPE,
        _input(agent, prompt, session, config, metadata),
        id=id,
        task_queue=task_queue,
        result_type=RunOutcome,
        parent_close_policy=parent_close_policy,
        static_summary=f"agent {agent}",
        **child_options,
    )


async def run_agent(
    agent: str,
    prompt: str | None = None,
    *,
    session: Session | None = None,
    config: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    id: str | None = None,
    task_queue: str | None = None,
    **child_options: Any,
) -> RunOutcome:
    """Run agent `agent` as a child AgentWorkflow and return its slim result (output, status, usage,
    counts; the child's `session`/`steps` queries serve the rest). A child that was cancelled (it
    closes CANCELED) gives an outcome with stop_reason `cancelled` (its output: the `outcome` query)."""
    handle = await start_agent(
        agent, prompt, session=session, config=config, metadata=metadata, id=id, task_queue=task_queue,
        **child_options,
    )
    try:
        return await handle
    except ChildWorkflowError as err:
        if not isinstance(err.cause, CancelledError):
            raise
        return RunOutcome(status="done", output=None, stop_reason="cancelled", run_id=handle.id)

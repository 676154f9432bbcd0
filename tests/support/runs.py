"""Starting a run the way ops do: the raw contract ("AgentWorkflow", a plain dict input)."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowHandle


async def start(env: Any, agent: str, prompt: str, wf_id: str, tq: str, client: Client | None = None,
                **extra: Any) -> WorkflowHandle:
    """Start `agent` on `prompt` as run `wf_id` on queue `tq` (via `client`, default the env's)."""
    client = client or env.client
    return await client.start_workflow(
        "AgentWorkflow", {"agent": agent, "prompt": prompt, **extra}, id=wf_id, task_queue=tq
    )


async def forget_sticky_worker(client: Client, run_id: str) -> None:
    """Tell the server the worker that cached run `run_id` is gone (the test just SIGKILLed it).

    Its next workflow task then goes to the run's task queue at once, where a fresh worker replays the
    run. Without this the server first offers it to the dead worker's sticky queue and waits out that
    worker's sticky schedule-to-start timeout (10 s): Temporal's fallback, a real timer no test is about.
    """
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest

    await client.workflow_service.reset_sticky_task_queue(
        ResetStickyTaskQueueRequest(namespace=client.namespace, execution=WorkflowExecution(workflow_id=run_id)))

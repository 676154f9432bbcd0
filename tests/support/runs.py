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


async def left_waiting(client: Client, agent: Any, queue: str, prompt: str) -> str:
    """The id of a run of `agent` that waits for approval and whose worker has just stopped.

    The server still lists that worker as a poller for a minute: the case of a query nobody answers.
    """
    import rein
    from rein.client import ReinClient
    from tests.support.waiting import poll

    reins = ReinClient(client, task_queue=queue)
    async with rein.create_worker(client, agents=[agent], task_queue=queue):
        run_id = (await reins.start(agent.name, prompt)).id

        async def waiting() -> bool:
            return (await reins.status(run_id)).status == "waiting_approval"

        await poll(waiting, f"{run_id} to wait for approval", 60, interval=0.1)
    return run_id

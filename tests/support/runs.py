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

"""Runs of the deploy tests' agents (tests/agents/deploys.py: `deploy-pay`, `deploy-pay-ask`), started from a
client as any caller starts them, and what they wait for."""

from __future__ import annotations

import asyncio
import uuid

from rein.client import ReinClient


async def start(client: ReinClient, agent: str, task_queue: str, amount: int, prefix: str | None = None) -> str:
    """A run of `agent` paying `amount` (its id: `prefix` or the agent's name, and a random tail)."""
    run_id = f"{prefix or agent}-{uuid.uuid4().hex[:8]}"
    await client.client.start_workflow("AgentWorkflow", {"agent": agent, "prompt": f"{run_id} {amount}"},
                                       id=run_id, task_queue=task_queue)
    return run_id


async def status_is(client: ReinClient, run_id: str, status: str) -> bool:
    return (await client.status(run_id)).status == status


async def all_waiting(client: ReinClient, run_ids: list[str]) -> bool:
    """Every run waits for approval."""
    return all(await asyncio.gather(*(status_is(client, r, "waiting_approval") for r in run_ids)))

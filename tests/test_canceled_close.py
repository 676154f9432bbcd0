"""A cancelled run closes with Temporal's own status CANCELED (what the UI's list and filters show),
and rein still reads it as a RunResult with stop_reason `cancelled`, also with no worker left: the
`rein` console script reads the `outcome` from the replayed history."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from temporalio.client import WorkflowExecutionStatus

import rein
from rein import Agent, LoopConfig, MockProvider, ToolCall
from rein.client import ReinClient
from tests.support.waiting import poll
from tests.test_cli import rein_cli


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def waiting_agent(name: str) -> Agent:
    return Agent(provider=MockProvider([[ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})], "3"]),
                 tools=[add], name=name, config=LoopConfig(permission="ask"))


@pytest.mark.parametrize("how", ["rein cancel", "temporal cancel"])
async def test_cancelled_run_is_canceled_and_reads_as_cancelled(dev, how):
    """`rein cancel` (the cancel update) and Temporal's cancellation both close the run CANCELED.
    The second is read with no worker left (queries then come from the replayed history)."""
    name, queue = f"closes-{uuid.uuid4().hex[:6]}", f"closes-{uuid.uuid4().hex[:6]}"
    client = ReinClient(dev.client, task_queue=queue)
    address = dev.client.service_client.config.target_host
    async with rein.create_worker(dev.client, agents=[waiting_agent(name)], task_queue=queue):
        handle = await client.start(name, "1+2?")

        async def waiting() -> bool:
            return (await client.status(handle.id)).status == "waiting_approval"

        await poll(waiting, "waiting for approval")
        if how == "rein cancel":
            cancelled = await asyncio.to_thread(  # the worker runs on this event loop meanwhile
                rein_cli, "cancel", handle.id, "--reason", "wrong ticket", "--address", address)
            assert cancelled.returncode == 0, cancelled.stderr
            await check_cancelled(client, handle, address, worker=True)
        else:
            await handle.cancel()  # what the UI's "Request Cancellation" and `temporal workflow cancel` do
            await poll(lambda: closed(handle), "closed")
    if how == "temporal cancel":
        await check_cancelled(client, handle, address, worker=False)


async def closed(handle) -> bool:  # noqa: ANN001
    return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING


async def check_cancelled(client: ReinClient, handle, address: str, worker: bool) -> None:  # noqa: ANN001
    await poll(lambda: closed(handle), "closed")
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    query = f'WorkflowId="{handle.id}" AND ExecutionStatus="Canceled"'
    assert [wf.id async for wf in client.client.list_workflows(query)] == [handle.id]

    # Its worker has just exited (it still looks alive): each query races the history at once
    # (REIN_QUERY_GRACE_S=0) instead of after 3 s, five queries in all.
    unanswered = {} if worker else {"REIN_QUERY_GRACE_S": "0"}
    as_json = await asyncio.to_thread(rein_cli, "result", handle.id, "--json", "--address", address, **unanswered)
    assert as_json.returncode == 10, as_json.stderr  # EXIT_CANCELLED, the JSON still on stdout
    why = "wrong ticket" if worker else "workflow cancellation requested"
    assert as_json.stderr.strip() == f"rein: run {handle.id} was cancelled: {why}"
    result = json.loads(as_json.stdout)
    assert result["stop_reason"] == "cancelled" and result["status"] == "done"
    assert result["output"] is None and result["run_id"] == handle.id
    if not worker:  # each query of a run no worker serves waits out a timeout: the rest with a worker only
        return
    rebuilt = await client.result(handle.id)
    assert rebuilt.stop_reason == "cancelled" and [m.role for m in rebuilt.session.messages][:2] == ["user", "assistant"]
    status = await asyncio.to_thread(rein_cli, "status", handle.id, "--json", "--address", address)
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "cancelled", status.stdout

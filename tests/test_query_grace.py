"""A run whose worker went silent pays the query grace once, not once per query.

A worker stopped a moment ago is still listed as a poller, so a query waits REIN_QUERY_GRACE_S
for it before replaying the history. `rein result` asks five queries; before, each waited the
grace again (15 s for one command).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from rein import Agent, LoopConfig, settings
from rein.temporal import history
from tests.support.providers import OpsModel, restart
from tests.support.runs import left_waiting

NAME = f"grace-{uuid.uuid4().hex[:6]}"
AGENT = Agent(provider=OpsModel(), tools=[restart], config=LoopConfig(permission="ask"), name=NAME)


async def test_a_silent_worker_costs_the_grace_once_per_run(dev, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    run_id = await left_waiting(dev.client, AGENT, f"grace-{uuid.uuid4().hex[:8]}", "billing please")
    # Its worker has stopped but is still listed as a poller: the first query waits the grace out.
    monkeypatch.setenv("REIN_QUERY_GRACE_S", "0.2")
    status, served = await history.answer(dev.client, run_id, "status")
    assert served is False and status["status"] == "waiting_approval"
    # Now a grace and a query timeout far longer than the test's bound: only a run known to be
    # silent is answered (from its history) in time. (The server gives up on a query for a stopped
    # worker after ~25 s, so a wait for the worker outlasts the bound.)
    monkeypatch.setenv("REIN_QUERY_GRACE_S", "600")
    monkeypatch.setattr(history, "QUERY_TIMEOUT_S", 600.0)
    for name in ("status", "session", "outcome"):
        _, served = await asyncio.wait_for(history.answer(dev.client, run_id, name), timeout=15)
        assert served is False, name
    await dev.client.get_workflow_handle(run_id).terminate("the test is done")  # no worker to take a decision


def test_silence_is_per_run_and_lasts_while_a_stopped_worker_may_look_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(history.time, "monotonic", lambda: now[0])
    monkeypatch.setenv("REIN_QUERY_GRACE_S", "3")
    monkeypatch.setattr(history, "_SILENT", {("quiet", None): 1000.0})
    assert history._grace(("quiet", None)) == 0.0
    assert history._grace(("quiet", "an earlier run of the chain")) == 3.0
    assert history._grace(("talkative", None)) == 3.0
    now[0] += settings.current().poller_fresh_s  # its worker has dropped off the poller list by now
    assert history._grace(("quiet", None)) == 3.0
    assert ("quiet", None) not in history._SILENT


async def test_rein_status_of_a_served_run_describes_it_once(dev, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """`rein status`/`show` already described the run: its task queue decides whether a worker serves it."""
    import rein
    from rein.client import ReinClient
    from rein.ops.runs import describe_run
    from tests.support.waiting import poll

    queue = f"grace-{uuid.uuid4().hex[:8]}"
    reins = ReinClient(dev.client, task_queue=queue)
    async with rein.create_worker(dev.client, agents=[AGENT], task_queue=queue):
        run_id = (await reins.start(AGENT.name, "search please")).id
        await poll(lambda: _status_is(reins, run_id, "waiting_approval"), f"{run_id} waiting", 60, interval=0.1)
        calls = count_calls(dev.client, monkeypatch)
        detail = await describe_run(reins, run_id)
        assert (detail.status, detail.served) == ("waiting_approval", True)
        assert calls == {"describe_workflow_execution": 1, "describe_task_queue": 1, "query_workflow": 1}
        monkeypatch.undo()
        await reins.cancel(run_id, wait=True)


async def test_a_run_result_is_rebuilt_in_four_round_trips(dev, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The outcome, one look at whether a worker serves the run, one query for its session, status and
    steps (before: a query for each, each describing the run and its queue again: ten round trips)."""
    import rein
    from rein.client import ReinClient

    queue = f"grace-{uuid.uuid4().hex[:8]}"
    reins = ReinClient(dev.client, task_queue=queue)
    async with rein.create_worker(dev.client, agents=[FINISHING], task_queue=queue):
        run_id = (await reins.start(FINISHING.name, "search please")).id
        await reins.outcome(reins.handle(run_id))
        calls = count_calls(dev.client, monkeypatch)
        result = await reins.result(run_id)
        assert result.status == "done" and [s.kind for s in result.steps][:2] == ["model", "tool"]
        assert calls == {"get_workflow_execution_history": 1, "describe_workflow_execution": 1,
                         "describe_task_queue": 1, "query_workflow": 1}


FINISHING = Agent(provider=OpsModel(), tools=[restart], name=f"{NAME}-auto")


def count_calls(client: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """RPCs `client` makes from now on, by name (the ones reading a run)."""
    calls: dict[str, int] = {}
    service = client.workflow_service
    for name in ("describe_workflow_execution", "describe_task_queue", "query_workflow", "get_workflow_execution_history"):
        def counted(request: Any, *, _name: str = name, _call: Any = getattr(service, name), **kwargs: Any) -> Any:
            calls[_name] = calls.get(_name, 0) + 1
            return _call(request, **kwargs)

        monkeypatch.setattr(service, name, counted)
    return calls


async def _status_is(reins: Any, run_id: str, status: str) -> bool:
    return (await reins.status(run_id)).status == status

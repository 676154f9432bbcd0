"""A run read from its history shows the state its worker reached, not events no worker took in yet.

temporalio's Replayer runs the workflow over every event it is given, also those that arrived after
the run's last completed workflow task (a model's reply, a decision): a client reading that replay
saw a state the run had not reached. Under CI load, `waiting_approval` a moment before the worker
got the model's reply; the approval sent on it was refused (tests/test_safe_deploys.py, 2 of 10
runs with the CPU busy).
"""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import EventType

import rein
from rein import Agent, LoopConfig
from rein.client import ReinClient
from rein.temporal import history
from tests.support.providers import OpsModel, restart
from tests.support.runs import left_waiting

NAME = f"replayed-{uuid.uuid4().hex[:6]}"
AGENT = Agent(provider=OpsModel(), tools=[restart], config=LoopConfig(permission="ask"), name=NAME)
AUTO = Agent(provider=OpsModel(), tools=[restart], name=f"{NAME}-auto")


async def test_a_decision_no_worker_took_in_is_not_replayed_as_taken(dev, monkeypatch) -> None:  # noqa: ANN001
    queue = f"replayed-{uuid.uuid4().hex[:8]}"
    run_id = await left_waiting(dev.client, AGENT, queue, "billing please")
    handle = dev.client.get_workflow_handle(run_id)
    await handle.signal("approve", {"approver": "ops", "reason": "go"})  # a signal needs no worker

    full = await handle.fetch_history()
    assert full.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
    processed = history.as_processed(full)
    kept = [e.event_type for e in processed.events]
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED not in kept
    assert kept[-1] != EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED  # the last task's commands are kept

    monkeypatch.setenv("REIN_QUERY_GRACE_S", "0.2")  # its stopped worker is still listed as a poller
    status, served = await history.answer(dev.client, run_id, "status")
    assert served is False and status["status"] == "waiting_approval"
    assert status["pending_tool_calls"] and status["pending_tool_calls"][0]["name"] == "restart"

    # The decision was not lost: the next worker takes it in and the run finishes.
    async with rein.create_worker(dev.client, agents=[AGENT], task_queue=queue):
        outcome = await ReinClient(dev.client, task_queue=queue).outcome(handle)
    assert (outcome.status, outcome.output) == ("done", "Report: billing restarted")


async def test_a_closed_run_replays_to_its_end(dev) -> None:  # noqa: ANN001
    """The closing event is a command's: nothing of a closed run's history is cut."""
    queue = f"replayed-{uuid.uuid4().hex[:8]}"
    reins = ReinClient(dev.client, task_queue=queue)
    async with rein.create_worker(dev.client, agents=[AUTO], task_queue=queue):
        run = await reins.start(AUTO.name, "search please")
        await reins.outcome(dev.client.get_workflow_handle(run.id))
    full = await dev.client.get_workflow_handle(run.id).fetch_history()
    assert history.as_processed(full) is full
    status = (await history.replayed(dev.client, run.id)).query("status")
    assert status["status"] == "done"

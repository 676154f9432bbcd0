"""Each sender hears its own turn (rein.core.threads, issue 53): two senders on one thread with a person's decision
between them, through ReinClient and `agent.thread(id)`, in each mode; the inbox's "model said" of a waiting turn;
the stored history of it (patch rein-turn-wait). The same through `rein send` processes: tests/test_threads_processes.py."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import rein
from rein.client import ReinClient, ThreadRefused
from tests.support.waiting import poll
from tests.test_threads import echo_agent


async def test_each_sender_hears_its_own_turn_across_an_approval(dev, ids):
    """Turn 1 waits for approval; a second sender queues turn 2, a third steers turn 1 (joining it while it waits:
    read once the decision is made). After the approval each hears its own turn: the steer turn 1's answer to its
    message, the queued sender turn 2's wait (no words yet), never turn 1's answer."""
    queue, thread_id = ids
    agent = echo_agent("ask", permission="ask")
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        first = await runs.send(thread_id, "tool:0.1", agent=agent.name)
        assert (await runs.reply(first)).interrupt.type == "need_approval"
        second = await runs.send(thread_id, "tool:0.2", agent=agent.name)
        steer = await runs.send(thread_id, "and this", agent=agent.name, mode="steer")
        assert (second.turn, second.joined, steer.turn, steer.joined, steer.waits) == (2, False, 1, True, "need_approval")
        steered = asyncio.ensure_future(runs.reply(steer))
        await runs.approve(thread_id, wait=True)
        told = await asyncio.wait_for(steered, 30)
        assert (told.status, told.output) == ("done", "heard: tool:0.1 | and this")  # after the decision, with it
        queued = await asyncio.wait_for(runs.reply(second), 30)
        assert (queued.status, queued.interrupt.type, queued.output) == ("interrupted", "need_approval", None)
        assert [c.arguments for c in queued.session.pending_tool_calls] == [{"seconds": 0.2}]  # turn 2's own call
        assert [s.kind for s in queued.steps] == ["model"]  # turn 2's steps only
        item = await poll(lambda: _waiting_item(runs, agent.name, thread_id, "seconds=0.2"), "turn 2 in the inbox")
        assert item.said == ""  # the model said nothing in turn 2: not turn 1's words
        assert (await runs.thread(thread_id)).last_output == "heard: tool:0.1 | and this"  # the last ended turn's
        await runs.deny(thread_id, reason="not now")
        last = await asyncio.wait_for(runs.reply(second), 30)
        assert (last.status, last.output) == ("done", "heard: tool:0.2")


async def _waiting_item(runs: ReinClient, agent: str, thread_id: str, args: str):
    """The thread's entry in the inbox once it waits for the call with these arguments (visibility lags)."""
    items = await runs.inbox(agent=agent)
    return next((i for i in items if i.run_id == thread_id and [c.args for c in i.calls] == [args]), None)


async def test_thread_send_hears_its_own_turn_in_each_mode():
    """`agent.thread(id).asend` (the durable engine, the embedded server) with a person's decision between two
    senders: a queued message hears its own turn (here: its wait, with none of turn 1's words), a steer into a
    waiting turn that turn once it went on with the message, an interrupt the turn it cut, a reject is refused."""
    from rein.client import connect

    agent = echo_agent("ask-engine", permission="ask")
    thread = agent.thread(f"own-{uuid.uuid4().hex[:8]}")
    runs = await connect()
    first = await thread.asend("tool:0.1")
    assert first.interrupt.type == "need_approval"
    queued = asyncio.ensure_future(thread.asend("tool:0.2"))
    await poll(lambda: _waiting_count(runs, thread.thread_id, queued=1), "turn 2 queued")
    steered = asyncio.ensure_future(thread.asend("and this", mode="steer"))
    await poll(lambda: _waiting_count(runs, thread.thread_id, queued=1, steering=1), "the steer taken")
    with pytest.raises(ThreadRefused, match="busy"):
        await thread.asend("now!", mode="reject")
    await runs.approve(thread.thread_id, wait=True)
    told = await asyncio.wait_for(steered, 60)
    assert (told.status, told.output) == ("done", "heard: tool:0.1 | and this")
    second = await asyncio.wait_for(queued, 60)
    assert (second.status, second.interrupt.type, second.output) == ("interrupted", "need_approval", None)
    cut = await asyncio.wait_for(thread.asend("forget it", mode="interrupt"), 60)  # denies turn 2's call, goes on
    assert (cut.status, cut.output) == ("done", "heard: tool:0.2 | forget it")


async def _waiting_count(runs: ReinClient, thread_id: str, queued: int = 0, steering: int = 0) -> bool:
    try:
        view = await runs.thread(thread_id)
    except Exception:  # noqa: BLE001 - not started yet (the first message is still on its way)
        return False
    return (len(view.queued), len(view.steering)) == (queued, steering)


async def test_the_stored_history_of_senders_hearing_their_own_turns_replays():
    """Turn 1 waits for approval, turn 2 queued, a steer into turn 1's wait (tests/histories/make_histories.py
    thread_turns): its wait for the turn recorded the rein-turn-wait marker and was answered only after the
    approval; this build replays it, and the older thread histories (no marker) keep their earlier answers."""
    import json
    from pathlib import Path

    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from rein.temporal.converter import rein_data_converter
    from rein.workflows import AgentWorkflow

    path = Path(__file__).parent / "histories" / "agent_thread_turns_v1.json"
    history = WorkflowHistory.from_json("agent-thread-turns", path.read_text())
    markers = [json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)
               for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
               and e.marker_recorded_event_attributes.marker_name == "core_patch"]
    assert "rein-turn-wait" in [m.get("id") for m in markers]
    await Replayer(workflows=[AgentWorkflow], data_converter=rein_data_converter()).replay_workflow(history)


async def test_every_query_of_a_thread_answers_from_its_replayed_history(dev, ids):
    """With no worker left, a client reads a thread by replaying its history in its own process (rein.temporal.history):
    each query handler runs there outside the workflow's context, so none may ask `workflow.info()` (the AG-UI and
    AI SDK endpoints read `rein.thread` that way when the worker is slow or gone)."""
    from rein.core.shared_state import STATE_QUERY
    from rein.core.threads import THREAD_QUERY
    from rein.temporal import history

    queue, thread_id = ids
    agent = echo_agent("replayed", permission="ask")
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        first = await runs.send(thread_id, "tool:0.1", agent=agent.name)
        assert (await runs.reply(first)).interrupt.type == "need_approval"
    replayed = await history.replayed(dev.client, thread_id)
    view = replayed.query(THREAD_QUERY)  # each as the worker would answer it, in JSON
    assert (view["thread_id"], view["turns"], view["open"]) == (thread_id, 1, True)
    assert replayed.query("status")["status"] == "waiting_approval"
    assert replayed.query(STATE_QUERY)["version"] == 0
    await dev.client.get_workflow_handle(thread_id).terminate("the test is over")  # no worker serves it any more

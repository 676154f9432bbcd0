"""Threads (rein.core.threads): one durable run per conversation, taking messages at any moment."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import rein
from rein import Agent, Completion, LoopConfig, Message, ToolCall, Usage
from rein.client import ReinClient, ThreadRefused
from rein.core.threads import SendReceipt
from tests.support.waiting import poll


class Echo:
    """Stateless: answers every user message since its last answer; `tool:N` asks for the `wait` tool first."""

    async def complete(self, messages, tools=None, **kw):
        since = []
        for m in reversed(messages):
            if m.role == "assistant" and m.content:
                break
            if m.role == "user":
                since.insert(0, m.content)
        last = messages[-1]
        if last.role == "user" and last.content.startswith("tool:"):
            call = ToolCall(id=f"w{len(messages)}", name="wait", arguments={"seconds": float(last.content[5:])})
            return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls",
                              usage=Usage(input_tokens=1, output_tokens=1))
        return Completion(message=Message(role="assistant", content="heard: " + " | ".join(since)),
                          finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1))

    async def stream(self, messages, tools=None, **kw):  # pragma: no cover - not asked to stream
        yield


async def wait(seconds: float) -> str:
    """Wait a while."""
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


def echo_agent(prefix: str = "echo", provider: object = None, **config: object) -> Agent:
    """A uniquely named agent of `provider` (default Echo) with the `wait` tool; `config`: LoopConfig fields."""
    return Agent(provider=provider or Echo(), tools=[wait], name=f"{prefix}-{uuid.uuid4().hex[:6]}",
                 config=LoopConfig(detect_loops=False, **config))


async def test_a_thread_takes_turns_from_messages_and_dedupes_ids(dev, ids):
    queue, thread_id = ids
    agent = echo_agent()
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        first = await runs.send(thread_id, "hello", agent=agent.name, message_id="m1")
        assert (first.turn, first.duplicate) == (1, False)
        again = await runs.send(thread_id, "hello", agent=agent.name, message_id="m1")
        # the first one's receipt (the server answers a retry within one run), said to be a repeat
        assert again == first.model_copy(update={"duplicate": True})
        answer = await runs.reply(first)
        assert answer.output == "heard: hello"
        second = await runs.send(thread_id, "and again", agent=agent.name)
        assert second.turn == 2
        answer = await runs.reply(second)
        assert answer.output == "heard: and again"
        assert [m.content for m in answer.session.messages if m.role == "user"] == ["hello", "and again"]
        view = await runs.thread(thread_id)
        assert (view.status, view.turns, view.open, view.queued) == ("idle", 2, False, [])
        await runs.cancel(thread_id, wait=True)
        with pytest.raises(ThreadRefused) as refused:
            await runs.send(thread_id, "late", agent=agent.name)
        assert refused.value.kind == "ThreadEnded"


class Slow(Echo):
    """Echo whose answer to `slow:N` takes N seconds, streaming a first word at once when asked to stream."""

    async def complete(self, messages, tools=None, **kw):
        last = messages[-1]
        if last.role == "user" and last.content.startswith("slow:"):
            await asyncio.sleep(float(last.content[5:]))
        return await super().complete(messages, tools, **kw)



async def test_each_mode_while_a_tool_runs(dev, ids):
    queue, thread_id = ids
    agent = echo_agent()
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        busy = await _busy(runs, thread_id, agent, "tool:1.5")
        queued = await runs.send(thread_id, "next turn please", agent=agent.name)
        steered = await runs.send(thread_id, "also this", agent=agent.name, mode="steer")
        with pytest.raises(ThreadRefused) as refused:
            await runs.send(thread_id, "now!", agent=agent.name, mode="reject")
        assert refused.value.kind == "Busy" and "turn 1" in str(refused.value)
        assert (busy.turn, queued.turn, queued.ahead, steered.turn) == (1, 2, 1, 1)
        first = await runs.reply(busy)
        # The tool call finished first; the steering message joined before the next model call.
        assert first.output == "heard: tool:1.5 | also this"
        assert [s.kind for s in first.steps] == ["model", "tool", "model"]
        second = await runs.reply(queued)
        assert second.output == "heard: next turn please"
        idle = await runs.send(thread_id, "now!", agent=agent.name, mode="reject")  # idle: it starts a turn
        assert (await runs.reply(idle)).output == "heard: now!"
        users = [m.content for m in second.session.messages if m.role == "user"]
        assert users == ["tool:1.5", "also this", "next turn please"]


async def test_a_thread_holds_at_most_max_waiting_messages_and_refuses_one_more(dev, ids):
    """MAX_WAITING messages wait behind a busy turn (queued and steering alike); one more is refused as Busy with
    why, a duplicate of a waiting one still gets its receipt, and every waiting message becomes a turn."""
    from rein.core.threads import MAX_WAITING

    queue, thread_id = ids
    agent = echo_agent()
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        busy = await _busy(runs, thread_id, agent, "tool:8")  # long enough for 101 sends on a loaded machine
        waiting = [await runs.send(thread_id, f"m{n}", agent=agent.name, message_id=f"m{n}",
                                   mode="steer" if n == 0 else "queue") for n in range(MAX_WAITING)]
        with pytest.raises(ThreadRefused) as refused:
            await runs.send(thread_id, "one too many", agent=agent.name)
        assert refused.value.kind == "Busy" and f"{MAX_WAITING} messages already wait" in str(refused.value)
        again = await runs.send(thread_id, "m7", agent=agent.name, message_id="m7")
        assert again.model_dump(exclude={"duplicate"}) == waiting[7].model_dump(exclude={"duplicate"})
        assert again.duplicate and not waiting[7].duplicate
        assert (await runs.reply(busy)).output == "heard: tool:8 | m0"
        last = await runs.reply(waiting[-1])
        assert last.output == f"heard: m{MAX_WAITING - 1}"
        view = await runs.thread(thread_id)
        assert (view.turns, view.queued) == (MAX_WAITING, [])


async def test_a_thread_too_large_to_continue_as_new_refuses_new_messages(dev, ids, monkeypatch):
    """A conversation above the payload limit (here a payload store of 1 MB at most) cannot be handed to a new
    run: the thread refuses the next message (ThreadFull, what to do) instead of growing its history."""
    from temporalio.client import Client, WithStartWorkflowOperation
    from temporalio.common import WorkflowIDConflictPolicy

    from rein.core.contract import WORKFLOW_TYPE
    from rein.core.threads import MAX_MESSAGE_CHARS, SEND_UPDATE, SendReceipt, SendRequest
    from rein.temporal.converter import rein_data_converter

    monkeypatch.setenv("REIN_STORAGE_MAX_BYTES", str(1_000_000))
    client = Client(**{**dev.client.config(), "data_converter": rein_data_converter()})
    queue, thread_id = ids
    agent = echo_agent()
    runs = ReinClient(client, queue)
    big = "x" * (MAX_MESSAGE_CHARS - 10)
    async with rein.create_worker(client, agents=[agent], task_queue=queue):
        start = WithStartWorkflowOperation(  # a thread that continues as new at every turn's end (a test knob)
            WORKFLOW_TYPE, {"agent": agent.name, "thread": True, "continue_as_new_after": 20}, id=thread_id,
            task_queue=queue, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
        first = await client.execute_update_with_start_workflow(
            SEND_UPDATE, SendRequest(text=f"0 {big}"), start_workflow_operation=start, result_type=SendReceipt)
        await runs.reply(first)
        refused = None
        for n in range(1, 12):  # each turn adds ~200 KB (the message and its echo) to the conversation
            try:
                await runs.reply(await runs.send(thread_id, f"{n} {big}", agent=agent.name))
            except ThreadRefused as err:
                refused = err
                break
        assert refused is not None and refused.kind == "ThreadFull", refused
        assert "start another thread id" in str(refused) and n >= 2, n  # ~200 KB a turn, under 1 MB at first
        users = [m.content[:2] for m in (await runs.session(thread_id)).messages if m.role == "user"]
        assert users == [f"{k} " for k in range(n)]  # every message it took, once


async def _busy(runs: ReinClient, thread_id: str, agent: Any, message: str) -> Any:
    """Send `message` (a `tool:<seconds>` call) and wait until its tool runs: the thread is busy in a turn."""
    receipt = await runs.send(thread_id, message, agent=agent.name)
    await poll(lambda: _tool_started(runs, thread_id), "the tool call started")
    return receipt


async def _tool_started(runs: ReinClient, thread_id: str) -> bool:
    view = await runs.status(thread_id)
    return view.stage == "run_tools"


async def test_interrupt_cuts_the_model_call_under_way(dev, ids):
    queue, thread_id = ids
    agent = echo_agent("slow", Slow())
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        long = await runs.send(thread_id, "slow:30", agent=agent.name)
        await poll(lambda: _model_called(dev.client, thread_id), "the model call started")
        cut = await runs.send(thread_id, "stop, do this instead", agent=agent.name, mode="interrupt")
        assert cut.turn == long.turn == 1
        answer = await asyncio.wait_for(runs.reply(long), 20)  # not the 30 s the cut call would take
        assert answer.output == "heard: slow:30 | stop, do this instead"
        assert [m.role for m in answer.session.messages] == ["user", "user", "assistant"]  # nothing of the cut call
        events = [c async for c in _events(runs, thread_id)]
        assert ("cut", "interrupted by a new message") in [(c.name, (c.data or {}).get("reason")) for c in events]


async def _model_called(client, thread_id: str) -> bool:
    description = await client.get_workflow_handle(thread_id).describe()
    return any(a.activity_type.name == "rein.call_model" for a in description.raw_description.pending_activities)


async def _events(runs: ReinClient, thread_id: str):
    async for chunk in runs.stream(thread_id):
        if chunk.type == "event":
            yield chunk
        if chunk.type == "event" and chunk.name == "turn_end":
            return


async def test_interrupt_while_waiting_for_approval_denies_and_goes_on(dev, ids):
    queue, thread_id = ids
    agent = echo_agent("ask", permission="ask")
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        first = await runs.send(thread_id, "tool:5", agent=agent.name)
        waiting = await runs.reply(first)
        assert waiting.status == "interrupted" and waiting.interrupt.type == "need_approval"
        queued = await runs.send(thread_id, "queued meanwhile", agent=agent.name)
        steer = await runs.send(thread_id, "forget the tool", agent=agent.name, mode="interrupt")
        answer = await runs.reply(steer)
        assert answer.output == "heard: tool:5 | forget the tool"  # the denied call, then the message
        tool = next(m for m in answer.session.messages if m.role == "tool")
        assert "interrupted by a new message" in tool.content
        assert (await runs.reply(queued)).output == "heard: queued meanwhile"


async def test_a_long_thread_continues_as_new_at_turn_boundaries(dev, ids):
    """55 turns: one continue-as-new after turn 50, the conversation whole, duplicate ids still recognised
    in the new run, and each run's history replays."""
    from temporalio.api.enums.v1 import EventType

    from rein.core.threads import TURNS_PER_RUN

    queue, thread_id = ids
    agent = echo_agent()
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        receipts = []
        for n in range(TURNS_PER_RUN + 5):
            receipts.append(await runs.send(thread_id, f"message {n}", agent=agent.name, message_id=f"id-{n}"))
        last = await runs.reply(receipts[-1])
        assert last.output == f"heard: message {TURNS_PER_RUN + 4}"
        assert [r.turn for r in receipts] == list(range(1, TURNS_PER_RUN + 6))
        again = await runs.send(thread_id, "message 0", agent=agent.name, message_id="id-0")
        assert again.duplicate and again.turn == 1
        for n in (TURNS_PER_RUN - 10, TURNS_PER_RUN - 1):  # turns that ended before the continue-as-new
            assert (await runs.reply(receipts[n])).output == f"heard: message {n}"
        users = [m.content for m in last.session.messages if m.role == "user"]
        assert users == [f"message {n}" for n in range(TURNS_PER_RUN + 5)]
        view = await runs.thread(thread_id)
        assert (view.turns, view.status) == (TURNS_PER_RUN + 5, "idle")
        assert view.usage.total_tokens == 2 * (TURNS_PER_RUN + 5)
        histories = []
        async for execution in dev.client.list_workflows(f'WorkflowId="{thread_id}"'):
            histories.append(await dev.client.get_workflow_handle(thread_id, run_id=execution.run_id).fetch_history())
        assert len(histories) == 2, "one continue-as-new after turn 50"
        continued = [h for h in histories if h.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW]
        assert len(continued) == 1

        async def listed_idle() -> list:
            rows = [(r.thread_id, r.status) async for r in runs.threads(limit=1000) if r.thread_id == thread_id]
            return rows if rows and all(status == "idle" for _, status in rows) else []

        assert await poll(listed_idle, "the thread listed idle") == [(thread_id, "idle")]  # once, as its newest run
        [row] = [r async for r in runs.threads(limit=1000) if r.thread_id == thread_id]
        newest = await dev.client.get_workflow_handle(thread_id).describe()
        assert row.started is not None and row.started < newest.start_time  # its age is the conversation's
    from temporalio.worker import Replayer

    from rein.temporal.converter import rein_data_converter
    from rein.workflows import AgentWorkflow

    replayer = Replayer(workflows=[AgentWorkflow], data_converter=rein_data_converter())
    for history in histories:
        await replayer.replay_workflow(history)


async def test_agent_thread_and_a_chat_of_the_same_thread_in_another_process(tmp_path, monkeypatch):
    """`agent.thread(id)` on the durable engine (the embedded server); a second process's
    `agent.chat(thread_id=id)` goes on with the same conversation; `astream` streams a turn."""
    import subprocess
    import sys

    from tests.agents.threads import talker
    from tests.support.processes import ROOT

    monkeypatch.setenv("REINTEST_DIR", str(tmp_path))  # where the talker notes what it does
    thread_id = f"chat-{uuid.uuid4().hex[:8]}"
    thread = talker.thread(thread_id)
    assert (await thread.asend("first")).output == "heard: first"
    code = ("import os, tempfile; os.environ['REINTEST_DIR'] = tempfile.mkdtemp()\n"
            "from tests.agents.threads import talker\n"
            f"print(talker.chat(thread_id={thread_id!r}).send('second').output)")
    other = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                                    text=True, timeout=120)
    assert other.returncode == 0, other.stderr[-2000:]
    assert other.stdout.strip().splitlines()[-1] == "heard: second"
    pieces = [c async for c in thread.astream("slow:3")]
    assert [c.type for c in pieces][-1] == "done"
    said = "".join(c.text for c in pieces if c.type == "text")
    assert said.startswith("thinking 0") and said.endswith("heard: slow:3")
    # A steer to an idle thread opens the next turn: its stream is that turn's text, not earlier turns'.
    steered = [c async for c in thread.astream("slow:2", mode="steer")]
    assert "".join(c.text for c in steered if c.type == "text") == "thinking 0 … heard: slow:2"
    # An interrupt cuts the model call under way: the turn's reader sees `cut`, then the answer to both.
    first_text = asyncio.Event()

    async def read_turn() -> list:
        chunks = []
        async for c in thread.astream("slow:40"):
            chunks.append(c)
            if c.type == "text":
                first_text.set()
        return chunks

    reader = asyncio.ensure_future(read_turn())
    await asyncio.wait_for(first_text.wait(), 60)
    joined = [c async for c in thread.astream("stop", mode="interrupt")]
    chunks = await asyncio.wait_for(reader, 60)
    assert [c.name for c in chunks if c.type == "event"] == ["cut"]
    assert "".join(c.text for c in chunks if c.type == "text").endswith("heard: slow:40 | stop")
    assert [c.name for c in joined if c.type == "event"] == ["cut"]  # it joined the same turn
    chat = talker.chat(thread_id=thread_id)
    last = await chat.asend("fourth")
    users = [m.content for m in last.session.messages if m.role == "user"]
    assert users == ["first", "second", "slow:3", "slow:2", "slow:40", "stop", "fourth"]
    assistants = [m.content for m in last.session.messages if m.role == "assistant"]
    assert assistants[-2:] == ["heard: slow:40 | stop", "heard: fourth"]  # the cut text is not in the conversation
    assert all("heard: " in a for a in assistants if a)  # every answer whole: no partial kept
    with pytest.raises(ValueError, match="durable"):
        Agent(provider=Echo(), name="local-echo", engine="local").thread("x")


async def test_a_thread_budget_stops_the_turn_and_refuses_new_messages(dev, ids):
    queue, thread_id = ids
    agent = echo_agent(thread_max_tokens=5)
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        receipts = [await runs.send(thread_id, f"m{n}", agent=agent.name) for n in range(4)]
        answers = [await runs.reply(r) for r in receipts]
        # Each turn costs 2 tokens: turns 1-3 run (the third crosses 5), the fourth stops before its model call.
        assert [a.output for a in answers[:3]] == ["heard: m0", "heard: m1", "heard: m2"]
        assert (answers[3].stop_reason, answers[3].usage.total_tokens) == ("budget", 0)
        with pytest.raises(ThreadRefused) as refused:
            await runs.send(thread_id, "one more", agent=agent.name)
        assert refused.value.kind == "BudgetSpent" and "5 tokens" in str(refused.value)
        assert (await runs.thread(thread_id)).usage.total_tokens == 6


async def test_fork_a_thread_at_a_turn(dev, ids):
    """A fork of a thread at the last step of a turn is a thread of its own, idle, holding the conversation up to
    there; the original goes on unchanged."""
    queue, thread_id = ids
    agent = echo_agent()
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        first = await runs.reply(await runs.send(thread_id, "one", agent=agent.name))
        await runs.reply(await runs.send(thread_id, "two", agent=agent.name))
        turn_one_ends = first.steps[-1].index
        fork_id = await runs.fork(thread_id, at_step=turn_one_ends)
        view = await runs.thread(fork_id)
        assert (view.status, view.turns, view.open) == ("idle", 0, False)
        answer = await runs.reply(await runs.send(fork_id, "two, differently", agent=agent.name))
        assert answer.output == "heard: two, differently"
        assert [m.content for m in answer.session.messages if m.role == "user"] == ["one", "two, differently"]
        original = await runs.session(thread_id)
        assert [m.content for m in original.messages if m.role == "user"] == ["one", "two"]
        assert fork_id in [row.thread_id async for row in runs.threads(limit=200)]


async def test_steer_and_reject_while_a_turn_waits_for_approval(dev, ids):
    queue, thread_id = ids
    agent = echo_agent("ask", permission="ask")
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        first = await runs.send(thread_id, "tool:0.1", agent=agent.name)
        assert (await runs.reply(first)).interrupt.type == "need_approval"
        steer = await runs.send(thread_id, "also this", agent=agent.name, mode="steer")
        assert steer.turn == 1
        with pytest.raises(ThreadRefused, match="busy"):
            await runs.send(thread_id, "now!", agent=agent.name, mode="reject")
        await runs.approve(thread_id, wait=True)
        answer = await runs.reply(first)
        assert answer.output == "heard: tool:0.1 | also this"  # the approved tool ran, then the message joined
        assert [m.role for m in answer.session.messages] == ["user", "assistant", "tool", "user", "assistant"]


async def test_many_threads_at_once(dev, ids):
    queue, _ = ids
    agent = echo_agent()
    runs = ReinClient(dev.client, queue)

    async def converse(n: int) -> list[str | None]:
        thread_id = f"many-{n}-{uuid.uuid4().hex[:6]}"
        receipts = await asyncio.gather(*(runs.send(thread_id, f"t{n} m{k}", agent=agent.name, message_id=f"{k}")
                                          for k in range(3)))
        assert sorted(r.turn for r in receipts) == [1, 2, 3]
        answers = [await runs.reply(r) for r in sorted(receipts, key=lambda r: r.turn)]
        return [a.output for a in answers]

    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        outputs = await asyncio.gather(*(converse(n) for n in range(20)))
    for n, said in enumerate(outputs):
        assert sorted(said) == sorted(f"heard: t{n} m{k}" for k in range(3))


async def test_rewind_a_thread_to_a_turn(dev, ids):
    """`rewind` resets the thread in place to just after a turn's last step: later turns are gone (their
    messages too), and the next message is the next turn of the shorter conversation."""
    queue, thread_id = ids
    agent = echo_agent()
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        first = await runs.reply(await runs.send(thread_id, "one", agent=agent.name))
        await runs.reply(await runs.send(thread_id, "two", agent=agent.name))
        await runs.rewind(thread_id, to_step=first.steps[-1].index)
        answer = await runs.reply(await runs.send(thread_id, "three", agent=agent.name))
        assert answer.output == "heard: three"
        assert [m.content for m in answer.session.messages if m.role == "user"] == ["one", "three"]
        assert (await runs.thread(thread_id)).turns == 2


async def test_the_stored_thread_history_replays():
    """A thread's recorded history (tests/histories/make_histories.py thread) replays on this build: its turns,
    the queued message, and the cancel that closed it. A change of a thread's command order must be patched."""
    from pathlib import Path

    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from rein.temporal.converter import rein_data_converter
    from rein.workflows import AgentWorkflow

    path = Path(__file__).parent / "histories" / "agent_thread_v1.json"
    history = WorkflowHistory.from_json("agent-thread", path.read_text())
    scheduled = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert len(scheduled) == 3  # the three turns' model calls
    await Replayer(workflows=[AgentWorkflow], data_converter=rein_data_converter()).replay_workflow(history)


async def test_the_stored_history_of_a_thread_started_by_stock_tools_replays():
    """A thread started without the rein.thread memo (tests/histories/make_histories.py thread_stock) recorded the
    patch rein-thread-memo and its memo upsert at its first turn: this build replays it."""
    from pathlib import Path

    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from rein.temporal.converter import rein_data_converter
    from rein.workflows import AgentWorkflow

    path = Path(__file__).parent / "histories" / "agent_thread_stock_v1.json"
    history = WorkflowHistory.from_json("agent-thread-stock", path.read_text())
    kinds = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED in kinds  # the memo upsert
    assert kinds.count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == 2  # two turns' model calls
    await Replayer(workflows=[AgentWorkflow], data_converter=rein_data_converter()).replay_workflow(history)


async def test_garbage_sent_to_a_thread_is_refused_or_ignored_and_fails_no_workflow_task(dev, ids):
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowUpdateFailedError

    queue, thread_id = ids
    agent = echo_agent()
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        await runs.reply(await runs.send(thread_id, "hi", agent=agent.name))
        handle = dev.client.get_workflow_handle(thread_id)
        bad = [[], {"text": ""}, {"text": "x" * 200_000}, {"text": "a", "mode": "yell"}, "garbage", {"text": 5}]
        for payload in bad:
            await handle.signal("rein.send", payload)  # for tools that only signal: recorded and ignored
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.execute_update("rein.send", payload)
        await handle.signal("rein.send", {"text": "still here"})  # a good one through the signal: the next turn
        answer = await runs.reply(SendReceipt(thread_id=thread_id, message_id="", mode="queue", turn=2))
        assert answer.output == "heard: still here"
        history = await handle.fetch_history()
        assert not [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
        assert (await runs.status(thread_id)).ignored_signals == len(bad)
        assert (await runs.thread(thread_id)).turns == 2

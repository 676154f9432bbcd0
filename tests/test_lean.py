"""Unbounded, lean runs: references instead of content in model calls, large payloads offloaded,
continue-as-new while waiting, a slim result, and history bytes per iteration at a raw floor.

Runs use a real Temporal dev server (rein.testing.start_local), which enforces the 2 MB
payload limit, and the payload store under the temporary REIN_HOME set in conftest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.converter import ExternalStorage
from temporalio.worker import Worker

import rein
from rein import Agent, Completion, LoopConfig, Message, ToolCall, Usage
from rein.client import ReinClient
from rein.core.contract import WaitRequest, recorded_reply
from rein.temporal.converter import rein_data_converter
from rein.temporal.storage import FileStorageDriver, rein_home
from rein.testing import full_result
from tests.support.history import decode_payload, scheduled
from tests.support.waiting import wait_status

FREE = LoopConfig(detect_loops=False, max_iterations=10_000, max_tokens=None, timeout_s=None)


class Scripted:
    """Stateless model: calls `tool` (with `calls` calls per batch) `rounds` times, then reports what it saw."""

    def __init__(self, rounds: int, tool: str = "make", calls: int = 1, args: dict | None = None):
        self.rounds, self.tool, self.calls, self.args = rounds, tool, calls, args or {}
        self.seen: list[list[Message]] = []

    async def complete(self, messages, tools=None, **kw):  # noqa: ANN001, ANN201
        self.seen.append(list(messages))
        results = [m for m in messages if m.role == "tool"]
        done = len(results) // self.calls
        if done < self.rounds:
            batch = [
                ToolCall(id=f"c{done}-{k}", name=self.tool, arguments={**self.args, "n": done}) for k in range(self.calls)
            ]
            return Completion(message=Message(role="assistant", tool_calls=batch), finish_reason="tool_calls",
                              usage=Usage(input_tokens=1, output_tokens=1))
        sizes = ",".join(str(len(m.content or "")) for m in results)
        last = results[-1].content[:40] if results else ""
        return Completion(message=Message(role="assistant", content=f"sizes {sizes} last {last}"), finish_reason="stop",
                          usage=Usage(input_tokens=1, output_tokens=1))

    async def stream(self, messages, tools=None, **kw):  # pragma: no cover - not used
        yield


def ids() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"lean-{suffix}", f"lean-wf-{suffix}"


def history_bytes(history: Any) -> int:
    return sum(e.ByteSize() for e in history.events)


def event_types(history: Any) -> list[int]:
    return [e.event_type for e in history.events]


# --------------------------------------------------------------------------- the conversation cache


async def test_reused_workflow_id_never_sees_the_previous_runs_conversation(dev):
    tq, wf_id = ids()
    model = Scripted(1, tool="risky")

    def risky(n: int) -> str:
        """A tool that needs approval."""
        return "ran"

    agent = Agent(provider=model, tools=[risky], name="reuse", config=LoopConfig(permission="ask"))
    client = ReinClient(dev.client, tq)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        await client.start("reuse", "alpha", run_id=wf_id, stream=False)
        first = await client.wait(wf_id)
        assert first.interrupt is not None and first.interrupt.type == "need_approval"
        await client.cancel(wf_id, "done with alpha", wait=True)
        await client.result(wf_id)
        # Same workflow id, a conversation of the same shape: the worker still holds alpha's.
        await client.start("reuse", "beta", run_id=wf_id, stream=False)
        await client.wait(wf_id)
        await client.cancel(wf_id, wait=True)
    users = [[m.content for m in seen if m.role == "user"] for seen in model.seen]
    assert users == [["alpha"], ["beta"]]


class Wordy(Scripted):
    """Scripted, with replies that cost 150,000 tokens each."""

    async def complete(self, messages, tools=None, **kw):  # noqa: ANN001, ANN201
        completion = await super().complete(messages, tools, **kw)
        return completion.model_copy(update={"usage": Usage(input_tokens=100_000, output_tokens=50_000)})


@pytest.mark.parametrize("start", [{}, {"session": {"messages": []}}], ids=["lean", "asked-first"])
async def test_a_run_keeps_the_limits_its_agent_turned_off(dev, start):
    """An agent without a token limit runs past the default's 200,000 tokens however its run started."""
    tq, wf_id = ids()

    def make(n: int) -> str:
        """A result."""
        return str(n)

    agent = Agent(provider=Wordy(2), tools=[make], name="wordy", config=FREE)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await dev.client.start_workflow("AgentWorkflow", {"agent": "wordy", "prompt": "go", **start}, id=wf_id,
                                                 task_queue=tq)
        outcome = await handle.result()
    assert (outcome["stop_reason"], outcome["usage"]["input_tokens"]) == ("done", 300_000)


async def test_reset_run_never_sees_the_pre_reset_tool_result(dev):
    tq, wf_id = ids()
    made: list[str] = []

    def fetch(n: int) -> str:
        """Different on every execution."""
        made.append(f"version {len(made) + 1}")
        return made[-1]

    class AskAfterFetch(Scripted):
        async def complete(self, messages, tools=None, **kw):  # noqa: ANN001, ANN201
            self.seen.append(list(messages))
            tools_done = [m for m in messages if m.role == "tool"]
            if not tools_done:
                call = ToolCall(id="f1", name="fetch", arguments={"n": 1})
            elif len(tools_done) == 1:
                call = ToolCall(id="q1", name="ask_human", arguments={"question": "go on?"})
            else:
                return Completion(message=Message(role="assistant", content=f"fetched {tools_done[0].content}"), finish_reason="stop")
            return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls")

    model = AskAfterFetch(0)
    agent = Agent(provider=model, tools=[fetch, rein.ask_human], name="resettable")
    client = ReinClient(dev.client, tq)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await client.start("resettable", "go", run_id=wf_id, stream=False)
        paused = await client.wait(wf_id)
        assert paused.interrupt is not None and paused.interrupt.type == "need_input"
        history = await handle.fetch_history()
        # Back to the workflow task that received the first model reply: `fetch` runs again.
        model_done = next(
            i for i, e in enumerate(history.events) if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        )
        task_done = next(
            e.event_id
            for e in history.events[model_done:]
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        )
        reset = await dev.client.workflow_service.reset_workflow_execution(
            ResetWorkflowExecutionRequest(
                namespace=dev.client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=wf_id, run_id=handle.result_run_id),
                reason="test",
                workflow_task_finish_event_id=task_done,
                request_id=str(uuid.uuid4()),
            )
        )
        reset_handle = dev.client.get_workflow_handle(wf_id, run_id=reset.run_id)
        for _ in range(300):
            if (await reset_handle.query("status"))["status"] == "waiting_input":
                break
            await asyncio.sleep(0.05)
        await reset_handle.signal("answer", {"text": "yes"})
        result = await client.result(wf_id)
    assert made == ["version 1", "version 2"]
    assert result.output == "fetched version 2"
    # The model call after the reset saw the re-executed result, never the pre-reset one.
    second_calls = [seen for seen in model.seen if sum(m.role == "tool" for m in seen) == 1]
    assert [[m.content for m in seen if m.role == "tool"] for seen in second_calls] == [["version 1"], ["version 2"]]


async def test_a_tool_call_sent_by_reference_runs_on_a_worker_that_never_saw_it(dev):
    """The model's second reply came from worker A; A goes away while its call waits for approval, and
    worker B (an empty cache) reads the call back from the workflow: the right tool, the right
    arguments, once. (A lean start's first reply sends its calls whole: rein.workflows.start.)"""
    tq, wf_id = ids()
    ran: list[tuple[str, int]] = []

    def risky(tag: str, n: int) -> str:
        """A tool that needs approval."""
        ran.append((tag, n))
        return f"ran {tag}"

    def other(tag: str, n: int) -> str:
        """Never called."""
        ran.append(("other", n))
        return "wrong"

    model = Scripted(2, tool="risky", args={"tag": "alpha"})
    agent = Agent(provider=model, tools=[risky, other], name="handover", config=LoopConfig(permission="ask"))
    client = ReinClient(dev.client, tq)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await client.start("handover", "go", run_id=wf_id, stream=False)
        raw = dev.client.get_workflow_handle(wf_id)
        for call_id in ("c0-0", "c1-0"):
            await wait_status(raw, "waiting_approval", until=lambda s, c=call_id: [p["id"] for p in s["pending_tool_calls"]] == [c])
            if call_id == "c0-0":
                await client.approve(wf_id, wait=True)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        await client.approve(wf_id, wait=True)
        result = await client.result(wf_id)
        history = await dev.client.get_workflow_handle(wf_id).fetch_history()
    assert ran == [("alpha", 0), ("alpha", 1)]
    assert result.output.endswith("last ran alpha")
    first, second = [await decode_payload(e.activity_task_scheduled_event_attributes.input.payloads[0], dev.client.data_converter)
                     for e in scheduled(history.events, "rein.run_tool")]
    assert set(first) == {"agent", "call", "version"}, first  # the first reply's call, whole
    assert set(second) == {"agent", "ref"}, second
    assert handle is not None


async def test_a_reused_workflow_id_never_runs_the_previous_runs_tool_call(dev):
    tq, wf_id = ids()
    ran: list[str] = []

    def risky(tag: str, n: int) -> str:
        """A tool that needs approval."""
        ran.append(tag)
        return tag

    class Tagged(Scripted):
        async def complete(self, messages, tools=None, **kw):  # noqa: ANN001, ANN201
            self.args = {"tag": next(m.content for m in messages if m.role == "user")}
            return await super().complete(messages, tools, **kw)

    agent = Agent(provider=Tagged(1, tool="risky"), tools=[risky], name="reuse-call", config=LoopConfig(permission="ask"))
    client = ReinClient(dev.client, tq)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        await client.start("reuse-call", "alpha", run_id=wf_id, stream=False)
        await client.wait(wf_id)
        await client.cancel(wf_id, "done with alpha", wait=True)
        await client.result(wf_id)
        # Same workflow id, a call with the same id and name: the worker still holds alpha's.
        await client.start("reuse-call", "beta", run_id=wf_id, stream=False)
        await client.wait(wf_id)
        await client.approve(wf_id, wait=True)
        result = await client.result(wf_id)
    assert ran == ["beta"]
    assert result.output.endswith("last beta")



async def test_a_reference_no_reply_of_the_run_holds_fails_without_running_anything(dev):
    """A worker that does not hold the referenced call reads it from the run's history; when no model
    reply there holds it, the activity fails for good (UnknownToolCall) and runs no tool. The same
    lookup with the run's real reference finds the call and runs it."""
    from temporalio.exceptions import ApplicationError
    from temporalio.testing import ActivityEnvironment

    from rein.activities.agents import AgentActivities
    from rein.core.contract import ToolCallInput

    tq, wf_id = ids()
    ran: list[dict] = []

    def make(tag: str, n: int) -> str:
        """Records its arguments."""
        ran.append({"tag": tag, "n": n})
        return f"made {tag}"

    agent = Agent(provider=Scripted(2, args={"tag": "alpha"}), tools=[make], name="lookup", config=FREE)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await ReinClient(dev.client, tq).start("lookup", "go", run_id=wf_id, stream=False)
        await handle.result()
    history = await dev.client.get_workflow_handle(wf_id).fetch_history()
    _, tool_input = [await decode_payload(e.activity_task_scheduled_event_attributes.input.payloads[0], dev.client.data_converter)
                     for e in scheduled(history.events, "rein.run_tool")]  # the second reply's call, by reference
    ran.clear()

    env = ActivityEnvironment(client=dev.client)
    env.info = dataclasses.replace(env.info, workflow_id=wf_id, workflow_run_id=handle.result_run_id,
                                   workflow_namespace=dev.client.namespace)
    fresh = AgentActivities({"lookup": agent})  # an empty cache: another worker's view
    with pytest.raises(ApplicationError) as failed:
        await env.run(fresh.run_tool, ToolCallInput(agent="lookup", ref="0" * len(tool_input["ref"])))
    assert failed.value.type == "UnknownToolCall" and failed.value.non_retryable
    assert ran == []
    assert await env.run(fresh.run_tool, ToolCallInput(agent="lookup", ref=tool_input["ref"])) == "made alpha"
    assert ran == [{"tag": "alpha", "n": 1}]

def test_a_tool_call_input_takes_the_whole_call_or_a_reference():
    from pydantic import ValidationError

    from rein.core.contract import ToolCallInput

    old = ToolCallInput.model_validate({"agent": "a", "call": {"id": "c1", "name": "t", "arguments": {"x": 1}}})
    assert old.call == ToolCall(id="c1", name="t", arguments={"x": 1}) and old.ref == ""
    assert ToolCallInput(agent="a", ref="0123abcd").model_dump(mode="json") == {"agent": "a", "ref": "0123abcd"}
    with pytest.raises(ValidationError, match="`call` or `ref`"):
        ToolCallInput.model_validate({"agent": "a"})


async def test_the_worker_continues_its_conversation_from_a_count_or_references_in_either_form():
    """No workflow here: every form below is served from the cache (a miss would query one)."""
    from rein.activities.agents import Conversations
    from rein.core.contract import ModelCallInput
    from rein.core.digest import conversation_digest, message_hash, ref

    start = [Message(role="system", content="s"), Message(role="user", content="go")]
    calls = [ToolCall(id="a", name="t", arguments={"x": 1}), ToolCall(id="b", name="t", arguments={"x": 2})]
    reply = Message(role="assistant", tool_calls=calls)
    results = [Message(role="tool", tool_call_id=c.id, content=f"r{c.id}") for c in calls]
    whole = [*start, reply, *results]

    async def fresh() -> Conversations:
        cache = Conversations()
        first = ModelCallInput(agent="x", new_messages=start, digest=conversation_digest(start), run_id="wf")
        await cache.messages_for(first)
        cache.produced("wf", reply)
        for result in reversed(results):  # parallel calls finish in any order
            cache.produced("wf", result)
        return cache

    # Today's form: a count, no position; the results come in call order.
    cache = await fresh()
    counted = ModelCallInput(agent="x", produced=3, digest=conversation_digest(whole), run_id="wf")
    assert await cache.messages_for(counted) == whole
    # The form older workflow code sent: a position and a reference each.
    cache = await fresh()
    refs = [ref(message_hash(m)) for m in (reply, *results)]
    old = ModelCallInput.model_validate(
        {"agent": "x", "new_messages": refs, "first_index": 2, "digest": conversation_digest(whole), "run_id": "wf"}
    )
    assert await cache.messages_for(old) == whole
    assert cache.rebuilds == 0


async def test_model_calls_carry_references_to_what_the_worker_produced(dev):
    tq, wf_id = ids()
    pad = "p" * 1024

    def make(n: int) -> str:
        """1 KB of output."""
        return f"{n}:{pad}"

    agent = Agent(provider=Scripted(5), tools=[make], name="refs", config=FREE)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await dev.client.start_workflow("AgentWorkflow", {"agent": "refs", "prompt": "go"}, id=wf_id, task_queue=tq)
        result = await full_result(handle)
        history = await handle.fetch_history()
    assert result["output"].startswith("sizes " + ",".join(["1026"] * 5))
    inputs = [await decode_payload(e.activity_task_scheduled_event_attributes.input.payloads[0], dev.client.data_converter)
              for e in scheduled(history.events, "rein.call_model")]
    assert len(inputs) == 6
    assert all(pad not in str(i) for i in inputs), "tool output sent back to the worker"
    assert [m["role"] for m in inputs[0]["new_messages"]] == ["user"]  # the worker adds the system prompt
    assert all(None not in m.values() for m in inputs[0]["new_messages"]), inputs[0]  # no unset fields
    # After the first call: the worker's reply and its tool result, as a count, where the digest says.
    assert all(set(i) == {"agent", "produced", "digest", "version"} and i["produced"] == 2 for i in inputs[1:]), inputs[1]
    # What the activities recorded is only what the workflow cannot restore: no nulls, no
    # defaults, a plain tool result as its bare content.
    completed = {e.activity_task_completed_event_attributes.scheduled_event_id: e for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED}
    recorded = {
        e.activity_task_scheduled_event_attributes.activity_type.name + f"#{e.event_id}": await decode_payload(
            completed[e.event_id].activity_task_completed_event_attributes.result.payloads[0], dev.client.data_converter)
        for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    replies = [recorded_reply(v) for k, v in recorded.items() if k.startswith("rein.call_model")]
    tool_results = [v for k, v in recorded.items() if k.startswith("rein.run_tool")]
    assert len(replies) == 6 and len(tool_results) == 5
    assert all(set(r) == {"tool_calls", "usage"} for r in replies[:5]), replies[0]
    assert "null" not in str(replies) and "None" not in str(replies)
    assert all(isinstance(t, str) and t.endswith(pad) for t in tool_results), tool_results[0][:80]


@pytest.mark.parametrize("completion", [
    Completion(message=Message(role="assistant", tool_calls=[ToolCall(id="c1", name="make", arguments={"n": 1})]),
               finish_reason="tool_calls", usage=Usage(input_tokens=3, output_tokens=2)),
    Completion(message=Message(role="assistant", content="done"), finish_reason="stop"),
    Completion(message=Message(role="assistant", content="cut", tool_calls=[ToolCall(id="c", name="t", arguments={})]),
               finish_reason="length", usage=Usage(input_tokens=1, output_tokens=1, cost_usd=0.5), model="b/model"),
    Completion(message=Message(role="assistant", content=""), finish_reason="error"),
])
def test_a_recorded_model_reply_restores_exactly(completion):
    from rein.activities.agents import wire

    assert "message" not in wire(completion)
    assert Completion.model_validate(wire(completion)) == completion
    # The form recorded before the reply's fields moved to the top level still reads.
    nested = completion.model_dump(mode="json", exclude_defaults=True)
    nested["message"].pop("role", None)
    assert Completion.model_validate(nested) == completion


def test_a_recorded_tool_result_is_its_content_unless_it_is_an_error():
    from rein.activities.agents import wire
    from rein.core.ir import ToolResult

    assert wire(ToolResult(tool_call_id="c1", content="42")) == "42"
    failed = ToolResult(tool_call_id="c1", content="boom", is_error=True)
    assert ToolResult.model_validate(wire(failed)) == failed


# --------------------------------------------------------------------------- large payloads


async def test_large_tool_results_complete(dev):
    tq, wf_id = ids()
    runs: list[int] = []

    def big(n: int, size: int) -> str:
        """A large output."""
        runs.append(size)
        return "x" * size

    five = Scripted(1, tool="big", args={"size": 5_000_000})
    pair = Scripted(1, tool="big", calls=2, args={"size": 1_200_000})
    agents = [
        Agent(provider=five, tools=[big], name="big-one", config=FREE),
        Agent(provider=pair, tools=[big], name="big-pair", config=FREE),
    ]
    async with rein.create_worker(dev.client, agents=agents, task_queue=tq):
        one = await dev.client.start_workflow("AgentWorkflow", {"agent": "big-one", "prompt": "go"}, id=wf_id, task_queue=tq)
        two = await dev.client.start_workflow("AgentWorkflow", {"agent": "big-pair", "prompt": "go"}, id=wf_id + "-2", task_queue=tq)
        first, second = await one.result(), await two.result()
        histories = [await one.fetch_history(), await two.fetch_history()]
    assert first["output"].startswith("sizes 5000000 ")
    assert second["output"].startswith("sizes 1200000,1200000 ")
    assert sorted(runs) == [1_200_000, 1_200_000, 5_000_000], "each large result produced once"
    assert len(five.seen[-1][-1].content) == 5_000_000
    for history in histories:
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in event_types(history)
        assert history_bytes(history) < 100_000, "large payloads are stored outside the history"
    assert any((rein_home() / "payloads").rglob("*")), "payloads went to the store under REIN_HOME"


async def test_a_payload_that_cannot_be_stored_fails_the_run_clearly(dev):
    tq, wf_id = ids()
    runs: list[int] = []

    def huge(n: int) -> str:
        """Larger than the store accepts."""
        runs.append(n)
        return "y" * 1_500_000

    small_store = ExternalStorage(
        drivers=[FileStorageDriver(rein_home() / "small", max_payload_size=1_000_000)], payload_size_threshold=100_000
    )
    converter = dataclasses.replace(rein_data_converter(), external_storage=small_store)
    client = Client(**{**dev.client.config(), "data_converter": converter})
    agent = Agent(provider=Scripted(1, tool="huge"), tools=[huge], name="huge", config=FREE)
    async with rein.create_worker(client, agents=[agent], task_queue=tq):
        handle = await client.start_workflow("AgentWorkflow", {"agent": "huge", "prompt": "go"}, id=wf_id, task_queue=tq)
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        status = await handle.query("status")
        history = await handle.fetch_history()
    assert runs == [0], "a too-large result is not retried"
    cause = failure.value.cause
    assert cause.type == "PayloadTooLarge" and cause.non_retryable
    assert "huge" in cause.message and "1000000" in cause.message
    assert status["status"] == "failed"
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in event_types(history)
    described = await handle.describe()
    assert described.typed_search_attributes.get(rein_status_key()) == "failed"


def rein_status_key():  # noqa: ANN201
    from temporalio.common import SearchAttributeKey

    return SearchAttributeKey.for_keyword("ReinStatus")


# --------------------------------------------------------------------------- continue-as-new


async def test_run_continues_as_new_while_waiting_and_across_approvals(dev):
    tq, wf_id = ids()

    def step(n: int) -> int:
        """Needs approval."""
        return n + 1

    agent = Agent(provider=Scripted(3, tool="step"), tools=[step], name="patient", config=LoopConfig(permission="ask", detect_loops=False))
    client = ReinClient(dev.client, tq)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": "patient", "prompt": "go", "continue_as_new_after": 20}, id=wf_id, task_queue=tq
        )
        first_run = handle.result_run_id
        paused = await client.wait(wf_id)
        assert paused.interrupt is not None and paused.interrupt.type == "need_approval"
        # Ignored signals grow the history while the run waits: it continues as new, still waiting.
        for _ in range(25):  # more than continue_as_new_after=20 signals in one run
            await handle.signal("answer", {"text": "not a question"})
        for _ in range(300):  # the successor's first task re-derives the approval wait
            waiting = await client.status(wf_id)
            if (await client.handle(wf_id).describe()).run_id != first_run and waiting.status == "waiting_approval":
                break
            await asyncio.sleep(0.05)
        assert (await client.handle(wf_id).describe()).run_id != first_run
        assert waiting.status == "waiting_approval" and waiting.pause == 1
        assert [c.id for c in waiting.pending_tool_calls] == ["c0-0"]
        pauses = 1
        while True:
            await client.approve(wf_id, approver="ops", wait=True)
            result = await asyncio.wait_for(client.wait(wf_id, WaitRequest(after_pause=pauses)), 60)
            if result.status == "done":
                break
            pauses += 1
        final = await client.status(wf_id)
        runs, run = [], None
        while True:  # walk the chain back from the latest run
            status = await client.handle(wf_id, run).query("status")
            runs.append(run)
            run = status["continued_from"]
            if run is None:
                break
    assert result.output.startswith("sizes 1,1,1 last 3")
    assert [d.approver for d in result.session.decisions] == ["ops"] * 3
    assert [s.kind for s in result.steps] == ["model", "tool"] * 3 + ["model"]
    assert final.ignored_signals == 25
    assert len(runs) >= 3, "continued as new while waiting, and again later"


# --------------------------------------------------------------------------- history at the floor


@activity.defn(name="lean.floor_model")
async def floor_model(request: dict) -> dict:
    return {"text": "done"} if request["i"] >= request["n"] else {"tool": "make", "n": request["i"]}


@activity.defn(name="lean.floor_tool")
async def floor_tool(request: dict) -> str:
    return f"{request['n']}:" + "p" * 1024


@workflow.defn(name="LeanFloor", sandboxed=False)
class LeanFloor:
    """Two plain activities per iteration, the same 1 KB tool output: Temporal's own floor."""

    @workflow.run
    async def run(self, n: int) -> str:
        i = 0
        while True:
            call = await workflow.execute_activity(floor_model, {"i": i, "n": n}, start_to_close_timeout=timedelta(seconds=30))
            if "text" in call:
                return call["text"]
            await workflow.execute_activity(floor_tool, call, start_to_close_timeout=timedelta(seconds=30))
            i += 1


async def test_history_bytes_per_iteration_stay_flat_and_near_a_raw_floor(dev):
    tq, wf_id = ids()
    pad = "p" * 1024

    def make(n: int) -> str:
        """1 KB of output."""
        return f"{n}:{pad}"

    agents = [Agent(provider=Scripted(n), tools=[make], name=f"flat-{n}", config=FREE) for n in (1, 100)]
    async with rein.create_worker(dev.client, agents=agents, task_queue=tq):
        async with Worker(dev.client, task_queue=tq + "-raw", workflows=[LeanFloor], activities=[floor_model, floor_tool]):
            sizes, floors = {}, {}

            async def rein_run(n: int) -> None:
                handle = await dev.client.start_workflow(
                    "AgentWorkflow", {"agent": f"flat-{n}", "prompt": "go"}, id=f"{wf_id}-{n}", task_queue=tq
                )
                assert (await handle.result())["iterations"] == n + 1  # n tool rounds, then the answer
                sizes[n] = history_bytes(await handle.fetch_history())

            async def raw_run(n: int) -> None:
                raw = await dev.client.start_workflow(LeanFloor.run, n, id=f"{wf_id}-raw-{n}", task_queue=tq + "-raw")
                await raw.result()
                floors[n] = history_bytes(await raw.fetch_history())

            # All at once: each run waits on round trips more than on the CPU; the sizes are the same run one by one.
            await asyncio.gather(*(run(n) for n in (1, 100) for run in (rein_run, raw_run)))
    per_iteration = (sizes[100] - sizes[1]) / 99
    floor_per_iteration = (floors[100] - floors[1]) / 99
    # 1.17x here, 1.18x in bench/lean.py (bytes do not depend on load): what rein adds per
    # iteration is its summaries and references, not conversation content (recording the
    # activities' results with their defaults and wrappers was 1.24x).
    assert floor_per_iteration > 1024, floors
    assert per_iteration <= 1.2 * floor_per_iteration, (per_iteration, floor_per_iteration)
    assert sizes[100] / 100 <= sizes[1] * 1.2, sizes


# --------------------------------------------------------------------------- local tools


async def test_local_tool_runs_as_a_local_activity(dev):
    tq, wf_id = ids()

    @rein.tool(local=True)
    def quick(n: int) -> str:
        """Cheap."""
        return f"quick {n}"

    agent = Agent(provider=Scripted(2, tool="quick"), tools=[quick], name="quick", config=FREE)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await dev.client.start_workflow("AgentWorkflow", {"agent": "quick", "prompt": "go"}, id=wf_id, task_queue=tq)
        result = await full_result(handle)
        history = await handle.fetch_history()
    assert result["output"] == "sizes 7,7 last quick 1"
    names = [e.activity_task_scheduled_event_attributes.activity_type.name for e in scheduled(history.events)]
    assert "rein.run_tool" not in names and names.count("rein.call_model") == 3
    local = [
        e for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]
    assert len(local) == 2  # the two tool calls (a lean start describes the agent with its first model call)

"""AgentWorkflow against Temporal's time-skipping test server (rein.testing.start_time_skipping).

Runs are started the way ops start them: the raw contract (`"AgentWorkflow"`, a
plain dict input) and plain signals, with rein's converter and, once, with
temporalio's default JSON converter. Each test gets its own task queue and
workflow id; one test server serves the whole module.
"""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import temporalio.converter
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.worker import Replayer

import rein
from rein import Agent, LoopConfig, MockProvider, Session, Step, ToolContext
from rein.testing import full_result
from rein.workflows import AgentWorkflow
from tests.support.history import assert_no_task_failures, history_events, scheduled, summaries
from tests.support.providers import OutageProvider, RecordingProvider, Unavailable
from tests.support.results import tool_messages
from tests.support.tools import add, tc
from tests.support.waiting import poll, wait_status

HISTORIES = Path(__file__).parent / "histories"
STATUS_KEYS = {"status", "stage", "iteration", "usage", "interrupt", "pending_tool_calls", "stop_reason"}


# --------------------------------------------------------------------------- fixtures and helpers


async def start(env, agent: str, prompt: str, wf_id: str, tq: str, client: Client | None = None, **extra: Any):
    client = client or env.client
    return await client.start_workflow(
        "AgentWorkflow", {"agent": agent, "prompt": prompt, **extra}, id=wf_id, task_queue=tq
    )


# --------------------------------------------------------------------------- approvals


async def test_approve_whole_batch_with_default_json_converter(env, ids):
    """A client with temporalio's default converter (plain JSON) starts, signals and reads the result."""
    tq, wf_id = ids
    ran: list[tuple[int, int]] = []

    def add_logged(a: int, b: int) -> int:
        ran.append((a, b))
        return a + b

    agent = Agent(
        provider=MockProvider([[tc("add_logged", "c1", a=1, b=2), tc("add_logged", "c2", a=3, b=4)], "sum done"]),
        tools=[add_logged],
        name="batch",
        config=LoopConfig(permission="ask"),
    )
    plain = Client(**{**env.client.config(), "data_converter": temporalio.converter.DataConverter.default})
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "batch", "add things", wf_id, tq, client=plain)
        status = await wait_status(handle, "waiting_approval")
        assert [c["id"] for c in status["pending_tool_calls"]] == ["c1", "c2"]
        assert status["interrupt"]["type"] == "need_approval"
        assert ran == []  # nothing runs before the approval

        await handle.signal("approve", {"approver": "alice", "reason": "looks fine"})
        result = await full_result(handle)

    assert isinstance(result, dict)
    assert result["status"] == "done" and result["stop_reason"] == "done"
    assert result["output"] == "sum done"
    assert sorted(ran) == [(1, 2), (3, 4)]
    assert tool_messages(result) == {"c1": "3", "c2": "7"}
    decisions = result["session"]["decisions"]
    assert [(d["tool_call_id"], d["approved"], d["approver"], d["reason"]) for d in decisions] == [
        ("c1", True, "alice", "looks fine"),
        ("c2", True, "alice", "looks fine"),
    ]
    assert_no_task_failures(await history_events(handle))


async def test_approve_one_then_deny_the_other(env, ids):
    tq, wf_id = ids
    ran: list[str] = []

    def write_file(path: str) -> str:
        ran.append(path)
        return f"wrote {path}"

    agent = Agent(
        provider=MockProvider([[tc("write_file", "c1", path="a.txt"), tc("write_file", "c2", path="b.txt")], "ok"]),
        tools=[write_file],
        name="mixed",
        config=LoopConfig(permission="ask"),
    )
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "mixed", "write two files", wf_id, tq)
        first = await wait_status(handle, "waiting_approval")
        assert first["pause"] == 1

        await handle.signal("approve", {"tool_call_id": "c1", "approver": "alice", "reason": "harmless"})
        # The run asks again, now only for the undecided call.
        second = await wait_status(handle, "waiting_approval", until=lambda s: s["pause"] == 2)
        assert second["interrupt"]["tool_call"]["id"] == "c2"
        assert "write_file" in second["interrupt"]["message"]
        assert ran == []  # the batch runs only once it is fully decided

        await handle.signal("deny", {"tool_call_id": "c2", "approver": "bob", "reason": "b.txt is protected"})
        result = await full_result(handle)
        final = await handle.query("status")  # queries need a worker, even after the run ended

    assert ran == ["a.txt"]
    messages = tool_messages(result)
    assert messages["c1"] == "wrote a.txt"
    assert "Denied by bob" in messages["c2"] and "b.txt is protected" in messages["c2"]
    tool_steps = [s for s in result["steps"] if s["kind"] == "tool"]
    assert [s["is_error"] for s in tool_steps] == [False, True]
    decisions = [(d["tool_call_id"], d["approved"], d["approver"], d["reason"]) for d in result["session"]["decisions"]]
    assert decisions == [("c1", True, "alice", "harmless"), ("c2", False, "bob", "b.txt is protected")]
    assert final["ignored_signals"] == 0
    assert_no_task_failures(await history_events(handle))


async def test_deny_feeds_the_denial_to_the_model(env, ids):
    tq, wf_id = ids
    provider = RecordingProvider([[tc("add", "c1", a=1, b=2)], "understood"])
    agent = Agent(provider=provider, tools=[add], name="denied", config=LoopConfig(permission="ask"))
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "denied", "add", wf_id, tq)
        await wait_status(handle, "waiting_approval")
        await handle.signal("deny", {"approver": "ops", "reason": "not today"})
        result = await full_result(handle)

    assert result["output"] == "understood"
    assert len(provider.seen) == 2
    last_seen = provider.seen[1][-1]
    assert last_seen.role == "tool" and last_seen.tool_call_id == "c1"
    assert "Denied by ops" in last_seen.content and "not today" in last_seen.content
    assert result["session"]["decisions"][0]["approved"] is False


async def test_answer_becomes_the_ask_human_result(env, ids):
    tq, wf_id = ids
    provider = RecordingProvider([[tc("ask_human", "q1", question="Which colour?")], "blue it is"])
    agent = Agent(provider=provider, tools=[rein.ask_human, add], name="asker", config=LoopConfig(permission="ask"))
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "asker", "paint it", wf_id, tq)
        status = await wait_status(handle, "waiting_input")
        assert status["interrupt"]["type"] == "need_input"
        assert status["interrupt"]["message"] == "Which colour?"
        await handle.signal("answer", {"text": "blue, please", "approver": "carol"})
        result = await full_result(handle)

    assert tool_messages(result) == {"q1": "blue, please"}
    assert provider.seen[1][-1].content == "blue, please"
    (decision,) = result["session"]["decisions"]
    assert decision["answer"] == "blue, please" and decision["approver"] == "carol"
    # ask_human is never executed as an activity
    assert scheduled(await history_events(handle), "rein.run_tool") == []


async def test_cancel_while_waiting(env, ids):
    tq, wf_id = ids
    ran: list[int] = []

    def touch(n: int) -> int:
        ran.append(n)
        return n

    agent = Agent(
        provider=MockProvider([[tc("touch", "c1", n=1)], "never"]),
        tools=[touch],
        name="cancelled",
        config=LoopConfig(permission="ask"),
    )
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "cancelled", "touch", wf_id, tq)
        await wait_status(handle, "waiting_approval")
        await handle.signal("cancel", {"reason": "changed my mind"})
        result = await full_result(handle)
        final = await handle.query("status")

    assert result["stop_reason"] == "cancelled"
    assert ran == []
    assert result["output"] is None
    assert final["status"] == "cancelled"


async def test_cancel_with_malformed_payload_is_counted_consistently(env, ids):
    """A `cancel` whose payload has the wrong shape (a string, not an object) is recorded and
    ignored (DESIGN: wrong shape => recorded and ignored): the run keeps waiting, counts it, and
    finishes normally once approved."""
    tq, wf_id = ids
    agent = Agent(
        provider=MockProvider([[tc("add", "c1", a=1, b=1)], "two"]),
        tools=[add],
        name="cancel-garbage",
        config=LoopConfig(permission="ask"),
    )
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "cancel-garbage", "add", wf_id, tq)
        await wait_status(handle, "waiting_approval")
        await handle.signal("cancel", "garbage")
        # Whichever happens first: the signal counted as ignored, or (wrongly) the run cancelled.
        status = await wait_status(
            handle, until=lambda s: s["status"] == "cancelled" or s["ignored_signals"] >= 1
        )
        assert status["status"] == "waiting_approval", status
        assert status["ignored_signals"] == 1 and status["stop_reason"] != "cancelled"
        await handle.signal("approve", {})
        result = await full_result(handle)
        final = await handle.query("status")

    assert (result["stop_reason"], result["output"]) == ("done", "two")
    assert tool_messages(result) == {"c1": "2"}
    assert final["status"] == "done" and final["ignored_signals"] == 1


# --------------------------------------------------------------------------- malformed signals


async def test_malformed_and_misplaced_signals_are_ignored(env, ids):
    tq, wf_id = ids
    gate = asyncio.Event()
    provider = RecordingProvider([[tc("add", "c1", a=2, b=3)], "five"], gate=gate)
    agent = Agent(provider=provider, tools=[add], name="robust", config=LoopConfig(permission="ask"))
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "robust", "add", wf_id, tq)
        # While the first model call runs (held by the gate), approve does not fit.
        await wait_status(handle, "running", until=lambda s: len(provider.seen) == 1)
        await handle.signal("approve", {"approver": "early"})
        await wait_status(handle, "running", until=lambda s: s["ignored_signals"] == 1)
        gate.set()

        await wait_status(handle, "waiting_approval")
        await handle.signal("approve", "garbage")
        await handle.signal("approve", {"tool_call_id": 123})
        await handle.signal("answer", {})
        await handle.signal("deny", {"tool_call_id": "no-such-call", "reason": "x"})
        await handle.signal("retry", {})
        status = await wait_status(handle, "waiting_approval", until=lambda s: s["ignored_signals"] == 6)
        # Nothing was decided, nothing lost.
        assert status["pause"] == 1
        assert [c["id"] for c in status["pending_tool_calls"]] == ["c1"]
        session = Session.model_validate(await handle.query("session"))
        assert session.decisions == []

        await handle.signal("approve", {"approver": "alice"})
        result = await full_result(handle)
        final = await handle.query("status")

    assert result["output"] == "five"
    assert tool_messages(result) == {"c1": "5"}
    assert [(d["approver"], d["approved"]) for d in result["session"]["decisions"]] == [("alice", True)]
    assert final["ignored_signals"] == 6
    # A signal after the run ended cannot reach it, and the result stays as it was.
    with pytest.raises(RPCError):
        await handle.signal("approve", {"approver": "late"})
    assert (await handle.result())["output"] == result["output"]
    assert_no_task_failures(await history_events(handle))


# --------------------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"prompt": "x"}, "agent"),
        ({"agent": "nope", "prompt": "x"}, "Unknown agent 'nope'"),
        ({"agent": "known"}, "prompt"),
        ("just a string", "Invalid AgentWorkflow input"),
        ({"agent": "known", "prompt": "x", "config": {"max_iterations": "lots"}}, "max_iterations"),
    ],
    ids=["no-agent", "unknown-agent", "no-prompt", "not-an-object", "bad-config-override"],
)
async def test_invalid_input_fails_the_workflow_clearly(env, ids, payload, expected):
    tq, wf_id = ids
    agent = Agent(provider=MockProvider(["hi"]), name="known")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow("AgentWorkflow", payload, id=wf_id, task_queue=tq)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()

    messages = []
    err: BaseException | None = info.value.cause
    while err is not None:
        messages.append(str(getattr(err, "message", err)))
        err = err.__cause__ or getattr(err, "cause", None)
    assert any(expected in m for m in messages), messages
    events = await history_events(handle)
    assert_no_task_failures(events)
    assert events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED


async def test_unknown_agent_failure_message_names_the_agent(env, ids):
    """What the Temporal UI shows as the run's failure message must name the problem,
    not just 'Activity task failed'."""
    tq, wf_id = ids
    agent = Agent(provider=MockProvider(["hi"]), name="known")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow("AgentWorkflow", {"agent": "nope", "prompt": "x"}, id=wf_id, task_queue=tq)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert "nope" in str(info.value.cause)


async def test_config_override_from_input(env, ids):
    """`config` in the workflow input overrides the agent's LoopConfig for that run only."""
    tq, wf_id = ids
    agent = Agent(provider=MockProvider([[tc("add", "c1", a=2, b=2)], "four"]), tools=[add], name="overridden")
    assert agent.config.permission == "allow"
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "overridden", "add", wf_id, tq, config={"permission": "ask"})
        await wait_status(handle, "waiting_approval")
        await handle.signal("approve", {"approver": "ops"})
        result = await full_result(handle)
    assert tool_messages(result) == {"c1": "4"}
    assert [d["approver"] for d in result["session"]["decisions"]] == ["ops"]


class Unauthorized(Exception):
    status_code = 401


async def test_non_retryable_model_error_fails_the_run_clearly(env, ids):
    tq, wf_id = ids
    attempts: list[int] = []

    class BadKeyProvider(MockProvider):
        async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
            attempts.append(1)
            raise Unauthorized("the API key was rejected")

    agent = Agent(provider=BadKeyProvider([]), name="bad-key")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "bad-key", "hello", wf_id, tq)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
        status = await handle.query("status")

    assert attempts == [1]  # a 401 is not retried
    assert "the API key was rejected" in str(info.value.cause)
    assert status["status"] == "failed"
    assert_no_task_failures(await history_events(handle))


# --------------------------------------------------------------------------- time skipping


async def test_approval_after_two_simulated_days(env, ids):
    tq, wf_id = ids
    agent = Agent(
        provider=MockProvider([[tc("add", "c1", a=20, b=22)], "forty-two"]),
        tools=[add],
        name="patient",
        config=LoopConfig(permission="ask", timeout_s=60),
    )
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        began = await env.get_current_time()
        handle = await start(env, "patient", "add", wf_id, tq)
        await wait_status(handle, "waiting_approval")
        before = await env.get_current_time()
        await env.sleep(timedelta(days=2))
        assert await env.get_current_time() - before >= timedelta(days=2)
        # Still waiting: no approval timeout by default, and waiting is not active time.
        await wait_status(handle, "waiting_approval")
        await handle.signal("approve", {"approver": "late-reviewer"})
        result = await full_result(handle)
        span = await env.get_current_time() - began

    # Done, not stopped by timeout_s=60: the two days of waiting did not count as active time
    # (on the test server's clock, the run's active time is its span minus the wait).
    assert result["stop_reason"] == "done"
    assert result["output"] == "forty-two"
    assert tool_messages(result) == {"c1": "42"}
    assert 0 < result["elapsed_s"] <= (span - timedelta(days=2)).total_seconds()


async def test_approval_timeout_denies(env, ids):
    tq, wf_id = ids
    ran: list[int] = []

    def risky(n: int) -> int:
        ran.append(n)
        return n

    agent = Agent(
        provider=MockProvider([[tc("risky", "c1", n=1)], "gave up"]),
        tools=[risky],
        name="unanswered",
        config=LoopConfig(permission="ask", approval_timeout_s=3 * 86400),
    )
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "unanswered", "do it", wf_id, tq)
        result = await full_result(handle)  # nobody answers; the test server skips the 3 days

    assert ran == []
    assert result["stop_reason"] == "done" and result["output"] == "gave up"
    content = tool_messages(result)["c1"]
    assert "no decision" in content.lower()
    (decision,) = result["session"]["decisions"]
    assert decision["approved"] is False and decision["approver"] == "timeout"
    events = await history_events(handle)
    timers = [e for e in events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    assert timers and timers[0].timer_started_event_attributes.start_to_fire_timeout.ToSeconds() == 3 * 86400


# --------------------------------------------------------------------------- parallel tool calls


async def test_parallel_tool_calls_keep_call_order(env, ids):
    """The batch runs at once (every call starts before any finishes), the calls finish in reverse
    order (each released by the one after it), and the results still come back in call order."""
    tq, wf_id = ids
    log: list[tuple[str, str]] = []
    all_started = asyncio.Event()
    finish_order = ["third", "second", "first"]
    turn = {label: asyncio.Event() for label in finish_order}
    turn["third"].set()

    async def slow(label: str) -> str:
        log.append(("start", label))
        if len(log) == 3:
            all_started.set()
        # One call at a time would never get past this: the others have not started.
        await asyncio.wait_for(all_started.wait(), 30)
        await turn[label].wait()
        log.append(("end", label))
        following = finish_order.index(label) + 1
        if following < len(finish_order):
            turn[finish_order[following]].set()
        return f"{label} done"

    batch = [tc("slow", "c1", label="first"), tc("slow", "c2", label="second"), tc("slow", "c3", label="third")]
    agent = Agent(provider=MockProvider([batch, "all back"]), tools=[slow], name="parallel")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "parallel", "go", wf_id, tq)
        result = await full_result(handle)

    assert [kind for kind, _ in log] == ["start"] * 3 + ["end"] * 3  # they really overlapped
    assert [label for kind, label in log if kind == "end"] == finish_order
    tool_msgs = [m for m in result["session"]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["c1", "c2", "c3"]
    assert [m["content"] for m in tool_msgs] == ["first done", "second done", "third done"]
    events = await history_events(handle)
    runs = scheduled(events, "rein.run_tool")
    assert len(runs) == 3
    assert len({e.activity_task_scheduled_event_attributes.workflow_task_completed_event_id for e in runs}) == 1


# --------------------------------------------------------------------------- model retries


async def test_retry_after_model_attempts_are_exhausted(env, ids):
    tq, wf_id = ids
    provider = OutageProvider(Unavailable, "upstream overloaded (503)")
    agent = Agent(provider=provider, name="flaky-model", config=LoopConfig(model_attempts=2))
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "flaky-model", "hello", wf_id, tq)
        # No pending result() here: with nothing to wake the run, the test server would
        # skip time to the end of the universe; the 1 s retry backoff passes in real time.
        status = await wait_status(handle, "waiting_retry")
        assert status["interrupt"]["type"] == "error"
        assert "Unavailable" in status["interrupt"]["message"] and "503" in status["interrupt"]["message"]
        assert status["stage"] == "call_model"
        assert provider.calls == 2

        # A retry while the outage lasts: the model call gets its model_attempts again, then waits again.
        await handle.signal("retry", {})
        await wait_status(handle, "waiting_retry", until=lambda s: provider.calls >= 4)
        assert provider.calls == 4

        provider.failing = False
        await handle.signal("retry", {})
        result = await full_result(handle)
        final = await handle.query("status")

    assert result["status"] == "done" and result["output"] == "recovered"
    assert provider.calls == 5
    assert final["ignored_signals"] == 0
    assert_no_task_failures(await history_events(handle))


async def test_the_approval_deadline_survives_continue_as_new(env, ids):
    """A waiting run that continues as new (a pile of ignored signals) keeps its approval deadline:
    on the test server's clock it times out a day after it began waiting, not a day after the
    continuation."""
    tq, wf_id = ids
    agent = Agent(
        provider=MockProvider([[tc("add", "c1", a=1, b=2)], "gave up"]),
        tools=[add],
        name="deadline-carried",
        config=LoopConfig(permission="ask", approval_timeout_s=86400),
    )
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "deadline-carried", "add", wf_id, tq, continue_as_new_after=20)
        await wait_status(handle, "waiting_approval")
        first_run = (await handle.describe()).run_id
        await env.sleep(timedelta(hours=12))
        for _ in range(25):  # ignored (no question is pending): the run continues as new, still waiting
            await handle.signal("answer", {"text": "not a question"})
        await poll(lambda: _continued(handle, first_run), "the waiting run to continue as new")
        await wait_status(handle, "waiting_approval")
        await env.sleep(timedelta(hours=13))  # 25 h since the wait began, 13 h since the continuation
        await wait_status(handle, "done")
        result = await full_result(handle)

    assert result["output"] == "gave up"
    (decision,) = result["session"]["decisions"]
    assert decision["approved"] is False and decision["approver"] == "timeout"
    assert "86400 seconds" in tool_messages(result)["c1"]


async def _continued(handle, first_run: str) -> bool:  # noqa: ANN001
    return (await handle.describe()).run_id != first_run


async def test_an_unanswered_question_times_out_as_no_answer(env, ids):
    """`approval_timeout_s` also bounds waiting for an `answer`: the model gets "no answer", the
    decision is recorded as the timeout's, and the run goes on (the test server skips the day)."""
    tq, wf_id = ids
    provider = RecordingProvider([[tc("ask_human", "q1", question="Which colour?")], "I will pick one"])
    agent = Agent(provider=provider, tools=[rein.ask_human], name="unanswered-question",
                  config=LoopConfig(approval_timeout_s=86400))
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "unanswered-question", "paint it", wf_id, tq)
        result = await full_result(handle)

    assert result["output"] == "I will pick one"
    answer = tool_messages(result)["q1"]
    assert answer.startswith("No answer") and "86400 seconds" in answer
    assert provider.seen[1][-1].content == answer
    (decision,) = result["session"]["decisions"]
    assert decision["approver"] == "timeout"
    timers = [e for e in await history_events(handle) if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    assert [t.timer_started_event_attributes.start_to_fire_timeout.ToSeconds() for t in timers] == [86400]


async def test_an_error_interrupt_does_not_time_out_like_an_approval(env, ids):
    """`approval_timeout_s` bounds waiting for a person's decision; a run waiting for `retry` after
    exhausted model attempts keeps waiting past it (on the test server's clock), then retries."""
    tq, wf_id = ids
    provider = OutageProvider(Unavailable, "upstream overloaded (503)")
    agent = Agent(provider=provider, name="flaky-patient",
                  config=LoopConfig(model_attempts=1, approval_timeout_s=60))
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "flaky-patient", "hello", wf_id, tq)
        await wait_status(handle, "waiting_retry")
        await env.sleep(timedelta(minutes=10))
        status = await wait_status(handle, "waiting_retry")
        assert status["interrupt"]["type"] == "error" and provider.calls == 1
        provider.failing = False
        await handle.signal("retry", {})
        result = await full_result(handle)

    assert result["output"] == "recovered" and provider.calls == 2
    timers = [e for e in await history_events(handle) if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    # Only the timer that shows the wait in the UI (rein-waiting-timer), not the 60 s approval timeout.
    assert [t.timer_started_event_attributes.start_to_fire_timeout.ToSeconds() for t in timers] == [30 * 24 * 3600]
    summary = json.loads(timers[0].user_metadata.summary.data)
    assert summary.startswith("Waiting after an error since ") and f"rein retry {wf_id}" in summary


# --------------------------------------------------------------------------- tool retries


async def test_tool_retries_with_stable_idempotency_key(env, ids):
    tq, wf_id = ids
    seen: list[tuple[int, str]] = []

    @rein.tool(retries=2)
    async def flaky_write(text: str, ctx: ToolContext) -> str:
        """Write text somewhere unreliable."""
        seen.append((ctx.attempt, ctx.idempotency_key))
        if len(seen) < 3:
            raise ConnectionError(f"attempt {ctx.attempt} lost")
        return f"written on attempt {ctx.attempt}"

    agent = Agent(provider=MockProvider([[tc("flaky_write", "t1", text="hi")], "ok"]), tools=[flaky_write], name="retrier")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "retrier", "write", wf_id, tq)
        result = await full_result(handle)

    assert [a for a, _ in seen] == [1, 2, 3]
    assert {k for _, k in seen} == {f"{wf_id}/t1"}
    assert tool_messages(result) == {"t1": "written on attempt 3"}
    assert [s["is_error"] for s in result["steps"] if s["kind"] == "tool"] == [False]
    events = await history_events(handle)
    started = [e for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    assert [e.activity_task_started_event_attributes.attempt for e in started][-2] == 3  # tool, then final model call


async def test_tool_error_without_retries_is_a_result(env, ids):
    tq, wf_id = ids
    attempts: list[int] = []

    async def boom(ctx: ToolContext) -> str:
        attempts.append(ctx.attempt)
        raise RuntimeError("kaboom")

    provider = RecordingProvider([[tc("boom", "b1")], "handled"])
    agent = Agent(provider=provider, tools=[boom], name="boomer")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "boomer", "explode", wf_id, tq)
        result = await full_result(handle)

    assert attempts == [1]
    content = tool_messages(result)["b1"]
    assert "RuntimeError" in content and "kaboom" in content
    assert [s["is_error"] for s in result["steps"] if s["kind"] == "tool"] == [True]
    assert "kaboom" in provider.seen[1][-1].content
    events = await history_events(handle)
    tool_event_ids = {e.event_id for e in scheduled(events, "rein.run_tool")}
    started = [
        e
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in tool_event_ids
    ]
    assert [e.activity_task_started_event_attributes.attempt for e in started] == [1]
    completed = [e for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    assert len(completed) == 3  # two model calls and the tool: the tool activity itself succeeded


async def test_tool_retries_exhausted_become_an_error_result(env, ids):
    tq, wf_id = ids
    attempts: list[int] = []

    @rein.tool(retries=1)
    async def always_down(ctx: ToolContext) -> str:
        attempts.append(ctx.attempt)
        raise ConnectionError("service down")

    provider = RecordingProvider([[tc("always_down", "d1")], "gave up"])
    agent = Agent(provider=provider, tools=[always_down], name="exhausted")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "exhausted", "try", wf_id, tq)
        result = await full_result(handle)

    assert attempts == [1, 2]
    content = tool_messages(result)["d1"]
    assert "ConnectionError" in content and "service down" in content
    assert [s["is_error"] for s in result["steps"] if s["kind"] == "tool"] == [True]
    assert result["output"] == "gave up"


async def test_tool_timeout_becomes_an_error_result(env, ids):
    tq, wf_id = ids

    @rein.tool(timeout_s=0.3)
    async def stuck(x: int) -> str:
        await asyncio.sleep(30)
        return "never"

    provider = RecordingProvider([[tc("stuck", "s1", x=1)], "moved on"])
    agent = Agent(provider=provider, tools=[stuck], name="stuck")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "stuck", "go", wf_id, tq)
        result = await full_result(handle)

    content = tool_messages(result)["s1"]
    assert "stuck" in content and "did not complete" in content
    assert [s["is_error"] for s in result["steps"] if s["kind"] == "tool"] == [True]
    assert result["output"] == "moved on"
    assert_no_task_failures(await history_events(handle))


# --------------------------------------------------------------------------- queries


async def test_queries_status_session_steps(env, ids):
    tq, wf_id = ids
    agent = Agent(
        provider=MockProvider([[tc("add", "c1", a=1, b=2)], "three"]),
        tools=[add],
        system="You add.",
        name="queried",
        config=LoopConfig(permission="ask"),
    )
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "queried", "1+2?", wf_id, tq)
        status = await wait_status(handle, "waiting_approval")
        assert STATUS_KEYS <= set(status)
        assert status["stage"] == "run_tools"
        assert status["iteration"] == 1
        assert status["usage"]["input_tokens"] == 1 and status["usage"]["output_tokens"] == 1
        assert status["stop_reason"] == "interrupted"
        assert status["pending_tool_calls"] == [{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}]

        session = Session.model_validate(await handle.query("session"))
        assert [m.role for m in session.messages] == ["system", "user", "assistant"]
        assert session.messages[0].content == "You add." and session.messages[1].content == "1+2?"
        assert session.pending_tool_calls[0].id == "c1"

        steps = [Step.model_validate(s) for s in await handle.query("steps")]
        assert [(s.index, s.kind) for s in steps] == [(0, "model")]
        assert steps[0].tool_calls and steps[0].tool_calls[0].name == "add"

        await handle.signal("approve", {})
        result = await full_result(handle)
        raw_steps = await handle.query("steps")
        final = await handle.query("status")

    steps = [Step.model_validate(s) for s in raw_steps]
    assert [s.kind for s in steps] == ["model", "tool", "model"]
    assert steps[1].summary == "add → 3"
    assert final["status"] == "done" and final["interrupt"] is None and final["pending_tool_calls"] == []
    assert final["iteration"] == 2 and final["stop_reason"] == "done"
    # Durations are left out: workflow.time() right after the describe local activity can differ
    # between the first execution and the replay a query of a finished run causes (SDK behaviour).
    def shape(steps: list[dict]) -> list[dict]:
        return [{k: v for k, v in s.items() if k != "duration_s"} for s in steps]

    assert shape(result["steps"]) == shape(raw_steps)


# --------------------------------------------------------------------------- UI: activity summaries


async def test_activity_summaries_read_well(env, ids):
    tq, wf_id = ids
    agent = Agent(provider=MockProvider([[tc("add", "c1", a=1, b=2)], "3"]), tools=[add], name="summarised")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await start(env, "summarised", "add", wf_id, tq)
        await handle.result()

    history = await handle.fetch_history()
    models = await summaries(history, env.client.data_converter, "rein.call_model")
    tools = await summaries(history, env.client.data_converter, "rein.run_tool")
    # A lean start's first call is scheduled before the run knows its model: its summary names the agent.
    assert models == ["model of agent summarised · iteration 1", "model MockProvider · iteration 2"]
    assert tools == ["tool add(a=1, b=2)"]


# --------------------------------------------------------------------------- replay


STORED_HISTORIES = sorted(HISTORIES.glob("agent_approval_v*.json"))
"""The approval scenario as builds this one replays recorded it (older ones: tests/histories/drained/)."""
REPLAYING = STORED_HISTORIES


def patches_in(path: Path) -> set[str]:
    events = json.loads(path.read_text())["events"]
    return {
        json.loads(base64.b64decode(p["data"]))["id"]
        for e in events
        if e.get("markerRecordedEventAttributes", {}).get("markerName") == "core_patch"
        for p in e["markerRecordedEventAttributes"]["details"]["patch-data"]["payloads"]
    }


def markers(path: Path) -> list[str]:
    return [e["markerRecordedEventAttributes"]["markerName"] for e in json.loads(path.read_text())["events"]
            if "markerRecordedEventAttributes" in e]


def first_task_flags(path: Path) -> list[int]:
    events = json.loads(path.read_text())["events"]
    done = next(e["workflowTaskCompletedEventAttributes"] for e in events if "workflowTaskCompletedEventAttributes" in e)
    return done.get("sdkMetadata", {}).get("langUsedFlags", [])


def test_the_stored_approval_histories_are_the_lean_generations():
    """v8: a lean start recorded as a workflow logic flag (the previous build); v9: a lean start with no flag
    and no describe marker, its first wait behind the rein-waiting-timer patch (a marker); v10: the inbox's
    rein-inbox patch too (the rules asked before the approval wait, an activity; the waiting memo); v11: the run's
    start recorded (rein-recorded-start)."""
    assert [p.name for p in STORED_HISTORIES] == ["agent_approval_v10.json", "agent_approval_v11.json",
                                                  "agent_approval_v8.json", "agent_approval_v9.json"]
    v10, v11, v8, v9 = STORED_HISTORIES
    assert first_task_flags(v8) and markers(v8) == [] and patches_in(v8) == set()
    assert first_task_flags(v9) == [] and markers(v9) == ["core_patch"]
    assert patches_in(v9) == {"rein-waiting-timer"}
    assert patches_in(v10) == {"rein-waiting-timer", "rein-inbox"}
    assert markers(v10) == ["core_patch", "core_patch"]  # the rules are asked by an activity (events, no marker)
    # v11: the run records how it started, first thing (rein.workflows.window reads it back on replay)
    assert patches_in(v11) == {"rein-recorded-start", "rein-waiting-timer", "rein-inbox"}
    assert markers(v11) == ["core_patch", "core_patch", "core_patch"]
    first = next(e for e in json.loads(v11.read_text())["events"] if "markerRecordedEventAttributes" in e)
    assert int(first["eventId"]) == 5  # the first command of the first workflow task
    memos = [e for e in json.loads(v10.read_text())["events"] if "workflowPropertiesModifiedEventAttributes" in e]
    assert len(memos) == 4  # each of the two waits shows in the memo, and the memo clears when it ends


LONG_HISTORIES = sorted(HISTORIES.glob("agent_long_v*.json"))


def upserts_in(path: Path) -> list[dict[str, Any]]:
    events = json.loads(path.read_text())["events"]
    return [
        {k: json.loads(base64.b64decode(v["data"])) for k, v in attrs["searchAttributes"]["indexedFields"].items()}
        for e in events
        if (attrs := e.get("upsertWorkflowSearchAttributesEventAttributes"))
    ]


def test_the_long_history_refreshes_counters_by_time_and_ends_in_one_upsert():
    """v4: counters by workflow time (a quick run: none between), the last ones with the final status; no marker.
    Started lean by a plain client, the run publishes once: everything with its final status."""
    # v3 (described first by a build of 2026-12-01, between landings) replays again: rein.workflows.window
    assert [p.name for p in LONG_HISTORIES] == ["agent_long_v3.json", "agent_long_v4.json"]
    v4 = LONG_HISTORIES[-1]
    [upsert] = upserts_in(v4)
    assert {k: upsert[k] for k in ("ReinStatus", "ReinIterations", "ReinTokens", "ReinAgent")} == {
        "ReinStatus": "done", "ReinIterations": 10, "ReinTokens": 20, "ReinAgent": "long-agent"}
    assert patches_in(v4) == set() and markers(v4) == []


@pytest.mark.parametrize("path", LONG_HISTORIES, ids=lambda p: p.stem)
async def test_long_history_replays(path):
    from temporalio.client import WorkflowHistory

    history = WorkflowHistory.from_json("agent-long", json.loads(path.read_text()))
    assert sum(e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED for e in history.events) >= 19
    replayer = Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


@pytest.mark.parametrize("path", REPLAYING, ids=lambda p: p.stem)
async def test_stored_history_replays(path):
    from temporalio.client import WorkflowHistory

    data = json.loads(path.read_text())
    history = WorkflowHistory.from_json("agent-approval", data)
    types = [e.event_type for e in history.events]
    # The stored scenario really has a tool round, an approval and an answer.
    assert types.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) == 2
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED in types

    replayer = Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure

"""Middleware, hooks, events and compaction in durable runs.

The same Agent runs on the in-process engine and on the durable one (the embedded
dev server and an in-process worker, as in test_engines.py): middleware runs on
the worker inside the step's activity, and the two engines must agree on the
RunResult, on what the model saw, and on what the middleware and handlers saw.
History-level checks (which activities ran, what the run carries) use the
time-skipping test server with a raw client.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError

import rein
from rein import Agent, LoopConfig, Message, MockProvider, RunResult, Session
from rein.client import RunFailed
from rein.core.compaction import CompactionStrategy, SlidingWindow, SummarizeCompaction
from rein.core.session import Stage
from rein.testing import full_result
from tests.support.history import decoded_values
from tests.support.processes import stop_process
from tests.support.providers import RecordingProvider, Unavailable
from tests.support.results import engine_view
from tests.support.tools import add, mul, tc


def with_kit(agent: Agent, seen: list) -> Agent:
    """Middleware of every kind: an outer layer that edits the conversation, hooks, events."""

    @agent.middleware
    async def house_rules(ctx, call_next):  # noqa: ANN001, ANN202
        if ctx.stage == Stage.CALL_MODEL and ctx.session.messages[0].role != "system":
            ctx.session.messages.insert(0, Message(role="system", content="House rules: be brief."))
        seen.append(("enter", ctx.stage.value, len(ctx.session.messages)))
        ctx = await call_next(ctx)
        seen.append(("leave", ctx.stage.value, [s.kind for s in ctx.steps], ctx.interrupt.type if ctx.interrupt else None))
        return ctx

    @agent.before_model
    async def count_calls(ctx):  # noqa: ANN001, ANN202
        seen.append(("before_model", ctx.session.iteration))

    @agent.after_tool
    async def vet(ctx):  # noqa: ANN001, ANN202
        for message in ctx.session.messages:
            if message.role == "tool" and not message.content.startswith("vetted:"):
                message.content = f"vetted: {message.content}"

    agent.on("step", lambda ctx: seen.append(("step", ctx.stage.value, [s.kind for s in ctx.steps])))
    agent.on("tool", lambda ctx: seen.append(("tool", len(ctx.steps))))
    return agent


SCENARIOS: dict[str, dict[str, Any]] = {
    "tool-round": {"script": lambda: [[tc("add", a=1, b=2)], "it is 3"], "expect": ["done"]},
    "two-calls-one-turn": {
        "script": lambda: [[tc("add", "a", a=1, b=2), tc("mul", "b", a=3, b=4)], "3 and 12"],
        "expect": ["done"],
    },
    "ask-approve": {
        "script": lambda: [[tc("add", a=1, b=2)], "3"],
        "config": LoopConfig(permission="ask"),
        "resumes": [{"approve": True}],
        "expect": ["need_approval", "done"],
    },
    "ask-deny": {
        "script": lambda: [[tc("add", a=1, b=2)], "fine"],
        "config": LoopConfig(permission="ask"),
        "resumes": [{"approve": False}],
        "expect": ["need_approval", "done"],
    },
    "ask-human": {
        "script": lambda: [[tc("ask_human", "q1", question="Which city?")], "Paris, then"],
        "tools": [rein.ask_human, add],
        "resumes": [{"answer": "Paris"}],
        "expect": ["need_input", "done"],
    },
    "requires-approval": {
        "script": lambda: [[tc("guarded_add", a=1, b=2)], "3"],
        "tools": [rein.tool(add, name="guarded_add", requires_approval=True)],
        "resumes": [{"approve": True}],
        "expect": ["need_approval", "done"],
    },
    "transient-error": {
        "script": lambda: [Unavailable("overloaded"), "recovered"],
        "config": LoopConfig(model_attempts=1),
        "resumes": [{}],
        "expect": ["error", "done"],
    },
    "max-iterations": {
        "script": lambda: [[tc("add", a=1, b=2)]] * 4,
        "config": LoopConfig(max_iterations=2),
        "expect": ["max_iterations"],
    },
}


async def play(name: str, engine: str) -> tuple[list[dict[str, Any]], list, list]:
    scenario = SCENARIOS[name]
    provider = RecordingProvider(scenario["script"]())
    seen: list = []
    agent = with_kit(
        Agent(
            provider=provider,
            tools=scenario.get("tools", [add, mul]),
            config=scenario.get("config", LoopConfig()),
            name=f"mw-{name}",
            engine=engine,  # type: ignore[arg-type]
        ),
        seen,
    )
    result = await agent.arun("please help")
    views = [engine_view(result)]
    for kwargs in scenario.get("resumes", []):
        result = await agent.aresume(Session.model_validate_json(result.session.model_dump_json()), **kwargs)
        views.append(engine_view(result))
    assert (result.run_id is not None) == (engine == "temporal")
    return views, provider.seen_dumped, seen


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_durable_middleware_matches_the_in_process_engine(name):
    local = await play(name, "local")
    durable = await play(name, "temporal")
    views, model_saw, middleware_saw = local
    outcomes = [v["interrupt"]["type"] if v["interrupt"] else v["stop_reason"] for v in views]
    assert outcomes == SCENARIOS[name]["expect"], "the scenario does not do what it says"
    # The kit did something in every scenario: the model saw the house rules, middleware saw steps.
    assert model_saw and all(seen[0]["content"] == "House rules: be brief." for seen in model_saw)
    assert ("enter", "call_model", 2) in middleware_saw
    assert durable[0] == views, "RunResults differ between engines"
    assert durable[1] == model_saw, "the model saw different conversations"
    assert durable[2] == middleware_saw, "middleware, hooks and handlers saw different steps"


async def test_an_after_tool_hook_changes_what_the_model_sees():
    provider = RecordingProvider([[tc("add", a=2, b=2)], "done"])
    agent = Agent(provider=provider, tools=[add], name="mw-rewrite", engine="temporal")

    @agent.after_tool
    async def redact(ctx):  # noqa: ANN001, ANN202
        ctx.session.messages[-1].content = "[redacted]"

    result = await agent.arun("add")
    assert result.run_id and result.output == "done"
    assert provider.seen_dumped[1][-1] == {"role": "tool", "content": "[redacted]", "tool_calls": None, "tool_call_id": "1"}
    assert result.session.messages[-2].content == "[redacted]"
    assert [s.summary for s in result.steps] == ["tool calls: add", "add → 4", "done"]


async def test_a_before_tool_hook_answers_instead_of_the_tool():
    ran: list[int] = []

    def launch(code: int) -> str:
        """Launch something irreversible."""
        ran.append(code)
        return "launched"

    provider = RecordingProvider([[tc("launch", code=7)], "understood"])
    agent = Agent(provider=provider, tools=[launch], name="mw-block", engine="temporal")

    @agent.before_tool
    async def block(ctx):  # noqa: ANN001, ANN202
        for call in ctx.session.pending_tool_calls:
            ctx.session.messages.append(Message(role="tool", tool_call_id=call.id, content="blocked by policy"))
        ctx.session.pending_tool_calls = []
        ctx.session.stage = Stage.CALL_MODEL
        return False

    result = await agent.arun("launch")
    assert ran == []
    assert result.output == "understood"
    assert provider.seen_dumped[1][-1]["content"] == "blocked by policy"
    assert [s.kind for s in result.steps] == ["model", "model"]


async def test_a_before_model_hook_ends_the_run_without_calling_the_model():
    provider = RecordingProvider(["never"])
    agent = Agent(provider=provider, name="mw-halt", engine="temporal")

    @agent.before_model
    async def halt(ctx):  # noqa: ANN001, ANN202
        ctx.session.done = True
        ctx.session.stop_reason = "halted"
        return False

    result = await agent.arun("hi")
    assert result.run_id and (result.status, result.stop_reason, result.steps) == ("done", "halted", [])
    assert provider.seen_dumped == []


async def test_middleware_that_raises_fails_the_durable_run_with_its_error():
    agent = Agent(provider=MockProvider(["never"]), name="mw-raise", engine="temporal")

    @agent.middleware
    async def broken(ctx, call_next):  # noqa: ANN001, ANN202
        raise LookupError("no such policy")

    with pytest.raises(RunFailed, match="no such policy") as info:  # the exception stays in the worker
        await agent.arun("hi")
    assert info.value.error_type == "LookupError"


async def test_event_handlers_fire_for_durable_runs_where_the_step_runs():
    events: list[tuple[str, str, list[str]]] = []
    agent = Agent(
        provider=MockProvider([[tc("add", a=1, b=2)], "3"]), tools=[add], name="mw-events", engine="temporal"
    )
    agent.on("step", lambda ctx: events.append(("step", ctx.stage.value, [s.summary for s in ctx.steps])))
    agent.on("tool", lambda ctx: events.append(("tool", ctx.stage.value, [s.summary for s in ctx.steps])))
    result = await agent.arun("add")
    assert result.run_id is not None
    assert events == [
        ("step", "call_model", ["tool calls: add"]),
        ("step", "run_tools", ["add → 3"]),
        ("tool", "run_tools", ["add → 3"]),
        ("step", "call_model", ["3"]),
    ]


# --------------------------------------------------------------------------- what cannot be durable


def test_what_would_fail_on_a_worker_is_refused_when_the_agent_is_built():
    agent = Agent(provider=MockProvider(["x"]))

    def sync_hook(ctx):  # noqa: ANN001, ANN202
        return None

    with pytest.raises(TypeError, match="before_tool hook must be an async function"):
        agent.before_tool(sync_hook)
    with pytest.raises(TypeError, match="middleware must be callable"):
        agent.middleware("not a function")

    async def async_handler(ctx):  # noqa: ANN001, ANN202
        return None

    with pytest.raises(TypeError, match="event handlers are plain functions"):
        agent.on("step", async_handler)

    class NotAStrategy:
        def compact(self, messages):  # noqa: ANN001, ANN202
            return messages

    with pytest.raises(TypeError, match="async def compact"):
        Agent(provider=MockProvider(["x"]), compaction=NotAStrategy())
    assert agent.middlewares == []
    # The reference's protocol for a custom strategy: rein's own strategies are ones.
    assert isinstance(SlidingWindow(3), CompactionStrategy) and isinstance(SummarizeCompaction(max_tokens=100), CompactionStrategy)
    assert not isinstance(object(), CompactionStrategy)


# --------------------------------------------------------------------------- compaction


def many_rounds(n: int) -> list:
    return [[tc("add", str(i), a=i, b=i)] for i in range(n)] + ["finished"]


@pytest.mark.parametrize(
    "strategy",
    [lambda: SlidingWindow(3), lambda: SummarizeCompaction(max_tokens=12, keep_recent=2)],
    ids=["sliding-window", "summarize"],
)
async def test_compaction_matches_the_in_process_engine(strategy):
    results = {}
    seen = {}
    for engine in ("local", "temporal"):
        provider = RecordingProvider(many_rounds(4))
        agent = Agent(
            provider=provider, tools=[add], system="You add.", compaction=strategy(),
            name=f"compact-{engine}", engine=engine,  # type: ignore[arg-type]
        )
        results[engine] = engine_view(await agent.arun("add things"))
        seen[engine] = provider.seen_dumped
    assert results["temporal"] == results["local"]
    assert seen["temporal"] == seen["local"]
    # It did compact: later calls saw fewer messages than an uncompacted run (1 + 1 + 2 per round).
    assert len(seen["local"][-1]) < 2 + 2 * 4
    assert seen["local"][-1][0] == {"role": "system", "content": "You add.", "tool_calls": None, "tool_call_id": None}


def scheduled(events: list, activity_type: str) -> int:
    return sum(
        1
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity_type
    )


async def test_compaction_shrinks_the_conversation_the_workflow_carries(env, ids):
    tq, wf_id = ids
    provider = RecordingProvider(many_rounds(6))
    agent = Agent(provider=provider, tools=[add], system="You add.", compaction=SlidingWindow(2), name="shrinker")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "shrinker", "prompt": "add things"}, id=wf_id, task_queue=tq
        )
        result = await full_result(handle)
        carried = Session.model_validate(await handle.query("session"))
        events = list((await handle.fetch_history()).events)
    assert result["output"] == "finished"
    # The workflow's Session is the compacted one: the system prompt plus a window, not 2 + 2 * 6 + 1 messages.
    assert len(carried.messages) <= 1 + 2 + 1
    assert carried.messages[0].content == "You add."
    assert all(len(conversation) <= 1 + 2 for conversation in provider.seen_dumped)
    assert scheduled(events, "rein.compact") >= 5
    assert scheduled(events, "rein.call_model") == 1 + 7  # the lean first call described the agent only
    assert not any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in events)


async def test_compaction_that_is_not_due_runs_no_activity(env, ids):
    tq, wf_id = ids
    agent = Agent(provider=MockProvider(many_rounds(2)), tools=[add], compaction=SlidingWindow(50), name="roomy")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "roomy", "prompt": "add things"}, id=wf_id, task_queue=tq
        )
        assert (await handle.result())["output"] == "finished"
        events = list((await handle.fetch_history()).events)
    assert scheduled(events, "rein.compact") == 0


async def test_middleware_steps_run_as_the_contract_activities_with_an_approval(env, ids):
    tq, wf_id = ids
    stages: list[str] = []
    agent = Agent(
        provider=MockProvider([[tc("add", a=1, b=2)], "3"]),
        tools=[add],
        config=LoopConfig(permission="ask"),
        name="mw-approval",
    )

    @agent.middleware
    async def watch(ctx, call_next):  # noqa: ANN001, ANN202
        stages.append(ctx.stage.value)
        return await call_next(ctx)

    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "mw-approval", "prompt": "add"}, id=wf_id, task_queue=tq
        )
        for _ in range(500):
            if (await handle.query("status"))["status"] == "waiting_approval":
                break
            await asyncio.sleep(0.02)
        assert stages == ["call_model", "run_tools"]  # the middleware saw the step that asked
        await handle.signal("approve", {"approver": "alice"})
        result = await full_result(handle)
        events = list((await handle.fetch_history()).events)
    assert result["output"] == "3"
    assert stages == ["call_model", "run_tools", "run_tools", "call_model"]
    assert scheduled(events, "rein.call_model") == 1 + 2  # the lean first call described the agent only
    assert scheduled(events, "rein.run_tool") == 2
    assert not any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in events)


async def test_a_fatal_middleware_error_fails_the_run_with_a_clear_message(env, ids):
    tq, wf_id = ids
    agent = Agent(provider=MockProvider(["x"]), name="mw-fatal")

    @agent.before_model
    async def broken(ctx):  # noqa: ANN001, ANN202
        raise ValueError("policy table missing")

    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "mw-fatal", "prompt": "hi"}, id=wf_id, task_queue=tq
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        status = await handle.query("status")
    assert "policy table missing" in str(failure.value.cause)
    assert status["status"] == "failed"


async def test_transient_model_errors_are_retried_by_temporal_inside_middleware():
    seen: list = []
    agent = with_kit(
        Agent(provider=RecordingProvider([Unavailable("overloaded"), "recovered"]), name="mw-retry", engine="temporal"),
        seen,
    )
    result = await agent.arun("hi")
    assert (result.status, result.output, result.interrupt) == ("done", "recovered", None)
    # The middleware saw the failed attempt end in an error interrupt, then Temporal's retry succeed.
    assert [entry for entry in seen if entry[0] == "leave"] == [
        ("leave", "call_model", [], "error"),
        ("leave", "call_model", ["model"], None),
    ]


async def test_middleware_and_compaction_across_continue_as_new(env, ids):
    tq, wf_id = ids
    script = lambda: [[tc("add", str(i), a=i, b=1)] for i in range(8)] + ["all added"]  # noqa: E731
    local = with_kit(
        Agent(provider=MockProvider(script()), tools=[add], compaction=SlidingWindow(4), engine="local",
              config=LoopConfig(detect_loops=False)),
        [],
    )
    expected = engine_view(await local.arun("add"))
    durable = with_kit(
        Agent(provider=MockProvider(script()), tools=[add], compaction=SlidingWindow(4), name="mw-long",
              config=LoopConfig(detect_loops=False)),
        [],
    )
    async with rein.create_worker(env.client, agents=[durable], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow",
            {"agent": "mw-long", "prompt": "add", "continue_as_new_after": 20},
            id=wf_id,
            task_queue=tq,
        )
        first_run = handle.result_run_id
        result = RunResult.model_validate(await full_result(handle))
        final_run = (await env.client.get_workflow_handle(wf_id).describe()).run_id
    assert final_run != first_run, "the run did not continue as new"
    assert engine_view(result) == expected
    assert expected["output"] == "all added" and len(expected["messages"]) <= 2 + 4 + 1


async def test_stored_history_of_an_agent_with_extensions_replays():
    """Guards the command sequence of middleware steps and compaction (tests/histories/make_histories.py): such
    an agent's run asks its agent first, recorded as the rein-described-first patch."""
    import json
    from pathlib import Path

    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from rein.temporal.converter import rein_data_converter
    from rein.workflows import AgentWorkflow

    data = json.loads((Path(__file__).parent / "histories" / "agent_extensions_v2.json").read_text())
    history = WorkflowHistory.from_json("agent-extensions", data)
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert "rein.compact" in activities and activities.count("rein.run_tool") == 4
    markers = [e.marker_recorded_event_attributes.marker_name for e in history.events
               if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    # rein-described-first, the waiting timer's patch (asked before a local activity), then describe_agent
    assert markers[:3] == ["core_patch", "core_patch", "core_local_activity"]
    replayer = Replayer(workflows=[AgentWorkflow], data_converter=rein_data_converter())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


async def test_a_tool_with_retries_retries_the_middleware_step():
    attempts: list[int] = []

    @rein.tool(retries=1)
    def flaky(n: int) -> int:
        """Fails the first time."""
        attempts.append(n)
        if len(attempts) == 1:
            raise ConnectionError("try again")
        return n * 10

    provider = RecordingProvider([[tc("flaky", n=4)], "forty"])
    stages: list[str] = []
    agent = Agent(provider=provider, tools=[flaky], name="mw-flaky", engine="temporal")

    @agent.middleware
    async def watch(ctx, call_next):  # noqa: ANN001, ANN202
        stages.append(ctx.stage.value)
        return await call_next(ctx)

    result = await agent.arun("go")
    assert result.output == "forty" and attempts == [4, 4]
    assert provider.seen_dumped[1][-1]["content"] == "40"
    assert [s.summary for s in result.steps] == ["tool calls: flaky", "flaky → 40", "forty"]
    assert stages == ["call_model", "run_tools", "run_tools", "call_model"]  # the step ran again, whole


# --------------------------------------------------------------------------- a worker in another process


async def test_middleware_runs_in_a_separate_worker_process(dev, tmp_path):
    """`python worker.py --agent tests.agents.guarded:agent` serves the run: the hook masks the tool
    result before the model sees it, the middleware's note reaches the model, handlers fire there."""
    import os
    import subprocess
    import sys
    import uuid
    from pathlib import Path


    root = Path(__file__).resolve().parent.parent
    events_file, log_file = tmp_path / "events.log", tmp_path / "worker.log"
    tq = f"guarded-{uuid.uuid4().hex[:8]}"
    address = dev.client.service_client.config.target_host
    env = {k: v for k, v in os.environ.items() if k not in ("REIN_TASK_QUEUE", "REIN_ENGINE")}
    env.update(REINTEST_EVENTS=str(events_file), PYTHONPATH=str(root))
    with open(log_file, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "worker.py", "--agent", "tests.agents.guarded:agent", "--task-queue", tq,
             "--address", address],
            cwd=str(root), env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    try:
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": "guarded", "prompt": "look up acme"}, id=tq, task_queue=tq
        )
        result = RunResult.model_validate(await asyncio.wait_for(full_result(handle), 60))
        history = await handle.fetch_history()
    finally:
        stop_process(worker, 15)
    assert result.output == f"I saw: account acme: card **** | notes: ['served by pid {worker.pid}']", (
        log_file.read_text()[-2000:]
    )
    assert [m.content for m in result.session.messages if m.role == "tool"] == ["account acme: card ****"]
    # The conversation the run recorded holds only the masked result (Step summaries, made by the
    # core before after-hooks run, keep the tool's own text, on both engines).
    recorded = [value for value in await decoded_values(history, dev.client.data_converter)
                if isinstance(value, dict)]
    tool_messages = {
        m["content"]
        for payload in recorded
        for m in payload.get("tail", []) + (payload.get("step") or {}).get("new_messages", [])
        if m["role"] == "tool"
    }
    assert tool_messages == {"account acme: card ****"}
    assert events_file.read_text().splitlines() == [
        f"{worker.pid} call_model ['model']",
        f"{worker.pid} run_tools ['tool']",
        f"{worker.pid} call_model ['model']",
    ]


async def test_durable_astream_runs_middleware_too():
    stages: list[str] = []
    agent = Agent(
        provider=MockProvider([[tc("add", a=1, b=2)], "three"]), tools=[add], name="mw-stream", engine="temporal"
    )
    agent.on("step", lambda ctx: stages.append(ctx.stage.value))

    chunks = [chunk async for chunk in agent.astream("add")]
    assert "".join(c.text for c in chunks if c.type == "text") == "three"
    assert chunks[-1].type == "done" and chunks[-1].finish_reason == "done"
    assert stages == ["call_model", "run_tools", "call_model"]


@pytest.mark.parametrize("engine", ["local", "temporal"])
async def test_middleware_may_replace_the_session_object(engine):
    provider = RecordingProvider(["fresh start"])
    agent = Agent(provider=provider, name=f"mw-replace-{engine}", engine=engine)  # type: ignore[arg-type]

    @agent.middleware
    async def forget(ctx, call_next):  # noqa: ANN001, ANN202
        if ctx.stage == Stage.CALL_MODEL:
            ctx.session = Session(messages=[Message(role="user", content="only this")], usage=ctx.session.usage)
        return await call_next(ctx)

    result = await agent.arun("a long question nobody should see")
    assert provider.seen_dumped == [[{"role": "user", "content": "only this", "tool_calls": None, "tool_call_id": None}]]
    assert [m.content for m in result.session.messages] == ["only this", "fresh start"]
    assert (result.status, result.output) == ("done", "fresh start")


async def test_a_summarizer_that_fails_for_good_fails_the_run_as_in_process():
    class Forbidden(Exception):
        status_code = 403

    async def summarizer(old):  # noqa: ANN001, ANN202
        raise Forbidden("summaries are not allowed")

    for engine in ("local", "temporal"):
        agent = Agent(
            provider=MockProvider(many_rounds(3)), tools=[add], name=f"compact-fail-{engine}", engine=engine,  # type: ignore[arg-type]
            compaction=SummarizeCompaction(max_tokens=5, keep_recent=2, summarizer=summarizer),
        )
        # In-process the exception itself; durably its type and message (it stays in the worker).
        expected = Forbidden if engine == "local" else RunFailed
        with pytest.raises(expected, match="summaries are not allowed") as info:
            await agent.arun("add things")
        if engine == "temporal":
            assert info.value.error_type == "Forbidden"


async def test_the_worker_never_serves_a_conversation_from_before_a_rewrite(env, ids):
    """The worker's conversation cache: a rewrite (compaction, middleware) changes the run's
    `conversation` token, so a copy cached under another token is never served, even when its
    length fits; a full resend replaces whatever the worker held."""
    from temporalio.testing import ActivityEnvironment

    from rein.activities.agents import Conversations
    from rein.core.contract import ModelCallInput

    def m(text: str) -> Message:
        return Message(role="user", content=text)

    tq, wf_id = ids
    agent = Agent(provider=MockProvider([[tc("add", a=1, b=2)], "3"]), tools=[add], name="cache-owner",
                  config=LoopConfig(permission="ask"))
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "cache-owner", "prompt": "add"}, id=wf_id, task_queue=tq
        )
        for _ in range(500):
            if (await handle.query("status"))["status"] == "waiting_approval":
                break
            await asyncio.sleep(0.02)
        cache = Conversations()
        cache.remember(wf_id, "before-rewrite", [m("stale 1"), m("stale 2")])
        request = ModelCallInput(agent="cache-owner", new_messages=[], first_index=2, total=2,
                                 run_id=wf_id, conversation="after-rewrite")
        served = await ActivityEnvironment(client=env.client).run(cache.messages_for, request)
        assert [x.content for x in served] == ["add", ""]  # the run's own conversation, asked of the workflow
        # A full resend wins over a cached copy of the same length, whatever its token.
        resend = request.model_copy(update={"first_index": 0, "new_messages": [m("new 1"), m("new 2")]})
        cache.remember(wf_id, "after-rewrite", [m("stale 1"), m("stale 2")])
        assert [x.content for x in await cache.messages_for(resend)] == ["new 1", "new 2"]
        await handle.signal("cancel", {"reason": "test over"})
        assert (await full_result(handle))["stop_reason"] == "cancelled"


async def test_agent_on_events_are_on_the_run_stream(dev):
    """`agent.on` handlers fire on the worker; each event is also on the run's stream, in order
    with the steps, for readers in any process (`ReinClient.stream`)."""
    from rein.client import ReinClient

    fired: list[str] = []
    agent = Agent(provider=MockProvider([[tc("add", a=1, b=2)], "3"]), tools=[add], name="mw-on-stream")
    agent.on("step", lambda ctx: fired.append(f"step:{ctx.stage.value}"))
    agent.on("tool", lambda ctx: fired.append("tool"))
    tq = f"mw-on-stream-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        runs = ReinClient(dev.client, task_queue=tq)
        handle = await runs.start("mw-on-stream", "add", stream=True)
        seen = [chunk async for chunk in runs.stream(handle.id)]
    events = [(c.name, c.data["stage"], [s["kind"] for s in c.data["steps"]]) for c in seen if c.type == "event"]
    assert events == [
        ("step", "call_model", ["model"]),
        ("step", "run_tools", ["tool"]),
        ("tool", "run_tools", ["tool"]),
        ("step", "call_model", ["model"]),
    ]
    assert fired == ["step:call_model", "step:run_tools", "tool", "step:call_model"]
    kinds = [(c.type, c.name) for c in seen]
    # Each step's events come before the workflow records that step.
    assert kinds.index(("event", "tool")) < kinds.index(("step", "tool"))
    assert kinds[-1] == ("done", None)

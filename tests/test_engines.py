"""Engine parity and the durable engine, through `Agent`.

`engine="temporal"` uses the embedded `temporal server start-dev` and an in-process
worker, started once per process (a real server, never a mock of Temporal).
For the same script, the local and the durable drivers must produce the same
RunResult: status, output, stop_reason, usage, steps, session messages, interrupt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

import rein
from rein import Agent, Completion, LoopConfig, Message, MockProvider, Session, StreamChunk, ToolCall, Usage, settings
from rein.client import DecisionRejected, RunFailed
from rein.durable import engine
from tests.support.providers import AuthFailed, EchoProvider, OutageProvider, RateLimited
from tests.support.results import engine_view
from tests.support.tools import add, explode, mul, tc

# --------------------------------------------------------------------------- helpers


@dataclass
class Scenario:
    script: Callable[[], list]
    tools: list = field(default_factory=lambda: [add, mul])
    config: LoopConfig = field(default_factory=LoopConfig)
    resumes: list[dict[str, Any]] = field(default_factory=list)
    """Keyword arguments of each successive `aresume`."""
    expect: list[tuple[str, str]] = field(default_factory=list)
    """(status, stop_reason) of the run and then of each resume: proves the scenario does what it says."""
    output_type: Any = None
    usage: Usage | None = None
    """Each model call's usage (default: 1 token in, 1 out, no cost)."""


class City(BaseModel):
    name: str
    population: int


def final(cid: str = "f", **arguments: Any) -> list[ToolCall]:
    return [ToolCall(id=cid, name="final_result", arguments=arguments)]


ADD_1_2 = tc("add", a=1, b=2)

SCENARIOS: dict[str, Scenario] = {
    "text-only": Scenario(lambda: ["hello there"], expect=[("done", "done")]),
    "tool-round": Scenario(lambda: [[ADD_1_2], "it is 3"], expect=[("done", "done")]),
    "two-calls-one-turn": Scenario(
        lambda: [[tc("add", "a", a=1, b=2), tc("mul", "b", a=3, b=4)], "3 and 12"], expect=[("done", "done")]
    ),
    "deny-policy": Scenario(
        lambda: [[ADD_1_2], "no tools for me"], config=LoopConfig(permission="deny"), expect=[("done", "done")]
    ),
    "max-iterations": Scenario(
        lambda: [[ADD_1_2]] * 6, config=LoopConfig(max_iterations=2), expect=[("done", "max_iterations")]
    ),
    "max-tokens": Scenario(lambda: [[ADD_1_2]] * 6, config=LoopConfig(max_tokens=4), expect=[("done", "max_tokens")]),
    "budget": Scenario(
        lambda: [[ADD_1_2]] * 6, config=LoopConfig(max_cost_usd=0.3),
        usage=Usage(input_tokens=1, output_tokens=1, cost_usd=0.1), expect=[("done", "budget")],
    ),
    "loop-detection": Scenario(
        lambda: [[ADD_1_2]] * 6, config=LoopConfig(repeat_threshold=3), expect=[("done", "loop_detected")]
    ),
    "bad-tool-args": Scenario(
        lambda: [[tc("add", a="x", b=2)], [tc("add", "2", a=1)], [tc("add", "3", a=1, b=2, c=3)], [tc("nope")], "ok"],
        expect=[("done", "done")],
    ),
    "raising-tool": Scenario(lambda: [[tc("explode")], "recovered"], tools=[explode], expect=[("done", "done")]),
    "ask-approve": Scenario(
        lambda: [[ADD_1_2], "3"],
        config=LoopConfig(permission="ask"),
        resumes=[{"approve": True}],
        expect=[("interrupted", "interrupted"), ("done", "done")],
    ),
    "ask-deny": Scenario(
        lambda: [[ADD_1_2], "ok, I won't"],
        config=LoopConfig(permission="ask"),
        resumes=[{"approve": False}],
        expect=[("interrupted", "interrupted"), ("done", "done")],
    ),
    "ask-multi-round": Scenario(
        lambda: [[ADD_1_2], [tc("mul", "2", a=3, b=4)], "done"],
        config=LoopConfig(permission="ask"),
        resumes=[{"approve": True}, {"approve": True}],
        expect=[("interrupted", "interrupted"), ("interrupted", "interrupted"), ("done", "done")],
    ),
    "ask-repeated-call-ids": Scenario(  # LiteLLM's call_0 in every turn: each batch waits for its own decision
        lambda: [[tc("add", "call_0", a=1, b=2)], [tc("add", "call_0", a=3, b=4)], "3 and 7"],
        config=LoopConfig(permission="ask"),
        resumes=[{"approve": True}, {"approve": False}],
        expect=[("interrupted", "interrupted"), ("interrupted", "interrupted"), ("done", "done")],
    ),
    "ask-human": Scenario(
        lambda: [[tc("ask_human", "q1", question="Which city?")], "Paris, then"],
        tools=[rein.ask_human, add],
        resumes=[{"answer": "Paris"}],
        expect=[("interrupted", "interrupted"), ("done", "done")],
    ),
    "retryable-error": Scenario(
        lambda: [RateLimited("busy"), "recovered"],
        config=LoopConfig(model_attempts=1),
        resumes=[{}],
        expect=[("interrupted", "interrupted"), ("done", "done")],
    ),
    "answer-after-done": Scenario(
        lambda: ["first", "second"], resumes=[{"answer": "more"}], expect=[("done", "done"), ("done", "done")]
    ),
    "structured-corrected": Scenario(
        lambda: [final("f1", name="Paris", population="many"), final("f2", name="Paris", population=2_100_000)],
        output_type=City,
        expect=[("done", "done")],
    ),
    "structured-text-then-tool-round": Scenario(
        lambda: ["Paris, I think", [ADD_1_2], '```json\n{"name": "Paris", "population": 3}\n```'],
        output_type=City,
        expect=[("done", "done")],
    ),
    "structured-with-tools-and-approval": Scenario(
        lambda: [[ADD_1_2, *final("f", name="Paris", population="x")], final("g", name="Lyon", population=3)],
        output_type=City,
        config=LoopConfig(permission="ask"),
        resumes=[{"approve": True}],
        expect=[("interrupted", "interrupted"), ("done", "done")],
    ),
    "structured-retries-exhausted": Scenario(
        lambda: [final("f1", name="Paris"), "no", final("f3", population=1)],
        output_type=City,
        config=LoopConfig(output_retries=1),
        expect=[("done", "invalid_output")],
    ),
}


async def play(name: str, scenario: Scenario, engine: str, via_json: bool) -> list[dict[str, Any]]:
    agent = Agent(
        provider=MockProvider(scenario.script(), usage_per_call=scenario.usage),
        tools=scenario.tools,
        config=scenario.config,
        name=f"parity-{name}",
        engine=engine,  # type: ignore[arg-type]
        output_type=scenario.output_type,
    )
    result = await agent.arun("please help")
    views = [engine_view(result)]
    for kwargs in scenario.resumes:
        session = Session.model_validate_json(result.session.model_dump_json()) if via_json else result.session
        result = await agent.aresume(session, **kwargs)
        views.append(engine_view(result))
    if engine == "temporal":
        assert result.run_id
    else:
        assert result.run_id is None
    return views


# =========================================================================== parity


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_engines_agree(name):
    scenario = SCENARIOS[name]
    local = await play(name, scenario, "local", via_json=False)
    durable = await play(name, scenario, "temporal", via_json=False)
    assert [(v["status"], v["stop_reason"]) for v in local] == scenario.expect
    for i, (a, b) in enumerate(zip(local, durable, strict=True)):
        assert a == b, f"{name}: result {i} differs between engines"


@pytest.mark.parametrize("name", [n for n, s in SCENARIOS.items() if s.resumes])
async def test_engines_agree_after_json_round_trip(name):
    scenario = SCENARIOS[name]
    local = await play(name, scenario, "local", via_json=True)
    durable = await play(name, scenario, "temporal", via_json=True)
    assert [(v["status"], v["stop_reason"]) for v in local] == scenario.expect
    assert local == durable


async def test_parity_scenarios_have_the_expected_shape():
    """Guards the scenarios themselves (on the local engine), so parity is not vacuous."""
    v = await play("bad-tool-args", SCENARIOS["bad-tool-args"], "local", via_json=False)
    assert [s[2] for s in v[0]["steps"] if s[0] == "tool"] == [True, True, True, True]
    v = await play("deny-policy", SCENARIOS["deny-policy"], "local", via_json=False)
    assert [s[2] for s in v[0]["steps"] if s[0] == "tool"] == [True]
    v = await play("ask-human", SCENARIOS["ask-human"], "local", via_json=False)
    assert v[0]["interrupt"]["type"] == "need_input" and v[0]["interrupt"]["message"] == "Which city?"
    assert v[1]["steps"][0] == ("tool", "ask_human → Paris", False)
    v = await play("two-calls-one-turn", SCENARIOS["two-calls-one-turn"], "local", via_json=False)
    assert [s[1] for s in v[0]["steps"]] == ["tool calls: add, mul", "add → 3", "mul → 12", "3 and 12"]
    v = await play("structured-corrected", SCENARIOS["structured-corrected"], "local", via_json=False)
    assert v[0]["data"] == City(name="Paris", population=2_100_000)
    assert [s[2] for s in v[0]["steps"]] == [True, None]
    assert "population" in v[0]["messages"][2]["content"] and v[0]["messages"][2]["role"] == "tool"
    v = await play("structured-text-then-tool-round", SCENARIOS["structured-text-then-tool-round"], "local", via_json=False)
    assert v[0]["data"] == City(name="Paris", population=3)
    assert [m["role"] for m in v[0]["messages"]] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    v = await play("structured-with-tools-and-approval", SCENARIOS["structured-with-tools-and-approval"], "local",
                   via_json=False)
    assert v[0]["interrupt"]["tool_call"]["name"] == "add"
    assert v[1]["data"] == City(name="Lyon", population=3)
    assert [s[1] for s in v[1]["steps"]][0] == "add → 3"
    v = await play("structured-retries-exhausted", SCENARIOS["structured-retries-exhausted"], "local", via_json=False)
    assert v[0]["data"] is None and len(v[0]["steps"]) == 2


async def test_chat_parity():
    views = {}
    for kind in ("local", "temporal"):
        agent = Agent(provider=MockProvider(["one", [ADD_1_2], "two"]), tools=[add], system="sys", engine=kind)
        chat = agent.chat()
        first = engine_view(await chat.asend("hi"))
        second = engine_view(await chat.asend("and now?"))
        views[kind] = (first, second)
    assert views["local"][1]["output"] == "two"
    assert [m["role"] for m in views["local"][1]["messages"]] == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert views["local"] == views["temporal"]


def chunk_view(chunks: list[StreamChunk]) -> list[tuple]:
    return [(c.type, c.text, c.tool_calls, c.finish_reason, c.usage) for c in chunks]


@pytest.mark.parametrize("name", ["text-only", "tool-round", "two-calls-one-turn", "deny-policy", "max-iterations",
                                  "ask-approve", "ask-human", "retryable-error",
                                  "structured-corrected"])
async def test_astream_parity(name):
    scenario = SCENARIOS[name]
    streams = {}
    for kind in ("local", "temporal"):
        agent = Agent(provider=MockProvider(scenario.script()), tools=scenario.tools, config=scenario.config,
                      engine=kind)  # type: ignore[arg-type]
        streams[kind] = chunk_view([c async for c in agent.astream("please help")])
    assert streams["local"][-1][0] == "done"
    assert streams["local"] == streams["temporal"]


# --------------------------------------------------------------------------- resume forms the durable engine loses
# Both drivers must produce the same RunResult for the same script (DESIGN.md). `Agent.resume`
# on the durable engine maps an interrupt to exactly one signal and drops an `answer` that
# the local engine (machine.prepare_resume) uses.


async def test_resume_with_answer_after_error_interrupt_parity():
    """Local: answer= on an `error` interrupt adds a user message, then retries the model."""
    results = {}
    for kind in ("local", "temporal"):
        agent = Agent(provider=MockProvider([RateLimited("busy"), "fine"]), config=LoopConfig(model_attempts=1),
                      engine=kind)  # type: ignore[arg-type]
        r = await agent.arun("question")
        assert r.interrupt is not None and r.interrupt.type == "error"
        results[kind] = engine_view(await agent.aresume(r.session, answer="more context"))
    assert [(m["role"], m["content"]) for m in results["local"]["messages"]] == [
        ("user", "question"), ("user", "more context"), ("assistant", "fine")]
    assert results["temporal"] == results["local"]


async def test_resume_approve_with_answer_for_a_mixed_batch_parity():
    """Local: resume(approve=True, answer=...) approves the tools AND answers a pending ask_human."""
    results = {}
    for kind in ("local", "temporal"):
        script = [[tc("ask_human", "q", question="Which city?"), tc("add", "a", a=1, b=2)], "Paris and 3"]
        agent = Agent(provider=MockProvider(script), tools=[rein.ask_human, add],
                      config=LoopConfig(permission="ask"), engine=kind)  # type: ignore[arg-type]
        r = await agent.arun("go")
        assert r.interrupt is not None and r.interrupt.type == "need_approval"
        results[kind] = engine_view(await agent.aresume(r.session, approve=True, answer="Paris"))
    assert (results["local"]["status"], results["local"]["output"]) == ("done", "Paris and 3")
    assert results["temporal"] == results["local"]


# =========================================================================== the durable engine


def test_temporal_sync_run_from_successive_asyncio_runs():
    agent = Agent(provider=EchoProvider(prefix="echo: "), engine="temporal")
    first = agent.run("one")
    second = agent.run("two")
    third = asyncio.run(agent.arun("three"))
    assert [first.output, second.output, third.output] == ["echo: one", "echo: two", "echo: three"]
    assert len({first.run_id, second.run_id, third.run_id}) == 3


def test_temporal_run_from_8_threads():
    agent = Agent(provider=EchoProvider(prefix="echo: "), engine="temporal")
    prompts = [f"thread-{i}" for i in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(agent.run, prompts))
    assert [r.output for r in results] == [f"echo: {p}" for p in prompts]
    assert all(r.status == "done" and r.run_id for r in results)
    assert len({r.run_id for r in results}) == 8


@pytest.mark.parametrize("engine", ["local", "temporal"])
@pytest.mark.parametrize("name, kind", [("ask-approve", "need_approval"), ("ask-human", "need_input"),
                                        ("retryable-error", "error")])
async def test_astream_says_why_the_run_waits(engine, name, kind):
    """A run that pauses for a person ends its stream with an `interrupt` chunk (then `done`), not silently."""
    scenario = SCENARIOS[name]
    agent = Agent(provider=MockProvider(scenario.script()), tools=scenario.tools, config=scenario.config,
                  engine=engine)  # type: ignore[arg-type]
    chunks = [c async for c in agent.astream("please help")]
    assert [c.type for c in chunks[-2:]] == ["interrupt", "done"]
    assert chunks[-2].data is not None and chunks[-2].data["type"] == kind
    assert chunks[-1].finish_reason == "interrupted"


async def test_temporal_astream_yields_text_then_one_done():
    agent = Agent(provider=MockProvider([[ADD_1_2], "three"]), tools=[add], engine="temporal")
    chunks = [c async for c in agent.astream("go")]
    assert chunks[-1].type == "done"
    assert sum(c.type == "done" for c in chunks) == 1
    assert chunks[-1].finish_reason == "done"
    assert chunks[-1].usage == Usage(input_tokens=2, output_tokens=2)
    texts = [c.text for c in chunks if c.type == "text"]
    assert len(texts) > 1 and "".join(texts) == "three"
    tool_chunks = [c for c in chunks if c.type == "tool_calls"]
    assert len(tool_chunks) == 1 and tool_chunks[0].tool_calls == [ADD_1_2]
    assert chunks.index(tool_chunks[0]) < chunks.index(next(c for c in chunks if c.type == "text"))


class PartialThenFail:
    """Streams "ab", then drops the connection (429) on the first attempt; the retry streams "abc"."""

    def __init__(self) -> None:
        self.attempts = 0

    async def complete(self, messages, tools=None, **kwargs):
        text = "".join([c.text async for c in self.stream(messages, tools) if c.type == "text"])
        return Completion(message=Message(role="assistant", content=text), finish_reason="stop")

    async def stream(self, messages, tools=None, **kwargs):
        self.attempts += 1
        yield StreamChunk(type="text", text="ab")
        if self.attempts == 1:
            raise RateLimited("connection dropped mid-stream")
        yield StreamChunk(type="text", text="c")
        yield StreamChunk(type="done", finish_reason="stop", usage=Usage())


async def test_temporal_astream_text_matches_the_answer_when_a_streamed_attempt_is_retried():
    """Streaming is observation: the text chunks a caller sees must add up to the recorded answer.

    A model-call activity that fails after streaming part of an answer is retried by
    Temporal, and the retry's chunks are published again on top of the failed attempt's.
    """
    provider = PartialThenFail()
    agent = Agent(provider=provider, config=LoopConfig(model_attempts=2, model_retry_interval_s=0.1), engine="temporal")
    chunks = [c async for c in agent.astream("go")]
    assert provider.attempts == 2
    assert chunks[-1].type == "done" and chunks[-1].finish_reason == "done"
    assert "".join(c.text for c in chunks if c.type == "text") == "abc"


def test_temporal_fatal_provider_error_raises_run_failed_with_the_providers_error():
    """The exception object stays in the worker (maybe another process); its type and message reach the caller."""
    agent = Agent(provider=MockProvider([AuthFailed("bad key")]), engine="temporal")
    with pytest.raises(RunFailed, match="bad key") as info:
        agent.run("go")
    assert info.value.error_type == "AuthFailed"
    assert "AuthFailed: bad key" in info.value.message


def test_temporal_retryable_error_interrupts_after_retries_and_resume_retries():
    provider = OutageProvider(RateLimited, "rate limited, try later")
    agent = Agent(provider=provider, engine="temporal", config=LoopConfig(model_attempts=2, model_retry_interval_s=0.1))
    r = agent.run("go")
    assert r.status == "interrupted" and r.stop_reason == "interrupted"
    assert r.interrupt.type == "error"
    assert "rate limited" in r.interrupt.message
    assert r.session.stage == rein.Stage.CALL_MODEL
    assert provider.calls == 2  # model_attempts
    assert r.run_id
    provider.failing = False
    r2 = agent.resume(r.session)
    assert (r2.status, r2.output, r2.stop_reason) == ("done", "recovered", "done")
    assert r2.run_id == r.run_id  # the same workflow, woken by the retry signal
    assert r2.usage == Usage(input_tokens=3, output_tokens=4)
    assert [s.kind for s in r2.steps] == ["model"]
    assert provider.calls == 3


def test_temporal_resume_continues_the_same_workflow():
    agent = Agent(provider=MockProvider([[ADD_1_2], "3"]), tools=[add], config=LoopConfig(permission="ask"), engine="temporal")
    r = agent.run("go")
    assert r.status == "interrupted" and r.run_id
    with settings.override(identity="dana@ops.example"):
        r2 = agent.resume(r.session)
    assert r2.output == "3" and r2.run_id == r.run_id
    assert [(d.approved, d.approver) for d in r2.session.decisions] == [(True, "dana@ops.example")]  # who decided
    # The approval went as the validated update every client sends, not as a signal.
    eng = engine.Engine._instance
    assert eng is not None and eng.client is not None
    history = asyncio.run(eng.submit(eng.client.get_workflow_handle(r.run_id).fetch_history()))
    accepted = [e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
                for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    assert [name for name in accepted if name != "rein.wait"] == ["rein.approve"]
    assert not [e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")]


def test_temporal_resume_refuses_a_decision_the_run_does_not_take():
    """A misfit is rejected to the caller at once, not ignored while the caller waits for a pause."""
    agent = Agent(provider=MockProvider([[ADD_1_2], "3"]), tools=[add], config=LoopConfig(permission="ask"),
                  engine="temporal", name="engine-misfit")
    r = agent.run("go")
    eng = engine.Engine._instance
    assert eng is not None and r.run_id
    with pytest.raises(DecisionRejected, match="not waiting after an error"):
        asyncio.run(eng.submit(eng.decide(r.run_id, [("retry", {})])))
    assert agent.resume(r.session).output == "3"


def test_temporal_run_id_is_set_and_local_is_not():
    durable = Agent(provider=MockProvider(["hi"]), engine="temporal", name="ids").run("x")
    local = Agent(provider=MockProvider(["hi"]), engine="local", name="ids").run("x")
    assert durable.run_id and durable.run_id.startswith("ids-")
    assert local.run_id is None
    assert durable.output == local.output == "hi"


def test_a_new_agent_of_a_dropped_ones_name_is_served():
    """Dropping an Agent shuts its in-process worker down; a new Agent of the same name registered before
    that shutdown ends needs a worker on the same queue, which Temporal's core refuses while the old one
    is registered. The run then waited forever, unserved (seen once in a whole-suite run)."""
    first = Agent(provider=MockProvider(["one"]), engine="temporal", name="reborn")
    assert first.run("go").output == "one"
    second = Agent(provider=MockProvider(["two"]), engine="temporal", name="reborn")
    eng = engine.Engine._instance
    assert eng is not None

    def dropped_then_reborn() -> None:  # the interleaving, in one loop callback: no shutdown step between
        del eng.agents["reborn"]
        eng._retire("reborn")
        eng.agents["reborn"] = second
        second._engine_key = "reborn"  # type: ignore[attr-defined]
        eng._serve("reborn", second)

    eng.loop.call_soon_threadsafe(dropped_then_reborn)
    result = asyncio.run(asyncio.wait_for(second.arun("go"), 60))
    assert result.output == "two"
    del first

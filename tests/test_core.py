"""Core behaviour through the public API: the seed examples (000-002), the in-process
runner behind `Agent(engine="local")`, `rein.local.loop` and the pure `rein.core.machine`.

Durable-engine parity lives in tests/test_engines.py.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pydantic import ValidationError

import rein
from rein import (
    Agent,
    Completion,
    FallbackProvider,
    Interrupt,
    LiteLLMProvider,
    LoopConfig,
    Message,
    MockProvider,
    Provider,
    RunResult,
    Session,
    Stage,
    Step,
    StreamChunk,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from rein.blueprint.providers.fallback import is_retryable
from rein.blueprint.providers.mock import EXHAUSTED_TEXT
from rein.blueprint.tools import ToolRegistry
from rein.core import machine
from rein.core.circuit import tripped_breaker
from tests.support.providers import AuthFailed, EchoProvider, RateLimited
from tests.support.tools import tc

# --------------------------------------------------------------------------- helpers


class Counting:
    """Wraps a provider and counts `complete` calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    async def complete(self, messages, tools=None, **kwargs):
        self.calls += 1
        return await self.inner.complete(messages, tools, **kwargs)

    async def stream(self, messages, tools=None, **kwargs):
        self.calls += 1
        async for chunk in self.inner.stream(messages, tools, **kwargs):
            yield chunk


def make_tools() -> tuple[list, list[tuple[str, tuple]]]:
    """An `add` and a `mul` tool that record every execution."""
    ran: list[tuple[str, tuple]] = []

    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append(("add", (a, b)))
        return a + b

    def mul(a: int, b: int) -> int:
        """Multiply two integers."""
        ran.append(("mul", (a, b)))
        return a * b

    return [add, mul], ran


def local_agent(script: list, config: LoopConfig | None = None, tools: list | None = None, **kw: Any) -> Agent:
    return Agent(provider=MockProvider(script, **kw), tools=tools, config=config, engine="local")


def roundtrip(session: Session) -> Session:
    return Session.model_validate_json(session.model_dump_json())


def kinds(result: RunResult) -> list[str]:
    return [s.kind for s in result.steps]


def tool_messages_of(session: Session) -> list[Message]:
    return [m for m in session.messages if m.role == "tool"]


# =========================================================================== seed 000: IR


def test_seed000_toolcall_example_and_round_trip():
    call = ToolCall(id="1", name="add", arguments={"a": 1, "b": 2})
    assert call.arguments == {"a": 1, "b": 2}
    assert ToolCall.model_validate_json(call.model_dump_json()) == call
    with pytest.raises(ValidationError):
        ToolCall(id="1", name="add")  # arguments are required


def test_seed000_toolresult_defaults_and_round_trip():
    res = ToolResult(tool_call_id="1", content="3")
    assert res.is_error is False
    err = ToolResult(tool_call_id="1", content="boom", is_error=True)
    assert ToolResult.model_validate_json(err.model_dump_json()) == err


def test_seed000_message_examples_and_round_trip():
    user = Message(role="user", content="你好")
    tool_msg = Message(role="tool", tool_call_id="1", content="结果")
    asking = Message(role="assistant", tool_calls=[ToolCall(id="1", name="add", arguments={"a": 1, "b": 2})])
    assert user.tool_calls is None and user.tool_call_id is None
    assert tool_msg.tool_call_id == "1" and tool_msg.content == "结果"
    assert asking.content == ""
    for m in (user, tool_msg, asking, Message(role="system", content="sys")):
        assert Message.model_validate_json(m.model_dump_json()) == m
    # non-ASCII survives the JSON round trip unchanged
    assert json.loads(user.model_dump_json())["content"] == "你好"
    with pytest.raises(ValidationError):
        Message(role="robot", content="x")


def test_seed000_usage_add():
    total = Usage(input_tokens=10) + Usage(input_tokens=5)
    assert total.input_tokens == 15
    assert total.output_tokens == 0
    assert total.cost_usd is None
    assert (Usage(cost_usd=0.5) + Usage()).cost_usd == 0.5
    assert (Usage(input_tokens=1, output_tokens=2, cost_usd=0.25) + Usage(output_tokens=3, cost_usd=0.5)) == Usage(
        input_tokens=1, output_tokens=5, cost_usd=0.75
    )
    a = Usage(input_tokens=1)
    a + Usage(input_tokens=1)
    assert a.input_tokens == 1  # + returns a new object
    with pytest.raises(TypeError):
        Usage() + 1  # type: ignore[operator]
    assert Usage.model_validate_json(total.model_dump_json()) == total


def test_seed000_completion_toolspec_streamchunk():
    comp = Completion(message=Message(role="assistant", content="hi"), finish_reason="stop")
    assert comp.usage == Usage()
    assert Completion.model_validate_json(comp.model_dump_json()) == comp
    for reason in ("stop", "tool_calls", "length", "error"):
        Completion(message=Message(role="assistant"), finish_reason=reason)
    with pytest.raises(ValidationError):
        Completion(message=Message(role="assistant"), finish_reason="finished")

    spec = ToolSpec(name="add", description="Add.", parameters={"type": "object", "properties": {}})
    assert ToolSpec.model_validate_json(spec.model_dump_json()) == spec

    chunk = StreamChunk(type="text", text="a")
    assert chunk.tool_calls is None and chunk.usage is None and chunk.finish_reason is None
    done = StreamChunk(type="done", usage=Usage(input_tokens=1), finish_reason="done")
    assert StreamChunk.model_validate_json(done.model_dump_json()) == done
    with pytest.raises(ValidationError):
        StreamChunk(type="delta")


async def test_seed000_astream_example_prints_the_answer():
    agent = local_agent(["答案是 3"])
    printed = []
    async for chunk in agent.astream("..."):
        if chunk.type == "text":
            printed.append(chunk.text)
    assert "".join(printed) == "答案是 3"


# =========================================================================== seed 001: config, state, result


def test_seed001_loopconfig_defaults():
    c = LoopConfig()
    assert (c.max_iterations, c.max_tokens, c.timeout_s) == (50, 200_000, 120)
    assert (c.detect_loops, c.repeat_threshold, c.permission) == (True, 3, "allow")
    assert LoopConfig.model_validate_json(c.model_dump_json()) == c


def test_seed001_loopconfig_overrides_on_agent():
    agent = Agent("anthropic/...", config=LoopConfig(max_tokens=50_000, permission="ask"))
    assert agent.config.max_tokens == 50_000
    assert agent.config.permission == "ask"
    assert agent.config.max_iterations == 50  # untouched fields keep their defaults
    assert agent.model == "anthropic/..."
    with pytest.raises(ValidationError):
        LoopConfig(permission="sometimes")


def test_seed001_runresult_str_and_fields(capsys):
    agent = local_agent(["the answer"])
    result = agent.run("...")
    print(result)
    assert capsys.readouterr().out == "the answer\n"
    assert str(result) == result.output == "the answer"
    assert result.status == "done" and result.interrupt is None
    assert result.elapsed_s is not None and result.elapsed_s >= 0
    assert [(s.index, s.kind, s.summary) for s in result.steps] == [(0, "model", "the answer")]
    assert result.run_id is None  # in-process runs have no workflow id
    empty = RunResult(status="done", output=None, session=Session())
    assert str(empty) == ""
    assert RunResult.model_validate_json(result.model_dump_json()) == result


def test_seed001_interrupt_example():
    tools, _ = make_tools()
    agent = local_agent([[tc("add", a=1, b=2)], "3"], LoopConfig(permission="ask"), tools)
    r = agent.run("...")
    assert r.status == "interrupted"
    itr = r.interrupt
    assert isinstance(itr, Interrupt)
    assert (itr.type, itr.tool_call) == ("need_approval", tc("add", a=1, b=2))
    assert "add" in itr.message
    assert Interrupt.model_validate_json(itr.model_dump_json()) == itr


def test_seed001_step_fields():
    tools, _ = make_tools()
    r = local_agent([[tc("add", a=1, b=2)], "3"], tools=tools).run("...")
    model_step, tool_step, final = r.steps
    assert isinstance(model_step, Step)
    assert [s.index for s in r.steps] == [0, 1, 2]
    assert model_step.tool_calls == [tc("add", a=1, b=2)] and model_step.is_error is None
    assert model_step.usage == Usage(input_tokens=1, output_tokens=1)
    assert tool_step.kind == "tool" and tool_step.is_error is False and tool_step.tool_calls is None
    assert tool_step.summary.startswith("add") and tool_step.summary.endswith("3")
    assert final.tool_calls is None and final.summary == "3"
    assert all(s.duration_s is not None for s in r.steps)


def test_seed001_session_json_round_trip_mid_run():
    tools, _ = make_tools()
    r = local_agent([[tc("add", a=1, b=2)], "3"], LoopConfig(permission="ask"), tools).run("...")
    session = r.session
    assert session.stage == Stage.RUN_TOOLS and session.pending_tool_calls
    raw = session.model_dump_json()
    session2 = Session.model_validate_json(raw)
    assert session2 == session
    assert session2.stage is Stage.RUN_TOOLS
    assert session2.pending_tool_calls == [tc("add", a=1, b=2)]
    assert session2.iteration == 1 and session2.repeat_count == 1 and session2.last_signature


def test_seed001_stage_is_a_string():
    assert Stage.CALL_MODEL == "call_model"
    assert Stage.RUN_TOOLS == "run_tools"
    assert Stage.DONE == "done"
    assert isinstance(Stage.DONE, str)
    assert json.loads(Session(stage=Stage.RUN_TOOLS).model_dump_json())["stage"] == "run_tools"
    assert Session.model_validate({"stage": "done"}).stage is Stage.DONE


async def test_seed001_stage_transitions_one_step_at_a_time():
    tools, ran = make_tools()
    registry = ToolRegistry(tools)
    provider = MockProvider([[tc("add", a=2, b=3)], "5"])
    session = machine.new_session("add 2 and 3")
    assert session.stage == Stage.CALL_MODEL
    session, steps, itr = await rein.step(session, provider, registry)
    assert (session.stage, [s.kind for s in steps], itr) == (Stage.RUN_TOOLS, ["model"], None)
    session, steps, itr = await rein.step(session, provider, registry)
    assert (session.stage, [s.kind for s in steps], itr) == (Stage.CALL_MODEL, ["tool"], None)
    assert ran == [("add", (2, 3))]
    session, steps, itr = await rein.step(session, provider, registry)
    assert session.stage == Stage.DONE and session.done and session.stop_reason == "done"


# =========================================================================== seed 002: providers


def test_seed002_my_provider_example():
    class MyProvider:
        async def complete(self, messages, tools=None, **kw):
            return Completion(message=Message(role="assistant", content="答案"), finish_reason="stop", usage=Usage())

        async def stream(self, messages, tools=None, **kw):
            yield  # an async generator, as in the seed

    assert isinstance(MyProvider(), Provider)
    agent = Agent(provider=MyProvider(), engine="local")
    result = agent.run("问题")
    assert result.output == "答案"
    assert result.usage == Usage()


def test_seed002_object_without_stream_is_not_a_provider():
    class OnlyComplete:
        async def complete(self, messages, tools=None, **kw): ...

    assert not isinstance(OnlyComplete(), Provider)


def test_seed002_mockprovider_script_example():
    calls = []

    def add(a: int, b: int) -> int:
        calls.append((a, b))
        return a + b

    agent = Agent(
        provider=MockProvider(
            [
                [ToolCall(id="1", name="add", arguments={"a": 1, "b": 2})],  # 第1次:调工具
                "答案是 3",  # 第2次:文本
            ]
        ),
        tools=[add],
        engine="local",
    )
    result = agent.run("1+2?")
    assert result.output == "答案是 3"
    assert calls == [(1, 2)]
    assert kinds(result) == ["model", "tool", "model"]
    assert result.session.messages[2] == Message(role="tool", tool_call_id="1", content="3")
    assert result.usage == Usage(input_tokens=2, output_tokens=2)  # default 1/1 per call


async def test_seed002_mockprovider_exhausted_and_usage_per_call():
    p = MockProvider(["one"], usage_per_call=Usage(input_tokens=7, output_tokens=3))
    first = await p.complete([])
    assert (first.message.content, first.finish_reason, first.usage) == ("one", "stop", Usage(input_tokens=7, output_tokens=3))
    for _ in range(3):  # never hangs: a closing text, forever
        closing = await p.complete([])
        assert closing.message.content == EXHAUSTED_TEXT and closing.finish_reason == "stop"


async def test_seed002_mockprovider_stream_is_per_character():
    p = MockProvider(["hey", [tc("add", a=1, b=2)]])
    chunks = [c async for c in p.stream([])]
    assert [(c.type, c.text) for c in chunks[:-1]] == [("text", "h"), ("text", "e"), ("text", "y")]
    assert chunks[-1].type == "done" and chunks[-1].finish_reason == "stop"
    chunks = [c async for c in p.stream([])]
    assert [c.type for c in chunks] == ["tool_calls", "done"]
    assert chunks[0].tool_calls == [tc("add", a=1, b=2)]
    assert chunks[1].finish_reason == "tool_calls"


def test_seed002_litellm_provider_construction_is_offline():
    p = LiteLLMProvider("anthropic/claude-opus-4-8", temperature=0.7)
    assert p.model == "anthropic/claude-opus-4-8"
    assert p.default_params == {"temperature": 0.7}


async def test_seed002_fallback_provider_construction_and_switch():
    class Primary:
        def __init__(self, exc: Exception):
            self.exc, self.calls = exc, 0

        async def complete(self, messages, tools=None, **kw):
            self.calls += 1
            raise self.exc

        async def stream(self, messages, tools=None, **kw):
            raise self.exc
            yield  # pragma: no cover

    primary = Primary(RateLimited("busy"))
    fp = FallbackProvider([primary, MockProvider(["备用答案"])])
    assert fp.max_retries_per_provider == 1 and fp.base_delay == 0.5
    assert isinstance(fp, Provider)

    fast = FallbackProvider([primary, MockProvider(["备用答案"])], base_delay=0)
    out = await fast.complete([Message(role="user", content="q")])
    assert out.message.content == "备用答案"
    assert primary.calls == 2  # one try plus max_retries_per_provider=1 extra

    fatal = Primary(AuthFailed("bad key"))
    backup = Counting(MockProvider(["never"]))
    with pytest.raises(AuthFailed):
        await FallbackProvider([fatal, backup], base_delay=0).complete([])
    assert fatal.calls == 1 and backup.calls == 0

    with pytest.raises(ValueError):
        FallbackProvider([])


def test_seed002_agent_with_fallback_builds_a_chain():
    agent = Agent("anthropic/x", fallback=["openai/gpt-4o"], engine="local")
    provider = agent._resolve_provider()
    assert isinstance(provider, FallbackProvider)
    assert [p.model for p in provider.providers] == ["anthropic/x", "openai/gpt-4o"]


def test_seed002_agent_without_model_or_provider_is_a_clear_error():
    with pytest.raises(ValueError, match="provider"):
        Agent(engine="local").run("hi")


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (RateLimited("x"), True),
        (AuthFailed("x"), False),
        (type("E", (Exception,), {"status_code": 503})("x"), True),
        (type("E", (Exception,), {"status_code": 400})("x"), False),
        (type("RateLimitError", (Exception,), {})("x"), True),
        (type("APITimeoutError", (Exception,), {})("x"), True),
        (type("AuthenticationError", (Exception,), {})("x"), False),
        (ValueError("who knows"), False),
    ],
)
def test_seed002_is_retryable(exc, expected):
    assert is_retryable(exc) is expected


# =========================================================================== breakers


ALWAYS_ADD = [[tc("add", a=1, b=2)]] * 10


def test_breaker_max_iterations():
    tools, ran = make_tools()
    r = local_agent(ALWAYS_ADD, LoopConfig(max_iterations=2), tools).run("go")
    assert r.status == "done" and r.stop_reason == "max_iterations"
    assert r.session.iteration == 2
    assert kinds(r) == ["model", "tool", "model"]
    assert r.output is None
    assert len(ran) == 1  # the second batch stays pending, unexecuted
    assert r.session.pending_tool_calls == [tc("add", a=1, b=2)]


def test_breaker_max_tokens():
    tools, _ = make_tools()
    provider = Counting(MockProvider(ALWAYS_ADD, usage_per_call=Usage(input_tokens=5, output_tokens=5)))
    agent = Agent(provider=provider, tools=tools, config=LoopConfig(max_tokens=20), engine="local")
    r = agent.run("go")
    assert r.stop_reason == "max_tokens"
    assert provider.calls == 2
    assert r.usage.total_tokens == 20 and r.session.iteration == 2


def test_breaker_timeout_zero_stops_before_the_first_call():
    provider = Counting(MockProvider(["never"]))
    r = Agent(provider=provider, config=LoopConfig(timeout_s=0), engine="local").run("go")
    assert (r.status, r.stop_reason, r.output, r.steps) == ("done", "timeout", None, [])
    assert provider.calls == 0


def test_breaker_loop_detected():
    tools, ran = make_tools()
    r = local_agent(ALWAYS_ADD, LoopConfig(repeat_threshold=3), tools).run("go")
    assert r.stop_reason == "loop_detected"
    assert len(ran) == 2
    assert r.session.repeat_count == 3 and r.session.iteration == 3


def test_loop_detection_off_and_alternating_calls_do_not_trip():
    tools, ran = make_tools()
    r = local_agent(ALWAYS_ADD[:4] + ["end"], LoopConfig(detect_loops=False), tools).run("go")
    assert (r.stop_reason, r.output, len(ran)) == ("done", "end", 4)
    alternating = [[tc("add", a=1, b=2)], [tc("mul", a=1, b=2)]] * 3 + ["end"]
    r = local_agent(alternating, LoopConfig(repeat_threshold=2), tools).run("go")
    assert r.stop_reason == "done" and r.session.repeat_count == 1


def test_loop_signature_ignores_call_ids():
    tools, ran = make_tools()
    script = [[tc("add", cid=str(i), a=1, b=2)] for i in range(5)]
    r = local_agent(script, LoopConfig(repeat_threshold=2), tools).run("go")
    assert r.stop_reason == "loop_detected" and len(ran) == 1


def _session(iteration=0, tokens=0, repeats=0) -> Session:
    return Session(iteration=iteration, usage=Usage(input_tokens=tokens), repeat_count=repeats)


def test_breaker_order_when_several_trip():
    cfg = LoopConfig(max_iterations=5, max_tokens=100, timeout_s=1, repeat_threshold=3)
    assert tripped_breaker(_session(5, 100, 3), cfg, 1.0) == "max_iterations"
    assert tripped_breaker(_session(4, 100, 3), cfg, 1.0) == "max_tokens"
    assert tripped_breaker(_session(4, 99, 3), cfg, 1.0) == "timeout"
    assert tripped_breaker(_session(4, 99, 3), cfg, 0.99) == "loop_detected"
    assert tripped_breaker(_session(4, 99, 2), cfg, 0.99) is None


def test_budget_breaker_sits_between_tokens_and_timeout():
    cfg = LoopConfig(max_tokens=100, max_cost_usd=0.5, timeout_s=1)
    spent = Session(usage=Usage(input_tokens=100, cost_usd=0.5))
    assert tripped_breaker(spent, cfg, 1.0) == "max_tokens"
    spent.usage = Usage(input_tokens=99, cost_usd=0.5)
    assert tripped_breaker(spent, cfg, 1.0) == "budget"
    spent.usage = Usage(input_tokens=99, cost_usd=0.49)
    assert tripped_breaker(spent, cfg, 1.0) == "timeout"
    unpriced = Session(usage=Usage(input_tokens=99))  # no known cost: a budget cannot trip
    assert tripped_breaker(unpriced, cfg, 0.5) is None


def test_breaker_budget_through_a_run():
    tools, ran = make_tools()
    provider = Counting(MockProvider(ALWAYS_ADD, usage_per_call=Usage(input_tokens=5, cost_usd=0.25)))
    agent = Agent(provider=provider, tools=tools, config=LoopConfig(max_cost_usd=0.5), engine="local")
    r = agent.run("go")
    assert (r.stop_reason, provider.calls, r.usage.cost_usd) == ("budget", 2, 0.5)


def test_breakers_can_be_disabled():
    cfg = LoopConfig(max_tokens=None, timeout_s=None, detect_loops=False, repeat_threshold=1)
    assert tripped_breaker(_session(0, 10**9, 99), cfg, 10**9) is None


def test_breaker_order_through_a_run():
    tools, ran = make_tools()
    # after call 1: iteration 1 >= 1 AND tokens 2 >= 2 AND repeat 1 >= 1
    both = LoopConfig(max_iterations=1, max_tokens=2, repeat_threshold=1)
    assert local_agent(ALWAYS_ADD, both, tools).run("go").stop_reason == "max_iterations"
    tokens_and_loop = LoopConfig(max_tokens=2, repeat_threshold=1)
    assert local_agent(ALWAYS_ADD, tokens_and_loop, tools).run("go").stop_reason == "max_tokens"
    assert ran == []  # every breaker tripped before the first tool batch


# =========================================================================== permissions


def test_permission_allow_runs_tools():
    tools, ran = make_tools()
    r = local_agent([[tc("add", a=2, b=2)], "4"], LoopConfig(permission="allow"), tools).run("go")
    assert ran == [("add", (2, 2))]
    assert r.output == "4" and [s.is_error for s in r.steps if s.kind == "tool"] == [False]


def test_permission_deny_feeds_errors_back_and_continues():
    tools, ran = make_tools()
    script = [[tc("add", cid="a", a=1, b=2), tc("mul", cid="b", a=3, b=4)], "I could not use the tools"]
    r = local_agent(script, LoopConfig(permission="deny"), tools).run("go")
    assert ran == []
    assert r.status == "done" and r.output == "I could not use the tools"
    assert [(s.kind, s.is_error) for s in r.steps] == [("model", None), ("tool", True), ("tool", True), ("model", None)]
    results = tool_messages_of(r.session)
    assert [m.tool_call_id for m in results] == ["a", "b"]
    assert all("denied" in m.content.lower() for m in results)
    assert "'add'" in results[0].content and "'mul'" in results[1].content


def test_permission_ask_interrupts_before_running():
    tools, ran = make_tools()
    call = tc("add", a=1, b=2)
    r = local_agent([[call], "3"], LoopConfig(permission="ask"), tools).run("go")
    assert r.status == "interrupted" and r.stop_reason == "interrupted"
    assert r.interrupt.type == "need_approval" and r.interrupt.tool_call == call
    assert r.session.stage == Stage.RUN_TOOLS
    assert r.session.pending_tool_calls == [call]
    assert r.session.done is False
    assert ran == []
    assert kinds(r) == ["model"]


# =========================================================================== resume


@pytest.fixture(params=[False, True], ids=["live", "json"])
def via_json(request) -> bool:
    return request.param


def _maybe_roundtrip(session: Session, via: bool) -> Session:
    return roundtrip(session) if via else session


def test_resume_approve_runs_the_tool(via_json):
    tools, ran = make_tools()
    agent = local_agent([[tc("add", a=1, b=2)], "3"], LoopConfig(permission="ask"), tools)
    r = agent.run("go")
    r2 = agent.resume(_maybe_roundtrip(r.session, via_json), approve=True)
    assert ran == [("add", (1, 2))]
    assert (r2.status, r2.output, r2.stop_reason) == ("done", "3", "done")
    assert kinds(r2) == ["tool", "model"] and r2.steps[0].is_error is False
    assert tool_messages_of(r2.session) == [Message(role="tool", tool_call_id="1", content="3")]
    assert r2.usage == Usage(input_tokens=2, output_tokens=2)  # cumulative over run + resume
    assert r2.session.iteration == 2


def test_resume_deny_writes_an_error_and_the_model_continues(via_json):
    tools, ran = make_tools()
    agent = local_agent([[tc("add", a=1, b=2)], "fine, no tools"], LoopConfig(permission="ask"), tools)
    r = agent.run("go")
    r2 = agent.resume(_maybe_roundtrip(r.session, via_json), approve=False)
    assert ran == []
    assert (r2.status, r2.output) == ("done", "fine, no tools")
    assert [(s.kind, s.is_error) for s in r2.steps] == [("tool", True), ("model", None)]
    (msg,) = tool_messages_of(r2.session)
    assert msg.tool_call_id == "1" and "denied" in msg.content.lower() and "add" in msg.content
    assert r2.session.decisions[-1].approved is False


def test_resume_with_answer_on_a_finished_run_adds_a_user_message(via_json):
    agent = local_agent(["first answer", "second answer"])
    r = agent.run("question")
    assert r.status == "done"
    r2 = agent.resume(_maybe_roundtrip(r.session, via_json), answer="tell me more")
    assert (r2.status, r2.output, r2.stop_reason) == ("done", "second answer", "done")
    assert [(m.role, m.content) for m in r2.session.messages] == [
        ("user", "question"),
        ("assistant", "first answer"),
        ("user", "tell me more"),
        ("assistant", "second answer"),
    ]


def test_resume_multi_round_approval(via_json):
    tools, ran = make_tools()
    script = [[tc("add", cid="1", a=1, b=2)], [tc("mul", cid="2", a=3, b=4)], "all done"]
    agent = local_agent(script, LoopConfig(permission="ask"), tools)
    r = agent.run("go")
    assert r.interrupt.tool_call.name == "add"
    r = agent.resume(_maybe_roundtrip(r.session, via_json))
    assert r.status == "interrupted" and r.interrupt.type == "need_approval"
    assert r.interrupt.tool_call.name == "mul"
    assert ran == [("add", (1, 2))]
    r = agent.resume(_maybe_roundtrip(r.session, via_json))
    assert (r.status, r.output) == ("done", "all done")
    assert ran == [("add", (1, 2)), ("mul", (3, 4))]
    assert [m.content for m in tool_messages_of(r.session)] == ["3", "12"]


async def test_aresume_is_the_async_form():
    tools, ran = make_tools()
    agent = local_agent([[tc("add", a=1, b=2)], "3"], LoopConfig(permission="ask"), tools)
    r = await agent.arun("go")
    r2 = await agent.aresume(r.session)
    assert r2.output == "3" and ran == [("add", (1, 2))]


# =========================================================================== ask_human


def test_ask_human_interrupts_and_the_answer_becomes_the_tool_result(via_json):
    tools, ran = make_tools()
    script = [[tc("ask_human", cid="q1", question="What is your name?")], "Hello, Ada"]
    agent = local_agent(script, tools=[rein.ask_human, *tools])
    assert "ask_human" in [s.name for s in agent.registry.specs()]
    r = agent.run("greet me")
    assert r.status == "interrupted"
    assert r.interrupt.type == "need_input"
    assert r.interrupt.message == "What is your name?"
    assert r.interrupt.tool_call.id == "q1"
    assert r.session.stage == Stage.RUN_TOOLS
    r2 = agent.resume(_maybe_roundtrip(r.session, via_json), answer="x")
    assert (r2.status, r2.output) == ("done", "Hello, Ada")
    assert tool_messages_of(r2.session) == [Message(role="tool", tool_call_id="q1", content="x")]
    assert [(s.kind, s.summary, s.is_error) for s in r2.steps][0] == ("tool", "ask_human → x", False)
    assert ran == []


def test_ask_human_with_ask_permission_does_not_need_approval():
    script = [[tc("ask_human", cid="q1", question="Which city?")], "Paris then"]
    agent = local_agent(script, LoopConfig(permission="ask"), tools=[rein.ask_human])
    r = agent.run("weather")
    assert r.interrupt.type == "need_input"
    assert agent.resume(r.session, answer="Paris").output == "Paris then"


# =========================================================================== provider errors


def test_retryable_provider_error_interrupts_and_resume_retries(via_json):
    provider = Counting(MockProvider([RateLimited("slow down"), "recovered"]))
    agent = Agent(provider=provider, engine="local")
    r = agent.run("go")
    assert r.status == "interrupted" and r.stop_reason == "interrupted"
    assert r.interrupt.type == "error"
    assert "RateLimited" in r.interrupt.message and "slow down" in r.interrupt.message
    assert r.session.stage == Stage.CALL_MODEL
    assert r.session.iteration == 0 and r.steps == []
    r2 = agent.resume(_maybe_roundtrip(r.session, via_json))
    assert (r2.status, r2.output) == ("done", "recovered")
    assert provider.calls == 2


def test_fatal_provider_error_raises_out_of_run():
    agent = Agent(provider=MockProvider([AuthFailed("bad key")]), engine="local")
    with pytest.raises(AuthFailed, match="bad key"):
        agent.run("go")


# =========================================================================== astream


async def test_astream_chunk_shapes():
    tools, ran = make_tools()
    agent = local_agent([[tc("add", a=1, b=2)], "abc"], tools=tools)
    chunks = [c async for c in agent.astream("go")]
    assert [c.type for c in chunks] == ["tool_calls", "text", "text", "text", "done"]
    assert chunks[0].tool_calls == [tc("add", a=1, b=2)]
    assert [c.text for c in chunks if c.type == "text"] == ["a", "b", "c"]
    done = [c for c in chunks if c.type == "done"]
    assert len(done) == 1 and done[0] is chunks[-1]
    assert done[0].finish_reason == "done"
    assert done[0].usage == Usage(input_tokens=2, output_tokens=2)  # cumulative over both calls
    assert ran == [("add", (1, 2))]


async def test_astream_done_chunk_carries_the_breaker():
    tools, _ = make_tools()
    agent = local_agent(ALWAYS_ADD, LoopConfig(max_iterations=1), tools)
    chunks = [c async for c in agent.astream("go")]
    assert chunks[-1].type == "done" and chunks[-1].finish_reason == "max_iterations"
    assert sum(c.type == "done" for c in chunks) == 1


async def test_loop_astream_leaves_the_same_session_as_arun():
    tools, _ = make_tools()
    script = [[tc("add", a=1, b=2)], "three"]
    s1, s2 = machine.new_session("go"), machine.new_session("go")
    await rein.arun(s1, MockProvider(script), ToolRegistry(tools))
    _ = [c async for c in rein.astream(s2, MockProvider(script), ToolRegistry(tools))]
    assert s1 == s2


def test_stream_fold_is_the_one_rule_for_assembling_a_streamed_answer():
    from rein.core.ir import StreamFold

    fold = StreamFold()
    passed = [
        fold.add(c)
        for c in [
            StreamChunk(type="text", text="a"),
            StreamChunk(type="text", text=""),
            StreamChunk(type="tool_calls", tool_calls=[tc("add", a=1, b=2)]),
            StreamChunk(type="text", text="b"),
            StreamChunk(type="done", finish_reason="length", usage=Usage(input_tokens=3)),
        ]
    ]
    assert passed == [True, False, True, True, False]
    completion = fold.completion()
    assert completion.message == Message(role="assistant", content="ab", tool_calls=[tc("add", a=1, b=2)])
    assert (completion.finish_reason, completion.usage) == ("tool_calls", Usage(input_tokens=3))
    text_only = StreamFold()
    text_only.add(StreamChunk(type="text", text="x"))
    text_only.add(StreamChunk(type="done", finish_reason="end_turn"))  # not a Completion finish reason
    assert (text_only.completion().finish_reason, text_only.completion().usage) == ("stop", Usage())


# =========================================================================== tool argument validation


@pytest.mark.parametrize(
    ("call", "needles"),
    [
        (tc("add", a="abc", b=2), ["'add'", "a:", "integer"]),
        (tc("add", a=1), ["'add'", "b:", "missing"]),
        (tc("add", a=1, b=2, c=3), ["'add'", "c:", "unexpected"]),
        (tc("nope", x=1), ["Unknown tool", "'nope'", "add"]),
    ],
    ids=["wrong-type", "missing", "extra", "unknown-tool"],
)
def test_bad_tool_arguments_are_error_results(call, needles):
    tools, ran = make_tools()
    r = local_agent([[call], "I will fix that"], tools=tools).run("go")
    assert ran == []
    assert (r.status, r.output) == ("done", "I will fix that")
    assert [(s.kind, s.is_error) for s in r.steps] == [("model", None), ("tool", True), ("model", None)]
    (msg,) = tool_messages_of(r.session)
    for needle in needles:
        assert needle in msg.content, (needle, msg.content)


def test_tool_arguments_are_held_to_the_advertised_schema():
    # The schema says integer, so "1" is refused (not quietly converted) and the model corrects itself.
    tools, ran = make_tools()
    r = local_agent([[tc("add", a="1", b=2)], [tc("add", a=1, b=2)], "ok"], tools=tools).run("go")
    assert ran == [("add", (1, 2))]
    first, second = tool_messages_of(r.session)
    assert "a: Input should be a valid integer (got '1')" in first.content
    assert second.content == "3"


def test_raising_tool_is_an_error_result_and_the_run_goes_on():
    def explode() -> str:
        raise KeyError("nope")

    r = local_agent([[tc("explode")], "recovered"], tools=[explode]).run("go")
    assert r.output == "recovered"
    (msg,) = tool_messages_of(r.session)
    assert "KeyError" in msg.content and r.steps[1].is_error is True


# =========================================================================== concurrency and event loops


async def test_100_concurrent_aruns_on_one_agent():
    provider = EchoProvider()
    agent = Agent(provider=provider, engine="local")
    prompts = [f"prompt-{i}" for i in range(100)]
    results = await asyncio.gather(*(agent.arun(p) for p in prompts))
    assert [r.output for r in results] == prompts
    assert all(r.session.messages[0].content == r.output for r in results)
    assert provider.calls == 100


def test_50_threaded_runs_on_one_agent():
    agent = Agent(provider=EchoProvider(), engine="local")
    prompts = [f"thread-{i}" for i in range(50)]
    with ThreadPoolExecutor(max_workers=10) as pool:
        outputs = list(pool.map(lambda p: agent.run(p).output, prompts))
    assert outputs == prompts


async def test_sync_calls_inside_a_running_loop_point_to_the_async_form():
    agent = local_agent(["x"])
    with pytest.raises(RuntimeError, match="arun"):
        agent.run("hi")
    with pytest.raises(RuntimeError, match="aresume"):
        agent.resume(Session())
    with pytest.raises(RuntimeError, match="asend"):
        agent.chat().send("hi")
    with pytest.raises(RuntimeError, match="arun"):
        rein.run(Session(), MockProvider(["x"]))


# =========================================================================== Chat


def test_chat_keeps_history_and_resets_budgets_per_turn():
    cfg = LoopConfig(max_iterations=1, max_tokens=2)  # one 1+1-token call per turn fits exactly
    agent = Agent(provider=MockProvider(["first", "second"]), system="be brief", config=cfg, engine="local")
    chat = agent.chat()
    r1 = chat.send("hi")
    r2 = chat.send("again")
    assert (r1.output, r1.stop_reason) == ("first", "done")
    assert (r2.output, r2.stop_reason) == ("second", "done")
    assert r2.usage == Usage(input_tokens=1, output_tokens=1)  # per turn, not cumulative
    assert r2.session.iteration == 1
    assert [(m.role, m.content) for m in chat.session.messages] == [
        ("system", "be brief"),
        ("user", "hi"),
        ("assistant", "first"),
        ("user", "again"),
        ("assistant", "second"),
    ]


async def test_chat_asend_and_session_from_json():
    agent = Agent(provider=EchoProvider(), engine="local")
    chat = agent.chat()
    await chat.asend("one")
    restored = agent.chat(session=roundtrip(chat.session))
    r = await restored.asend("two")
    assert r.output == "two"
    assert [m.content for m in r.session.messages] == ["one", "one", "two", "two"]


# =========================================================================== the pure machine


def test_machine_next_action_sequence():
    cfg = LoopConfig()
    s = machine.new_session("hi", system="sys")
    assert [m.role for m in s.messages] == ["system", "user"]
    act = machine.next_action(s, cfg, 0.0)
    assert isinstance(act, machine.CallModel) and act.iteration == 1
    step = machine.apply_completion(
        s, Completion(message=Message(role="assistant", tool_calls=[tc("add", a=1, b=2)]), finish_reason="tool_calls")
    )
    assert step.kind == "model" and s.stage == Stage.RUN_TOOLS
    act = machine.next_action(s, cfg, 0.0)
    assert isinstance(act, machine.RunTools) and act.calls == [tc("add", a=1, b=2)]
    steps = machine.apply_tool_results(s, [ToolResult(tool_call_id="1", content="3")])
    assert [st.summary for st in steps] == ["add → 3"] and s.stage == Stage.CALL_MODEL
    act = machine.next_action(s, cfg, 0.0)
    assert isinstance(act, machine.CallModel) and act.iteration == 2
    machine.apply_completion(s, Completion(message=Message(role="assistant", content="3"), finish_reason="stop"))
    act = machine.next_action(s, cfg, 0.0)
    assert isinstance(act, machine.Finish) and act.stop_reason == "done"


def test_machine_breaker_finish_mutates_session():
    s = machine.new_session("hi")
    act = machine.next_action(s, LoopConfig(timeout_s=5), 5.0)
    assert isinstance(act, machine.Finish) and act.stop_reason == "timeout"
    assert s.done and s.stop_reason == "timeout"


def test_machine_ask_then_decide():
    s = machine.new_session("hi")
    calls = [tc("add", cid="a", a=1, b=2), tc("mul", cid="b", a=1, b=2)]
    machine.apply_completion(s, Completion(message=Message(role="assistant", tool_calls=calls), finish_reason="tool_calls"))
    cfg = LoopConfig(permission="ask")
    act = machine.next_action(s, cfg, 0.0)
    assert isinstance(act, machine.Wait) and act.interrupt.type == "need_approval"
    before = s.model_copy(deep=True)
    assert machine.decide(s, True, tool_call_id="zzz") == []  # unknown id: no change
    assert s == before
    assert machine.decide(s, False, tool_call_id="b", approver="ops", reason="too risky") == ["b"]
    act = machine.next_action(s, cfg, 0.0)
    assert isinstance(act, machine.Wait) and act.interrupt.tool_call.id == "a"  # still waits for 'a'
    assert machine.decide(s, True) == ["a"]
    act = machine.next_action(s, cfg, 0.0)
    assert isinstance(act, machine.RunTools) and [c.id for c in act.calls] == ["a"]
    steps = machine.apply_tool_results(s, [ToolResult(tool_call_id="a", content="3")])
    assert [st.is_error for st in steps] == [False, True]
    denied = s.messages[-1]
    assert denied.tool_call_id == "b" and "ops" in denied.content and "too risky" in denied.content


def test_machine_decide_outside_run_tools_is_ignored():
    s = machine.new_session("hi")
    assert machine.decide(s, True) == []
    assert s.decisions == []

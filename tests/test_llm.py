"""Tests for rein.blueprint.llm (the feishu-style LLM layer) and rein.blueprint.providers.backend."""

from __future__ import annotations

import dataclasses
import doctest
import subprocess
import sys
from pathlib import Path

import pytest

from rein.blueprint import llm
from rein.blueprint.llm import (
    LlmBackend,
    MessageStop,
    StopReason,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolResultPart,
    ToolUsePart,
    merge_tool_call_deltas,
)
from rein.blueprint.providers import backend as backend_mod
from rein.blueprint.providers.backend import (
    BackendProvider,
    as_provider,
    finish_reason_for,
    parse_arguments,
    to_llm_messages,
    to_usage,
)
from rein.core.ir import Completion, Message, StreamChunk, ToolCall, ToolSpec, Usage

# ---------------------------------------------------------------- seed examples


def test_text_part():
    assert TextPart(text="你好").text == "你好"


def test_tool_use_part():
    part = ToolUsePart(id="call_1", name="weather", arguments={"city": "上海"})
    assert part.name == "weather"
    assert part.arguments == {"city": "上海"}
    assert repr(part.arguments) == "{'city': '上海'}"


def test_tool_result_part():
    ok = ToolResultPart(tool_call_id="call_1", content="晴")
    assert ok.is_error is False
    err = ToolResultPart(tool_call_id="call_1", content="超时", is_error=True)
    assert err.is_error is True


def test_message():
    msg = llm.Message(role="user", content=[TextPart(text="你好")])
    assert msg.role == "user"
    assert msg.content[0].text == "你好"


def test_tool_spec():
    spec = llm.ToolSpec(
        name="weather",
        description="查询天气",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    assert spec.name == "weather"
    assert spec.input_schema["properties"]["city"] == {"type": "string"}


def test_stop_reason():
    assert (StopReason.TOOL_USE == "tool_use") is True
    assert StopReason("end_turn") is StopReason.END_TURN
    assert isinstance(StopReason.END_TURN, str)
    assert [m.value for m in StopReason] == ["end_turn", "tool_use", "max_tokens", "refusal", "other"]


def test_text_delta():
    assert TextDelta(text="你").text == "你"


def test_tool_call_delta():
    head = ToolCallDelta(index=0, id="c1", name="weather", arguments='{"ci')
    tail = ToolCallDelta(index=0, arguments='ty":"上海"}')
    assert (head.id, tail.arguments) == ("c1", 'ty":"上海"}')
    assert (tail.id, tail.name) == (None, None)
    assert ToolCallDelta(index=3).arguments == ""


def test_message_stop():
    stop = MessageStop(stop_reason=StopReason.END_TURN, usage={"output_tokens": 12})
    assert repr(stop.stop_reason) == "<StopReason.END_TURN: 'end_turn'>"
    assert stop.usage == {"output_tokens": 12}
    assert MessageStop(stop_reason=StopReason.OTHER).usage is None


def test_tool_call():
    call = llm.ToolCall(id="c1", name="weather", arguments='{"city":"上海"}')
    assert call.arguments == '{"city":"上海"}'


def test_llm_backend_echo_example():
    class EchoBackend:
        def stream(self, *, messages, tools=(), system=None, **kwargs):
            async def gen():
                yield TextDelta(text="hi")

            return gen()

    assert isinstance(EchoBackend(), LlmBackend)


def test_docstring_examples_hold():
    """Every `>>>` example in rein.blueprint.llm (the seed's examples) runs as a doctest."""
    failures, attempted = doctest.testmod(llm, verbose=False, report=True)
    assert attempted >= 25
    assert failures == 0


# ---------------------------------------------------------------- shapes


@pytest.mark.parametrize(
    "cls",
    [llm.TextPart, llm.ToolUsePart, llm.ToolResultPart, llm.Message, llm.ToolSpec,
     llm.TextDelta, llm.ToolCallDelta, llm.MessageStop, llm.ToolCall],
)
def test_seed_classes_are_slotted_dataclasses(cls):
    assert dataclasses.is_dataclass(cls)
    assert hasattr(cls, "__slots__")


def test_type_aliases():
    for t in (TextPart, ToolUsePart, ToolResultPart):
        assert t in llm.ContentPart.__args__
    for t in (TextDelta, ToolCallDelta, MessageStop):
        assert t in llm.StreamChunk.__args__
    assert set(llm.Role.__args__) == {"user", "assistant", "tool"}
    assert set(llm.__all__) <= set(dir(llm))


def test_llm_module_has_no_heavy_imports():
    """rein/blueprint/llm.py itself (loaded without the package __init__) pulls in stdlib only."""
    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('rein_llm_probe', sys.argv[1])\n"
        "mod = importlib.util.module_from_spec(spec)\n"
        "sys.modules['rein_llm_probe'] = mod\n"
        "spec.loader.exec_module(mod)\n"
        "print([m for m in ('litellm', 'httpx', 'pydantic', 'rein') if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).resolve().parents[1] / "rein" / "blueprint" / "llm.py")],
        capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- delta merging


def test_merge_deltas_by_index_interleaved():
    calls = merge_tool_call_deltas(
        [
            ToolCallDelta(index=1, id="c2", name="time", arguments='{"tz"'),
            ToolCallDelta(index=0, id="c1", name="weather", arguments='{"ci'),
            ToolCallDelta(index=1, arguments=':"UTC"}'),
            ToolCallDelta(index=0, arguments='ty":"上海"}'),
        ]
    )
    assert calls == [
        llm.ToolCall(id="c1", name="weather", arguments='{"city":"上海"}'),
        llm.ToolCall(id="c2", name="time", arguments='{"tz":"UTC"}'),
    ]


def test_merge_deltas_first_id_and_name_win_and_defaults():
    calls = merge_tool_call_deltas(
        [
            ToolCallDelta(index=5, name="a"),
            ToolCallDelta(index=5, id="x", name="b", arguments="{}"),
            ToolCallDelta(index=5, id="y"),
            ToolCallDelta(index=2),
        ]
    )
    assert calls == [
        llm.ToolCall(id="call_2", name="", arguments=""),
        llm.ToolCall(id="x", name="a", arguments="{}"),
    ]
    assert merge_tool_call_deltas([]) == []


# ---------------------------------------------------------------- protocol check


def test_llm_backend_runtime_check_negative():
    class NoStream:
        def complete(self, messages):
            return None

    assert not isinstance(NoStream(), LlmBackend)
    assert not isinstance(object(), LlmBackend)
    assert not isinstance("stream", LlmBackend)


def test_llm_backend_runtime_check_async_generator_method():
    class GenBackend:
        async def stream(self, *, messages, tools=(), system=None, **kwargs):
            yield TextDelta(text="x")

    assert isinstance(GenBackend(), LlmBackend)


# ---------------------------------------------------------------- scripted backend


class ScriptedBackend:
    """An in-test LlmBackend: replays one scripted list of chunks per call, recording the calls."""

    def __init__(self, *scripts):
        self.scripts = list(scripts)
        self.calls: list[dict] = []

    def stream(self, *, messages, tools=(), system=None, **kwargs):
        self.calls.append({"messages": list(messages), "tools": tuple(tools), "system": system, **kwargs})
        script = self.scripts.pop(0)

        async def gen():
            for chunk in script:
                if isinstance(chunk, BaseException):
                    raise chunk
                yield chunk

        return gen()


def test_scripted_backend_satisfies_protocol():
    assert isinstance(ScriptedBackend(), LlmBackend)


async def test_complete_text_answer():
    be = ScriptedBackend(
        [
            TextDelta(text="你"),
            TextDelta(text="好"),
            MessageStop(stop_reason=StopReason.END_TURN, usage={"input_tokens": 7, "output_tokens": 2}),
        ]
    )
    provider = BackendProvider(be)
    completion = await provider.complete(
        [Message(role="system", content="be brief"), Message(role="user", content="hi")],
        temperature=0.1,
    )
    assert completion == Completion(
        message=Message(role="assistant", content="你好"),
        usage=Usage(input_tokens=7, output_tokens=2),
        finish_reason="stop",
    )
    (call,) = be.calls
    assert call["system"] == "be brief"
    assert call["tools"] == ()
    assert call["temperature"] == 0.1
    assert call["messages"] == [llm.Message(role="user", content=[TextPart(text="hi")])]


async def test_complete_tool_call_answer():
    be = ScriptedBackend(
        [
            TextDelta(text="checking"),
            ToolCallDelta(index=0, id="c1", name="weather", arguments='{"ci'),
            ToolCallDelta(index=1, id="c2", name="broken", arguments="{not json"),
            ToolCallDelta(index=0, arguments='ty":"上海"}'),
            MessageStop(stop_reason=StopReason.TOOL_USE, usage={"input_tokens": 3, "output_tokens": 4}),
        ]
    )
    tools = [ToolSpec(name="weather", description="查询天气", parameters={"type": "object"})]
    completion = await BackendProvider(be).complete([Message(role="user", content="weather?")], tools)
    assert completion.finish_reason == "tool_calls"
    assert completion.message.content == "checking"
    assert completion.message.tool_calls == [
        ToolCall(id="c1", name="weather", arguments={"city": "上海"}),
        ToolCall(id="c2", name="broken", arguments={}, arguments_error=completion.message.tool_calls[1].arguments_error),
    ]
    # Unreadable arguments are not silently {}: the call says why, and the tool will not run.
    assert "not valid JSON" in completion.message.tool_calls[1].arguments_error
    assert completion.message.tool_calls[0].arguments_error is None
    assert completion.usage == Usage(input_tokens=3, output_tokens=4)
    assert be.calls[0]["tools"] == (
        llm.ToolSpec(name="weather", description="查询天气", input_schema={"type": "object"}),
    )
    assert be.calls[0]["system"] is None


async def test_stream_yields_text_then_tool_calls_then_done():
    be = ScriptedBackend(
        [
            TextDelta(text="a"),
            TextDelta(text=""),
            ToolCallDelta(index=0, id="c1", name="weather", arguments='{"city":'),
            TextDelta(text="b"),
            ToolCallDelta(index=0, arguments='"北京"}'),
            MessageStop(stop_reason=StopReason.TOOL_USE, usage={"output_tokens": 9}),
        ]
    )
    chunks = [c async for c in BackendProvider(be).stream([Message(role="user", content="x")])]
    assert chunks == [
        StreamChunk(type="text", text="a"),
        StreamChunk(type="text", text="b"),
        StreamChunk(type="tool_calls", tool_calls=[ToolCall(id="c1", name="weather", arguments={"city": "北京"})]),
        StreamChunk(type="done", usage=Usage(output_tokens=9), finish_reason="tool_calls"),
    ]


async def test_stream_is_incremental():
    """Text chunks are forwarded before the backend has finished."""
    seen: list[str] = []

    class Lazy:
        def stream(self, *, messages, tools=(), system=None, **kwargs):
            async def gen():
                seen.append("first")
                yield TextDelta(text="one")
                seen.append("second")
                yield TextDelta(text="two")

            return gen()

    agen = BackendProvider(Lazy()).stream([Message(role="user", content="x")])
    first = await agen.__anext__()
    assert first == StreamChunk(type="text", text="one")
    assert seen == ["first"]
    rest = [c async for c in agen]
    assert rest[-1] == StreamChunk(type="done", usage=Usage(), finish_reason="stop")


async def test_echo_backend_without_message_stop():
    class EchoBackend:
        def stream(self, *, messages, tools=(), system=None, **kwargs):
            async def gen():
                yield TextDelta(text="hi")

            return gen()

    completion = await as_provider(EchoBackend()).complete([Message(role="user", content="x")])
    assert completion.message.content == "hi"
    assert completion.message.tool_calls is None
    assert completion.finish_reason == "stop"
    assert completion.usage == Usage()


async def test_async_generator_method_backend():
    class GenBackend:
        async def stream(self, *, messages, tools=(), system=None, **kwargs):
            yield TextDelta(text=f"sys={system}")
            yield MessageStop(stop_reason=StopReason.MAX_TOKENS)

    completion = await BackendProvider(GenBackend()).complete(
        [Message(role="system", content="A"), Message(role="system", content="B"), Message(role="user", content="x")]
    )
    assert completion.message.content == "sys=A\n\nB"
    assert completion.finish_reason == "length"


async def test_multi_turn_round_trip_history_translation():
    """Turn 1 asks for tools; the rein history (assistant tool_calls + tool results) goes back as parts."""
    be = ScriptedBackend(
        [
            ToolCallDelta(index=0, id="c1", name="weather", arguments='{"city":"上海"}'),
            ToolCallDelta(index=1, id="c2", name="time", arguments=""),
            MessageStop(stop_reason=StopReason.TOOL_USE),
        ],
        [TextDelta(text="晴，12:00"), MessageStop(stop_reason=StopReason.END_TURN)],
    )
    provider = BackendProvider(be)
    history = [Message(role="system", content="sys"), Message(role="user", content="天气?")]
    first = await provider.complete(history)
    assert first.finish_reason == "tool_calls"
    assert first.message.tool_calls == [
        ToolCall(id="c1", name="weather", arguments={"city": "上海"}),
        ToolCall(id="c2", name="time", arguments={}),
    ]
    history += [
        first.message,
        Message(role="tool", tool_call_id="c1", content="晴"),
        Message(role="tool", tool_call_id="c2", content="12:00"),
    ]
    second = await provider.complete(history)
    assert second.finish_reason == "stop"
    assert second.message.content == "晴，12:00"
    sent = be.calls[1]
    assert sent["system"] == "sys"
    assert sent["messages"] == [
        llm.Message(role="user", content=[TextPart(text="天气?")]),
        llm.Message(
            role="assistant",
            content=[
                ToolUsePart(id="c1", name="weather", arguments={"city": "上海"}),
                ToolUsePart(id="c2", name="time", arguments={}),
            ],
        ),
        llm.Message(
            role="tool",
            content=[
                ToolResultPart(tool_call_id="c1", content="晴"),
                ToolResultPart(tool_call_id="c2", content="12:00"),
            ],
        ),
    ]


def test_to_llm_messages_assistant_text_and_tools():
    system, msgs = to_llm_messages(
        [
            Message(role="assistant", content="let me check",
                    tool_calls=[ToolCall(id="c1", name="w", arguments={"a": 1})]),
            Message(role="tool", tool_call_id="c1", content="r1"),
            Message(role="user", content="more"),
            Message(role="tool", tool_call_id="c9", content="r9"),
        ]
    )
    assert system is None
    assert msgs == [
        llm.Message(role="assistant", content=[TextPart(text="let me check"),
                                               ToolUsePart(id="c1", name="w", arguments={"a": 1})]),
        llm.Message(role="tool", content=[ToolResultPart(tool_call_id="c1", content="r1")]),
        llm.Message(role="user", content=[TextPart(text="more")]),
        llm.Message(role="tool", content=[ToolResultPart(tool_call_id="c9", content="r9")]),
    ]


async def test_backend_exception_propagates():
    be = ScriptedBackend([TextDelta(text="partial"), RuntimeError("boom")])
    with pytest.raises(RuntimeError, match="boom"):
        await BackendProvider(be).complete([Message(role="user", content="x")])


async def test_unknown_chunk_type_is_rejected():
    be = ScriptedBackend(["not a chunk"])
    with pytest.raises(TypeError, match="expected TextDelta, ToolCallDelta or MessageStop"):
        await BackendProvider(be).complete([Message(role="user", content="x")])


# ---------------------------------------------------------------- mapping helpers


@pytest.mark.parametrize(
    "reason, has_calls, expected",
    [
        (StopReason.END_TURN, False, "stop"),
        (StopReason.TOOL_USE, True, "tool_calls"),
        (StopReason.MAX_TOKENS, False, "length"),
        (StopReason.MAX_TOKENS, True, "length"),
        (StopReason.REFUSAL, False, "stop"),
        (StopReason.OTHER, False, "stop"),
        (StopReason.TOOL_USE, False, "error"),
        (StopReason.END_TURN, True, "tool_calls"),
        ("end_turn", False, "stop"),
        ("something_new", False, "stop"),
        (None, False, "stop"),
        (None, True, "tool_calls"),
    ],
)
def test_finish_reason_for(reason, has_calls, expected):
    assert finish_reason_for(reason, has_calls) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        (None, {}),
        ("   ", {}),
        ("{bad", {}),
        ("[1, 2]", {}),
        ("42", {}),
    ],
)
def test_parse_arguments(raw, expected):
    assert parse_arguments(raw) == expected


def test_to_usage():
    assert to_usage(None) == Usage()
    assert to_usage({"output_tokens": 12}) == Usage(output_tokens=12)
    assert to_usage({"prompt_tokens": 5, "completion_tokens": 6}) == Usage(input_tokens=5, output_tokens=6)
    assert to_usage(
        {"input_tokens": 1, "cache_read_input_tokens": 10, "cache_creation_input_tokens": 100, "output_tokens": 2}
    ) == Usage(input_tokens=111, output_tokens=2)
    assert to_usage({"input_tokens": 1, "cost_usd": 0.5}).cost_usd == 0.5


# ---------------------------------------------------------------- as_provider


def test_as_provider_passes_rein_providers_through():
    class ReinProvider:
        async def complete(self, messages, tools=None, **kwargs):
            raise NotImplementedError

        async def stream(self, messages, tools=None, **kwargs):
            yield StreamChunk(type="done")

    p = ReinProvider()
    assert as_provider(p) is p
    wrapped = BackendProvider(ScriptedBackend())
    assert as_provider(wrapped) is wrapped


def test_as_provider_wraps_llm_backends():
    be = ScriptedBackend()
    p = as_provider(be)
    assert isinstance(p, BackendProvider)
    assert p.backend is be


def test_as_provider_rejects_other_objects():
    with pytest.raises(TypeError, match="cannot use object as a model provider"):
        as_provider(object())
    with pytest.raises(TypeError, match="LlmBackend"):
        as_provider(42)


def test_backend_provider_rejects_non_backend():
    with pytest.raises(TypeError, match="rein.blueprint.llm.LlmBackend"):
        BackendProvider(object())


def test_backend_module_exports():
    for name in backend_mod.__all__:
        assert hasattr(backend_mod, name)


def test_backend_provider_satisfies_rein_provider_protocol():
    from rein.blueprint.providers.base import Provider

    assert isinstance(BackendProvider(ScriptedBackend()), Provider)
    assert not isinstance(ScriptedBackend(), Provider)


@pytest.mark.parametrize("engine", ["local", "temporal"])
async def test_agent_runs_an_llm_backend_directly(engine):
    """Agent(provider=<LlmBackend>) works on both engines: the backend is adapted once."""
    from rein import Agent

    backend = ScriptedBackend(
            [llm.ToolCallDelta(index=0, id="c1", name="add", arguments='{"a": 2, "b": 3}'),
             llm.MessageStop(stop_reason=llm.StopReason.TOOL_USE)],
            [llm.TextDelta(text="It is "), llm.TextDelta(text="5."), llm.MessageStop(stop_reason=llm.StopReason.END_TURN)],
    )

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    result = await Agent(provider=backend, tools=[add], engine=engine).arun("2 + 3?")
    assert result.output == "It is 5."
    assert [m.content for m in result.session.messages if m.role == "tool"] == ["5"]


def test_conversions_live_in_one_place():
    """rein.blueprint.llm is the view over rein.core.ir: every conversion is defined there, the provider only uses them."""
    assert backend_mod.to_llm_messages is llm.to_llm_messages
    assert backend_mod.parse_arguments is llm.parse_arguments
    assert backend_mod.finish_reason_for is llm.finish_reason_for
    assert backend_mod.to_usage is llm.to_ir_usage
    assert not hasattr(__import__("rein.local.loop", fromlist=["x"]), "completion_from_stream")


async def test_to_ir_stream_records_unreadable_arguments():
    async def chunks():
        yield TextDelta(text="a")
        yield ToolCallDelta(index=0, id="c1", name="weather", arguments='{"city": ')
        yield MessageStop(stop_reason=StopReason.TOOL_USE, usage={"input_tokens": 2})

    out = [c async for c in llm.to_ir_stream(chunks())]
    assert [c.type for c in out] == ["text", "tool_calls", "done"]
    (call,) = out[1].tool_calls
    assert (call.id, call.name, call.arguments) == ("c1", "weather", {})
    assert call.arguments_error and "not valid JSON" in call.arguments_error
    assert (out[2].finish_reason, out[2].usage) == ("tool_calls", Usage(input_tokens=2))

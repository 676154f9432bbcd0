"""Providers: the Protocol, MockProvider, is_retryable, FallbackProvider and LiteLLMProvider.

LiteLLM is exercised over real HTTP against tests/vendor_server.py (OpenAI and
Anthropic wire formats), so what litellm actually sends and raises is checked.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

# rein is not installed into the venv: make the repo root (and this folder) importable.
ROOT = Path(__file__).resolve().parents[1]
for _p in (str(ROOT), str(ROOT / "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from vendor_server import Fail, Reply, VendorServer  # noqa: E402  (sets LITELLM_LOCAL_MODEL_COST_MAP first)

from rein.blueprint.providers import FallbackProvider, LiteLLMProvider, MockProvider, Provider, is_retryable
from rein.blueprint.providers import fallback as fallback_mod
from rein.blueprint.providers.fallback import _FATAL_NAMES, _status_of
from rein.blueprint.providers.litellm import _extract_cost
from rein.blueprint.providers.mock import EXHAUSTED_TEXT
from rein.core.ir import Completion, Message, StreamChunk, ToolCall, ToolSpec, Usage
from rein.core.prices import call_cost

HI = [Message(role="user", content="hi")]
ADD = ToolSpec(name="add", description="Add two integers.",
               parameters={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                           "required": ["a", "b"]})


class StatusError(Exception):
    def __init__(self, status: int):
        super().__init__(f"status {status}")
        self.status_code = status


class RateLimitError(Exception):
    """Retryable by name."""


class AuthenticationError(Exception):
    """Fatal by name."""


async def collect(agen) -> list[StreamChunk]:
    return [c async for c in agen]


# --------------------------------------------------------------------------- seed examples


class MyProvider:
    """The seed's hand-written provider: duck-typed, no inheritance."""

    async def complete(self, messages, tools=None, **kw):
        return Completion(message=Message(role="assistant", content="answer"), finish_reason="stop", usage=Usage())

    async def stream(self, messages, tools=None, **kw):
        yield


async def test_seed_custom_provider_is_a_provider():
    p = MyProvider()
    assert isinstance(p, Provider)
    c = await p.complete(HI)
    assert c.message.content == "answer" and c.finish_reason == "stop"


def test_provider_protocol_needs_both_methods():
    class OnlyComplete:
        async def complete(self, messages, tools=None, **kw): ...

    assert not isinstance(OnlyComplete(), Provider)
    assert isinstance(MockProvider([]), Provider)
    assert isinstance(LiteLLMProvider("openai/gpt-4o"), Provider)
    assert isinstance(FallbackProvider([MockProvider([])]), Provider)


async def test_seed_mock_script_tool_then_text():
    p = MockProvider([
        [ToolCall(id="1", name="add", arguments={"a": 1, "b": 2})],
        "the answer is 3",
    ])
    first = await p.complete(HI, [ADD])
    assert first.finish_reason == "tool_calls"
    assert first.message.tool_calls == [ToolCall(id="1", name="add", arguments={"a": 1, "b": 2})]
    assert first.message.content == ""
    second = await p.complete(HI)
    assert (second.message.content, second.finish_reason) == ("the answer is 3", "stop")


def test_seed_litellm_provider_construction():
    p = LiteLLMProvider("anthropic/claude-opus-4-8", temperature=0.7)
    assert p.model == "anthropic/claude-opus-4-8"
    assert p.default_params == {"temperature": 0.7}


async def test_seed_fallback_direct_construction():
    primary = MockProvider([StatusError(503), StatusError(503)])  # default: one retry, then switch
    fp = FallbackProvider([primary, MockProvider(["backup answer"])], base_delay=0)
    c = await fp.complete(HI)
    assert c.message.content == "backup answer"
    assert primary._index == 2


def test_seed_is_retryable_import_path():
    from rein.blueprint.providers.fallback import is_retryable as f

    assert f is is_retryable


# --------------------------------------------------------------------------- MockProvider


async def test_mock_default_usage_and_shared_instance():
    p = MockProvider(["a", "b"])
    c1, c2 = await p.complete(HI), await p.complete(HI)
    assert c1.usage == Usage(input_tokens=1, output_tokens=1)
    assert c1.usage is c2.usage is p.usage_per_call


async def test_mock_custom_usage():
    u = Usage(input_tokens=7, output_tokens=3)
    assert (await MockProvider(["x"], usage_per_call=u).complete(HI)).usage == u


async def test_mock_copies_script_and_counts():
    script = ["a"]
    p = MockProvider(script)
    script.append("b")
    assert p._responses == ["a"] and p._index == 0
    await p.complete(HI)
    assert p._index == 1


async def test_mock_exhausted_never_raises():
    p = MockProvider(["only"])
    await p.complete(HI)
    for _ in range(3):
        c = await p.complete(HI)
        assert (c.message.content, c.finish_reason) == (EXHAUSTED_TEXT, "stop")
        assert c.usage == Usage(input_tokens=1, output_tokens=1)
    assert "MockProvider" in EXHAUSTED_TEXT and EXHAUSTED_TEXT.isascii()


async def test_mock_completion_item_returned_as_is():
    done = Completion(message=Message(role="assistant", content="cut"), finish_reason="length",
                      usage=Usage(input_tokens=9))
    assert await MockProvider([done]).complete(HI) is done


async def test_mock_exception_item_raises_and_advances():
    boom = StatusError(429)
    p = MockProvider([boom, "after"])
    with pytest.raises(StatusError) as info:
        await p.complete(HI)
    assert info.value is boom
    assert (await p.complete(HI)).message.content == "after"


async def test_mock_stream_text_one_char_per_chunk():
    chunks = await collect(MockProvider(["abc"]).stream(HI))
    assert [(c.type, c.text) for c in chunks[:-1]] == [("text", "a"), ("text", "b"), ("text", "c")]
    assert chunks[-1].type == "done" and chunks[-1].finish_reason == "stop"
    assert chunks[-1].usage == Usage(input_tokens=1, output_tokens=1)


async def test_mock_stream_tool_item():
    tc = ToolCall(id="t", name="add", arguments={"a": 1})
    chunks = await collect(MockProvider([[tc]]).stream(HI))
    assert [c.type for c in chunks] == ["tool_calls", "done"]
    assert chunks[0].tool_calls == [tc] and chunks[1].finish_reason == "tool_calls"


async def test_mock_stream_shares_script_with_complete_and_exhausts_in_one_chunk():
    p = MockProvider(["ab", "cd"])
    assert (await p.complete(HI)).message.content == "ab"
    assert "".join(c.text for c in await collect(p.stream(HI))) == "cd"
    chunks = await collect(p.stream(HI))
    assert [(c.type, c.text) for c in chunks] == [("text", EXHAUSTED_TEXT), ("done", "")]


async def test_mock_stream_exception_before_first_chunk():
    p = MockProvider([StatusError(500)])
    seen = []
    with pytest.raises(StatusError):
        async for c in p.stream(HI):
            seen.append(c)
    assert seen == []


# --------------------------------------------------------------------------- is_retryable


@pytest.mark.parametrize("status,expected", [
    (429, True), (503, True), (408, True), (425, True), (500, True), (502, True), (504, True),
    (400, False), (401, False), (403, False), (404, False), (405, False), (422, False),
])
def test_is_retryable_by_status(status, expected):
    assert is_retryable(StatusError(status)) is expected


def test_status_attribute_order_and_int_only():
    e = Exception()
    e.code = "rate_limit_exceeded"  # a string code is skipped...
    e.status = 503  # ...and the next int attribute wins
    assert _status_of(e) == 503 and is_retryable(e)
    e.http_status = 401  # http_status comes before status
    assert _status_of(e) == 401 and not is_retryable(e)


def test_status_beats_class_name():
    class RateLimitThing(Exception):
        status_code = 401

    assert not is_retryable(RateLimitThing())


def test_unlisted_status_falls_through_to_name():
    class ServiceUnavailableError(Exception):
        status_code = 599

    assert is_retryable(ServiceUnavailableError())
    assert not is_retryable(StatusError(418))


def test_is_retryable_by_name():
    class ConnectionTimeout(Exception): ...
    class InvalidRequestError(Exception): ...
    class ContextWindowExceededError(Exception): ...
    class OverloadedError(Exception): ...

    assert is_retryable(ConnectionTimeout())
    assert is_retryable(TimeoutError())
    assert is_retryable(OverloadedError())
    assert is_retryable(RateLimitError())
    assert not is_retryable(InvalidRequestError())
    assert not is_retryable(PermissionError())
    assert not is_retryable(AuthenticationError())
    assert not is_retryable(ContextWindowExceededError())
    assert not is_retryable(ConnectionError())
    assert not is_retryable(ValueError("unknown"))


def test_context_window_is_fatal_even_with_a_retryable_word():
    # Fatal words are checked first; without "contextwindow" among them this would be retried.
    class ContextWindowTimeoutError(Exception): ...

    assert "contextwindow" in _FATAL_NAMES
    assert not is_retryable(ContextWindowTimeoutError())


def test_litellm_context_window_error_is_fatal():
    import litellm

    e = litellm.ContextWindowExceededError(message="too long", model="gpt-4o", llm_provider="openai")
    assert not is_retryable(e)


# --------------------------------------------------------------------------- FallbackProvider


class Recorder:
    """Counts calls; raises scripted exceptions or answers text (complete and stream)."""

    def __init__(self, script):
        self.script, self.calls = list(script), 0

    def _next(self):
        item = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if isinstance(item, Exception):
            raise item
        return item

    async def complete(self, messages, tools=None, **kw):
        return Completion(message=Message(role="assistant", content=self._next()), finish_reason="stop")

    async def stream(self, messages, tools=None, **kw):
        for ch in self._next():
            yield StreamChunk(type="text", text=ch)
        yield StreamChunk(type="done", finish_reason="stop")


@pytest.fixture
def sleeps(monkeypatch):
    """Record backoff delays instead of sleeping."""
    delays: list[float] = []

    async def fake_sleep(d):
        delays.append(d)

    monkeypatch.setattr(fallback_mod.asyncio, "sleep", fake_sleep)
    return delays


def test_fallback_needs_a_provider():
    with pytest.raises(ValueError, match="at least one provider"):
        FallbackProvider([])


async def test_fallback_switches_on_retryable(sleeps):
    primary, backup = Recorder([RateLimitError()]), MockProvider(["backup"])
    fp = FallbackProvider([primary, backup], max_retries_per_provider=0)
    assert (await fp.complete(HI)).message.content == "backup"
    assert primary.calls == 1 and backup._index == 1
    assert sleeps == []


async def test_fallback_fatal_raises_without_touching_backup(sleeps):
    backup = MockProvider(["backup"])
    fp = FallbackProvider([MockProvider([StatusError(401)]), backup])
    with pytest.raises(StatusError):
        await fp.complete(HI)
    assert backup._index == 0


async def test_fallback_retry_count_and_backoff(sleeps):
    primary = Recorder([StatusError(503)])
    fp = FallbackProvider([primary, MockProvider(["ok"])], max_retries_per_provider=2, base_delay=0.01)
    assert (await fp.complete(HI)).message.content == "ok"
    assert primary.calls == 3
    # Backoff between attempts on one provider, none when switching.
    assert sleeps == [0.01, 0.02]


async def test_fallback_retry_then_success_on_same_provider(sleeps):
    primary, backup = Recorder([StatusError(429), "second try"]), MockProvider(["backup"])
    fp = FallbackProvider([primary, backup], base_delay=0.5)
    assert (await fp.complete(HI)).message.content == "second try"
    assert primary.calls == 2 and backup._index == 0 and sleeps == [0.5]


async def test_fallback_all_failing_reraises_last(sleeps):
    last = StatusError(502)
    fp = FallbackProvider([MockProvider([StatusError(429)]), MockProvider([last])], max_retries_per_provider=0)
    with pytest.raises(StatusError) as info:
        await fp.complete(HI)
    assert info.value is last


async def test_fallback_zero_delay_never_sleeps(sleeps):
    fp = FallbackProvider([Recorder([StatusError(503)])], max_retries_per_provider=3, base_delay=0)
    with pytest.raises(StatusError):
        await fp.complete(HI)
    assert sleeps == []


async def test_fallback_attributes_are_mutable(sleeps):
    primary = Recorder([StatusError(503)])
    fp = FallbackProvider([primary])
    fp.max_retries_per_provider, fp.base_delay = 4, 1.0
    fp.providers.append(MockProvider(["late backup"]))
    assert (await fp.complete(HI)).message.content == "late backup"
    assert primary.calls == 5 and sleeps == [1.0, 2.0, 4.0, 8.0]


async def test_fallback_passes_tools_and_kwargs():
    seen = {}

    class Spy(MyProvider):
        async def complete(self, messages, tools=None, **kw):
            seen.update(tools=tools, kw=kw)
            return await super().complete(messages, tools, **kw)

    await FallbackProvider([Spy()]).complete(HI, [ADD], temperature=0.1)
    assert seen == {"tools": [ADD], "kw": {"temperature": 0.1}}


async def test_fallback_stream_switches_before_first_chunk(sleeps):
    primary, backup = Recorder([RateLimitError()]), MockProvider(["ok"])
    fp = FallbackProvider([primary, backup], max_retries_per_provider=0)
    chunks = await collect(fp.stream(HI))
    assert "".join(c.text for c in chunks) == "ok" and chunks[-1].type == "done"
    assert primary.calls == 1 and backup._index == 1


async def test_fallback_stream_never_switches_after_first_chunk(sleeps):
    class Broken:
        calls = 0

        async def complete(self, messages, tools=None, **kw): ...

        async def stream(self, messages, tools=None, **kw):
            Broken.calls += 1
            yield StreamChunk(type="text", text="par")
            raise RateLimitError()

    backup = MockProvider(["backup"])
    fp = FallbackProvider([Broken(), backup], max_retries_per_provider=2)
    seen = []
    with pytest.raises(RateLimitError):
        async for c in fp.stream(HI):
            seen.append(c.text)
    assert seen == ["par"] and Broken.calls == 1 and backup._index == 0 and sleeps == []


async def test_fallback_stream_fatal_before_first_chunk_raises(sleeps):
    backup = MockProvider(["backup"])
    with pytest.raises(AuthenticationError):
        await collect(FallbackProvider([MockProvider([AuthenticationError()]), backup]).stream(HI))
    assert backup._index == 0


async def test_fallback_stream_retries_with_backoff(sleeps):
    primary = Recorder([StatusError(503), StatusError(503), "third"])
    fp = FallbackProvider([primary], max_retries_per_provider=2, base_delay=0.25)
    assert "".join(c.text for c in await collect(fp.stream(HI))) == "third"
    assert primary.calls == 3 and sleeps == [0.25, 0.5]


# --------------------------------------------------------------------------- LiteLLM: pure helpers


def test_extract_cost():
    assert _extract_cost(SimpleNamespace(_hidden_params={"response_cost": 0.25})) == 0.25
    cost = _extract_cost(SimpleNamespace(_hidden_params={"response_cost": 2}))
    assert cost == 2.0 and isinstance(cost, float)
    assert _extract_cost(SimpleNamespace(_hidden_params={"response_cost": "0.1"})) is None
    assert _extract_cost(SimpleNamespace(_hidden_params={"response_cost": None})) is None
    assert _extract_cost(SimpleNamespace(_hidden_params={})) is None
    assert _extract_cost(SimpleNamespace(_hidden_params=None)) is None
    assert _extract_cost(object()) is None


def _resp(content=None, tool_calls=None, finish="stop", usage=True, cost=None):
    msg = SimpleNamespace(content=content, tool_calls=tool_calls)
    return SimpleNamespace(
        choices=[SimpleNamespace(message=msg, finish_reason=finish)],
        usage=SimpleNamespace(prompt_tokens=12, completion_tokens=5) if usage else None,
        _hidden_params={"response_cost": cost},
    )


def _tc(id_, name, args):
    return SimpleNamespace(id=id_, function=SimpleNamespace(name=name, arguments=args))


def test_from_lite_response_text():
    c = LiteLLMProvider._from_lite_response(_resp("hello", cost=0.5))
    assert c.message == Message(role="assistant", content="hello")
    assert c.usage == Usage(input_tokens=12, output_tokens=5, cost_usd=0.5)
    assert c.finish_reason == "stop"


def test_from_lite_response_tool_calls():
    resp = _resp(None, [_tc("a", "add", '{"a": 1}'), _tc("b", "add", {"b": 2}), _tc("c", "add", "not json")],
                 finish="stop")
    c = LiteLLMProvider._from_lite_response(resp)
    assert c.finish_reason == "tool_calls" and c.message.content == ""
    assert [(t.id, t.arguments) for t in c.message.tool_calls] == [("a", {"a": 1}), ("b", {"b": 2}), ("c", {})]
    assert [t.arguments_error is None for t in c.message.tool_calls] == [True, True, False]


@pytest.mark.parametrize("finish,expected", [("length", "length"), ("content_filter", "stop"), (None, "stop")])
def test_from_lite_response_finish_reason(finish, expected):
    c = LiteLLMProvider._from_lite_response(_resp("x", finish=finish, usage=False))
    assert c.finish_reason == expected and c.usage == Usage()


def test_to_lite_message_and_tool():
    to = LiteLLMProvider._to_lite_message
    assert to(Message(role="user", content="hi")) == {"role": "user", "content": "hi"}
    assert to(Message(role="assistant")) == {"role": "assistant"}
    call = to(Message(role="assistant", tool_calls=[ToolCall(id="1", name="greet", arguments={"name": "Zoë"})]))
    assert "content" not in call
    assert call["tool_calls"] == [{"id": "1", "type": "function",
                                   "function": {"name": "greet", "arguments": '{"name": "Zo\\u00eb"}'}}]
    assert to(Message(role="tool", content="3", tool_call_id="1")) == {"role": "tool", "content": "3",
                                                                       "tool_call_id": "1"}
    assert LiteLLMProvider._to_lite_tool(ADD) == {
        "type": "function", "function": {"name": "add", "description": ADD.description, "parameters": ADD.parameters}}


async def test_call_args_defaults_and_overrides(monkeypatch):
    import litellm

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    seen: list[dict] = []

    async def fake_acompletion(**kw):
        seen.append(kw)
        return _resp("ok", cost=0.0)

    monkeypatch.setattr(litellm, "acompletion", fake_acompletion)
    await LiteLLMProvider("openai/gpt-4o", temperature=0.7).complete(HI)
    await LiteLLMProvider("openai/gpt-4o", temperature=0.7, num_retries=3).complete(HI, [ADD], temperature=0.1)
    assert seen[0]["num_retries"] == 0 and seen[0]["tools"] is None and seen[0]["temperature"] == 0.7
    assert seen[1]["num_retries"] == 3 and seen[1]["temperature"] == 0.1
    assert seen[1]["tools"][0]["function"]["name"] == "add"
    # An explicit max_retries is the caller's choice: our num_retries default would override it.
    await LiteLLMProvider("openai/gpt-4o", max_retries=2).complete(HI)
    assert "num_retries" not in seen[2] and seen[2]["max_retries"] == 2


def test_repr_hides_param_values():
    r = repr(LiteLLMProvider("openai/gpt-4o", api_key="sk-very-secret", temperature=0.2))
    assert "sk-very-secret" not in r and "api_key" in r and "openai/gpt-4o" in r


def test_importing_rein_providers_does_not_import_litellm_or_touch_network():
    # A fresh interpreter: import rein.blueprint.providers, then litellm, with every socket
    # attempt recorded. The env var from vendor_server keeps litellm's cost map local.
    code = (
        "import socket, sys\n"
        "tries = []\n"
        "def deny(*a, **k):\n"
        "    tries.append(repr(a)[:80]); raise OSError('network disabled in test')\n"
        "socket.socket.connect = deny; socket.getaddrinfo = deny\n"
        "import rein.blueprint.providers\n"
        "assert 'litellm' not in sys.modules, 'rein.blueprint.providers imported litellm'\n"
        "import litellm\n"
        "print('TRIES', tries)\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "TRIES []" in out.stdout


# --------------------------------------------------------------------------- LiteLLM over real HTTP


@pytest.fixture
def srv():
    with VendorServer() as s:
        yield s


def openai_provider(srv: VendorServer, **kw) -> LiteLLMProvider:
    return LiteLLMProvider("openai/gpt-4o", api_base=srv.base_url + "/v1", api_key="sk-test", **kw)


def anthropic_provider(srv: VendorServer, **kw) -> LiteLLMProvider:
    return LiteLLMProvider("anthropic/claude-sonnet-4-5", api_base=srv.base_url, api_key="sk-ant-test", **kw)


async def test_openai_text(srv):
    srv.script([Reply(text="hello there", input_tokens=21, output_tokens=4)])
    c = await openai_provider(srv, temperature=0.7).complete(HI)
    assert c.message == Message(role="assistant", content="hello there")
    assert c.finish_reason == "stop"
    assert (c.usage.input_tokens, c.usage.output_tokens) == (21, 4)
    assert c.usage.cost_usd is not None and c.usage.cost_usd > 0  # from litellm's local price map
    [req] = srv.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.body["model"] == "gpt-4o" and req.body["temperature"] == 0.7
    assert req.body["messages"] == [{"role": "user", "content": "hi"}]
    assert "tools" not in req.body


async def test_openai_tool_call_and_history_on_the_wire(srv):
    srv.script([Reply(tool_calls=[("call_9", "add", {"a": 1, "b": 2})])])
    history = [
        Message(role="system", content="be brief"),
        Message(role="user", content="add"),
        Message(role="assistant", tool_calls=[ToolCall(id="call_1", name="add", arguments={"a": 0, "b": 0})]),
        Message(role="tool", content="0", tool_call_id="call_1"),
    ]
    c = await openai_provider(srv).complete(history, [ADD])
    assert c.finish_reason == "tool_calls" and c.message.content == ""
    assert c.message.tool_calls == [ToolCall(id="call_9", name="add", arguments={"a": 1, "b": 2})]
    body = srv.requests[0].body
    assert body["tools"] == [LiteLLMProvider._to_lite_tool(ADD)]
    sent = body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert json.loads(sent[2]["tool_calls"][0]["function"]["arguments"]) == {"a": 0, "b": 0}
    assert sent[3]["tool_call_id"] == "call_1"


async def test_openai_stream_text(srv):
    srv.script([Reply(text="streamed text", input_tokens=8, output_tokens=3)])
    chunks = await collect(openai_provider(srv).stream(HI))
    texts = [c.text for c in chunks if c.type == "text"]
    assert len(texts) > 1 and "".join(texts) == "streamed text"
    assert chunks[-1].type == "done" and chunks[-1].finish_reason == "stop"
    usage = chunks[-1].usage
    assert (usage.input_tokens, usage.output_tokens) == (8, 3)
    assert usage.cost_usd == call_cost("openai/gpt-4o", usage) and usage.cost_usd > 0  # LiteLLM's price table
    body = srv.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_openai_stream_assembles_split_tool_calls(srv):
    calls = [("c1", "add", {"a": 10, "b": 20}), ("c2", "add", {"a": 3, "b": 4})]
    srv.script([Reply(text="ok", tool_calls=calls)])
    chunks = await collect(openai_provider(srv).stream(HI, [ADD]))
    assert [c.type for c in chunks] == ["text", "tool_calls", "done"]
    assert chunks[1].tool_calls == [ToolCall(id=i, name=n, arguments=a) for i, n, a in calls]
    assert chunks[2].finish_reason == "tool_calls" and chunks[2].usage.total_tokens == 18


@pytest.mark.parametrize("status,retryable", [(429, True), (500, True), (503, True), (400, False), (401, False)])
async def test_openai_http_errors_classified_with_one_request(srv, status, retryable):
    srv.script([Fail(status)])
    with pytest.raises(Exception) as info:
        await openai_provider(srv).complete(HI)
    assert getattr(info.value, "status_code", None) == status
    assert is_retryable(info.value) is retryable
    assert len(srv.requests) == 1  # num_retries=0: no hidden retries inside litellm / the SDK


async def test_openai_stream_error_before_first_chunk(srv):
    srv.script([Fail(429)])
    with pytest.raises(Exception) as info:
        await collect(openai_provider(srv).stream(HI))
    assert is_retryable(info.value) and len(srv.requests) == 1


async def test_api_key_scrubbed_from_errors(srv):
    srv.script([Fail(401, echo_auth=True), Fail(401, echo_auth=True)])
    for provider, key in [(openai_provider(srv), "sk-test"), (anthropic_provider(srv), "sk-ant-test")]:
        with pytest.raises(Exception) as info:
            await provider.complete(HI)
        e = info.value
        chain = [e, e.__cause__, e.__context__]
        assert "[redacted]" in str(e)
        assert not any(key in str(x) or key in repr(x) for x in chain if x is not None)
        assert getattr(e, "status_code", None) == 401 and not is_retryable(e)


async def test_fallback_over_real_http(srv):
    with VendorServer() as backup_srv:
        srv.script([Fail(429)])
        backup_srv.script(["from backup"])
        fp = FallbackProvider([openai_provider(srv), openai_provider(backup_srv)], max_retries_per_provider=0)
        c = await fp.complete(HI)
    assert c.message.content == "from backup"
    assert len(srv.requests) == 1 and len(backup_srv.requests) == 1


async def test_anthropic_text(srv):
    srv.script([Reply(text="bonjour", input_tokens=30, output_tokens=2)])
    c = await anthropic_provider(srv).complete([Message(role="system", content="be nice"), *HI])
    assert c.message.content == "bonjour" and c.finish_reason == "stop"
    assert (c.usage.input_tokens, c.usage.output_tokens) == (30, 2)
    [req] = srv.requests
    assert req.path == "/v1/messages" and req.headers["x-api-key"] == "sk-ant-test"
    assert req.body["model"] == "claude-sonnet-4-5"
    assert "be nice" in json.dumps(req.body["system"])
    assert [m["role"] for m in req.body["messages"]] == ["user"]


async def test_anthropic_tool_call(srv):
    srv.script([Reply(text="let me add", tool_calls=[("toolu_1", "add", {"a": 5, "b": 6})])])
    c = await anthropic_provider(srv).complete(HI, [ADD])
    assert c.finish_reason == "tool_calls"
    assert c.message.tool_calls == [ToolCall(id="toolu_1", name="add", arguments={"a": 5, "b": 6})]
    assert c.message.content == "let me add"
    assert srv.requests[0].body["tools"][0]["name"] == "add"
    assert srv.requests[0].body["tools"][0]["input_schema"] == ADD.parameters


async def test_anthropic_stream_tool_call(srv):
    srv.script([Reply(text="hm", tool_calls=[("toolu_2", "add", {"a": 1, "b": 1})], input_tokens=9,
                      output_tokens=6)])
    chunks = await collect(anthropic_provider(srv).stream(HI, [ADD]))
    assert "".join(c.text for c in chunks if c.type == "text") == "hm"
    [tc_chunk] = [c for c in chunks if c.type == "tool_calls"]
    assert tc_chunk.tool_calls == [ToolCall(id="toolu_2", name="add", arguments={"a": 1, "b": 1})]
    assert chunks[-1].type == "done" and chunks[-1].finish_reason == "tool_calls"
    usage = chunks[-1].usage
    assert (usage.input_tokens, usage.output_tokens) == (9, 6)
    assert usage.cost_usd == call_cost("anthropic/claude-sonnet-4-5", usage) and usage.cost_usd > 0


@pytest.mark.parametrize("status,retryable", [(429, True), (529, True), (401, False)])
async def test_anthropic_errors_classified(srv, status, retryable):
    srv.script([Fail(status)])
    with pytest.raises(Exception) as info:
        await anthropic_provider(srv).complete(HI)
    assert is_retryable(info.value) is retryable
    assert len(srv.requests) == 1


async def test_litellm_only_talks_to_our_server(srv, monkeypatch):
    targets: list = []
    real_connect, real_gai = socket.socket.connect, socket.getaddrinfo

    def connect(self, addr):
        targets.append(addr[0] if isinstance(addr, tuple) else addr)
        return real_connect(self, addr)

    def getaddrinfo(host, *a, **k):
        targets.append(host)
        return real_gai(host, *a, **k)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    srv.script(["a", "b", "c", Fail(429)])
    await openai_provider(srv).complete(HI)
    await collect(openai_provider(srv).stream(HI))
    await anthropic_provider(srv).complete(HI)
    with pytest.raises(Exception, match="rate_limit_error"):  # the scripted 429, as the vendor words it
        await anthropic_provider(srv).complete(HI)
    assert len(srv.requests) == 4
    assert set(targets) <= {"127.0.0.1", b"127.0.0.1"}, targets


def test_a_worker_of_litellm_agents_imports_litellm_as_it_starts() -> None:
    """`rein worker` starts litellm's import (seconds of CPU) in the background when an agent, or an
    agent it uses as a tool, calls LiteLLM (and ReinPlugin waits for it before the worker polls:
    tests/test_fleet_model_limit.py)."""
    import threading

    from rein import Agent
    from rein.blueprint.agent import uses_litellm
    from rein.core import prices
    from tests.agents import durable, traced

    assert uses_litellm([traced.agent]) and uses_litellm([traced.lead])
    assert not uses_litellm([durable.agent])
    assert uses_litellm([Agent(provider=MockProvider(["x"]), tools=[traced.helper.as_tool()], name="asks-helper")])
    assert uses_litellm([durable.agent, traced.agent])

    prices.preload_litellm()
    loading = [t for t in threading.enumerate() if t.name == "rein-load-litellm"]
    for thread in loading:
        thread.join(120)
    assert prices._LOADED and prices.load_litellm() is prices._LOADED[0]

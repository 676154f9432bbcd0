"""Tools: schema generation, serialisation, Tool/registry, validation and execution."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Literal, Optional, Union

import anyio
import pytest
from pydantic import BaseModel

from rein.blueprint.tools import (
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolRegistry,
    _type_to_schema,
    build_schema,
    execute_all,
    execute_tool,
    serialize_result,
    tool,
)
from rein.core.ir import ToolCall, ToolResult, ToolSpec
from tests.support.tools import tc


class Point(BaseModel):
    """A 2-D point."""

    x: int
    y: int = 0


# --------------------------------------------------------------------------- _type_to_schema


# rein-agent 0.2.0's output where it told the truth; unions, Optional, tuples, sets, Any, Enum classes
# and mixed Literals changed (rein-agent advertised them as strings, or dropped the null).
@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list, {"type": "array"}),
        (dict, {"type": "object"}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Union[None, float], {"anyOf": [{"type": "number"}, {"type": "null"}]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Union[int, str, None], {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (list[list[bool]], {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}}),
        (
            list[Literal["a", "b"]],
            {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        ),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (
            dict[str, list[str]],
            {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        ),
        (Literal["x", "y"], {"type": "string", "enum": ["x", "y"]}),
        (Literal[1, 2, 3], {"type": "integer", "enum": [1, 2, 3]}),
        (Literal[True, False], {"type": "boolean", "enum": [True, False]}),
        (Literal[1, 2.5], {"type": "number", "enum": [1, 2.5]}),
        (Literal[1, "a"], {"enum": [1, "a"]}),
        (
            tuple[int, str],
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2},
        ),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (set[int], {"type": "array", "items": {"type": "integer"}}),
        (Any, {}),
        (complex, {"type": "string"}),
    ],
)
def test_type_to_schema(tp: Any, expected: dict) -> None:
    assert _type_to_schema(tp) == expected


def test_type_to_schema_enum_class_and_custom_class() -> None:
    import enum

    class Color(enum.Enum):
        RED = "red"

    class Custom:
        pass

    assert _type_to_schema(Color) == {"type": "string", "enum": ["red"], "title": "Color"}
    assert _type_to_schema(Custom) == {}  # pydantic cannot describe it: any JSON value, passed on as is


def test_type_to_schema_pydantic_model_is_verbatim() -> None:
    schema = _type_to_schema(Point)
    assert schema == Point.model_json_schema()
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"x", "y"}
    assert schema["required"] == ["x"]
    assert schema["description"] == "A 2-D point."


# --------------------------------------------------------------------------- build_schema


def test_build_schema_required_defaults_and_skips() -> None:
    def f(self, a: int, b, *args, c: str = "x", d: float, **kwargs) -> None: ...

    assert build_schema(f) == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "string"}, "d": {"type": "number"}},
        "required": ["a", "b", "d"],
    }  # **kwargs: extra arguments are accepted, so no additionalProperties


def test_build_schema_no_required_key_when_all_optional() -> None:
    def f(cls, a: int = 1, b: Optional[str] = None) -> None: ...

    schema = build_schema(f)
    assert schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "additionalProperties": False,
    }
    assert "required" not in schema

    def g() -> None: ...

    assert build_schema(g) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_build_schema_unresolvable_hints_fall_back_to_string() -> None:
    def f(a: int, b: NoSuchType, c: list[int] = []) -> None: ...  # noqa: F821, B006

    assert build_schema(f) == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }


def test_build_schema_pydantic_param_and_containers() -> None:
    def f(p: Point, tags: list[Literal["a", "b"]], counts: dict[str, int], meta: dict, mode: Literal[1, 2] = 1) -> None: ...

    schema = build_schema(f)
    props = schema["properties"]
    assert props["p"]["type"] == "object"
    assert set(props["p"]["properties"]) == {"x", "y"}
    assert props["tags"] == {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
    assert props["counts"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["meta"] == {"type": "object"}
    assert props["mode"] == {"type": "integer", "enum": [1, 2]}
    assert schema["required"] == ["p", "tags", "counts", "meta"]


def test_build_schema_excludes_tool_context_param() -> None:
    def f(ctx: ToolContext, a: int) -> None: ...

    def g(a: int, context: Optional[ToolContext] = None) -> None: ...

    expected = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert build_schema(f) == expected
    assert build_schema(g) == expected
    assert Tool.from_function(f).context_param == "ctx"
    assert Tool.from_function(g).context_param == "context"


def test_build_schema_excludes_tool_context_even_when_hints_fail() -> None:
    def f(a: Missing, ctx: ToolContext) -> None: ...  # noqa: F821

    assert build_schema(f) == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert Tool.from_function(f).context_param == "ctx"


def test_build_schema_args_descriptions() -> None:
    def f(city: str, days: int = 3, unit: Literal["c", "f"] = "c", p: Point | None = None) -> str:
        """Get the weather forecast.

        Args:
            city: The city name,
                for example Paris.
            days (int): How many days ahead.
            p (Point, optional): Where exactly.

        Returns:
            The forecast text. days: not a parameter.
        """
        return ""

    props = build_schema(f)["properties"]
    assert props["city"] == {"type": "string", "description": "The city name, for example Paris."}
    assert props["days"] == {"type": "integer", "description": "How many days ahead."}
    assert props["unit"] == {"type": "string", "enum": ["c", "f"]}  # undocumented: no description
    assert props["p"]["description"] == "Where exactly."
    assert props["p"]["anyOf"] == [Point.model_json_schema(), {"type": "null"}]


def test_build_schema_without_args_section_has_no_descriptions() -> None:
    def f(a: int) -> None:
        """a: looks like an arg line, but there is no Args section."""

    assert build_schema(f)["properties"] == {"a": {"type": "integer"}}


# --------------------------------------------------------------------------- serialize_result


class _Out(BaseModel):
    a: int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("hi", "hi"),
        ("", ""),
        (_Out(a=1), '{"a":1}'),
        ({"city": "北京"}, '{"city": "北京"}'),
        ([1, "x"], '[1, "x"]'),
        (None, "None"),
        (123, "123"),
        (1.5, "1.5"),
        (True, "True"),
        ((1, 2), "(1, 2)"),
    ],
)
def test_serialize_result(value: Any, expected: str) -> None:
    assert serialize_result(value) == expected


def test_serialize_result_unserialisable_raises() -> None:
    with pytest.raises(TypeError):
        serialize_result({"x": object()})


# --------------------------------------------------------------------------- Tool and decorator


def test_from_function_defaults() -> None:
    def add(a: int, b: int = 0) -> int:
        """Add two numbers.

        Args:
            a: first
        """
        return a + b

    t = Tool.from_function(add)
    assert t.name == "add"
    assert t.description == "Add two numbers.\n\nArgs:\n    a: first"
    assert t.is_async is False
    assert t.parameters["required"] == ["a"]
    assert t.fn is add
    assert t.retries == 0 and t.timeout_s is None
    assert t.context_param is None
    assert t.spec() == ToolSpec(name="add", description=t.description, parameters=t.parameters)


def test_from_function_overrides_and_async() -> None:
    async def fetch(url: str) -> str:
        return url

    t = Tool.from_function(fetch, name="get", description="Fetch a URL.", retries=2, timeout_s=5)
    assert (t.name, t.description, t.is_async, t.retries, t.timeout_s) == ("get", "Fetch a URL.", True, 2, 5)
    assert Tool.from_function(lambda: 1).name == "<lambda>"

    def nodoc() -> None: ...

    assert Tool.from_function(nodoc).description == ""


def test_tool_constructor_stores_attributes_and_checks_options() -> None:
    def f(c: ToolContext) -> None: ...

    t = Tool(f, "n", "d", {"type": "object", "properties": {}}, False)
    assert (t.fn, t.name, t.description, t.is_async, t.context_param) == (f, "n", "d", False, "c")
    with pytest.raises(ValueError, match="retries"):
        Tool(f, "n", "d", {}, False, retries=-1)
    with pytest.raises(ValueError, match="timeout_s"):
        Tool(f, "n", "d", {}, False, timeout_s=0)


def test_tool_decorator_bare() -> None:
    @tool
    def greet(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    assert isinstance(greet, Tool)
    assert greet.name == "greet" and greet.description == "Say hello."
    assert greet.retries == 0


def test_tool_decorator_with_options() -> None:
    @tool(name="charge_card", description="Charge a card.", retries=3, timeout_s=30)
    def charge(amount: int, ctx: ToolContext) -> str:
        return "ok"

    assert isinstance(charge, Tool)
    assert (charge.name, charge.description, charge.retries, charge.timeout_s) == ("charge_card", "Charge a card.", 3, 30)
    assert charge.context_param == "ctx"
    assert charge.parameters == {
        "type": "object",
        "properties": {"amount": {"type": "integer"}},
        "required": ["amount"],
        "additionalProperties": False,
    }

    @tool()
    def plain() -> None: ...

    assert isinstance(plain, Tool) and plain.name == "plain"

    with pytest.raises(TypeError):
        tool("not a function")


def test_tool_context() -> None:
    beats: list[tuple] = []
    ctx = ToolContext("wf-1/call-1", attempt=2, tool_call_id="call-1", heartbeat=lambda *d: beats.append(d))
    assert (ctx.idempotency_key, ctx.attempt, ctx.tool_call_id) == ("wf-1/call-1", 2, "call-1")
    ctx.heartbeat("half", 50)
    ctx.heartbeat()
    assert beats == [("half", 50), ()]
    default = ToolContext("k")
    assert (default.attempt, default.tool_call_id) == (1, "")
    default.heartbeat("ignored")  # no-op without an injected callable
    assert "wf-1/call-1" in repr(ctx)


# --------------------------------------------------------------------------- registry


def test_registry_ops() -> None:
    @tool
    def a() -> str:
        return "a1"

    @tool
    def b() -> str:
        return "b"

    a2 = Tool.from_function(lambda: "a2", name="a")
    reg = ToolRegistry()
    assert len(reg) == 0 and reg.get("a") is None
    reg.add(a)
    reg.add(b)
    reg.add(a2)  # overwrites by name, keeps position
    assert len(reg) == 2
    assert "a" in reg and "b" in reg and "c" not in reg
    assert reg.get("a") is a2
    assert reg.names() == ["a", "b"]
    assert [t.name for t in reg] == ["a", "b"]
    assert [s.name for s in reg.specs()] == ["a", "b"]
    assert all(isinstance(s, ToolSpec) for s in reg.specs())


def test_registry_accepts_functions() -> None:
    def f(x: int) -> int:
        return x

    reg = ToolRegistry([f])
    assert isinstance(reg.get("f"), Tool)


# --------------------------------------------------------------------------- execute_tool


async def test_execute_sync_tool_runs_in_worker_thread() -> None:
    main_thread = threading.get_ident()
    seen: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        seen.append(threading.get_ident())
        return a + b

    result = await execute_tool(add, tc("add", "c1", a=1, b=2))
    assert result.model_dump() == {"tool_call_id": "c1", "content": "3", "is_error": False}
    assert seen and seen[0] != main_thread


async def test_execute_async_tool_and_serialisation() -> None:
    @tool
    async def info(city: str) -> dict:
        await asyncio.sleep(0)
        return {"city": city}

    result = await execute_tool(info, tc("info", "c1", city="北京"))
    assert not result.is_error
    assert result.content == '{"city": "北京"}'


async def test_execute_raising_tool_becomes_error_result() -> None:
    @tool
    def boom() -> None:
        raise ValueError("bad thing")

    result = await execute_tool(boom, tc("boom", "c1"))
    assert result.is_error
    assert result.content == "Tool 'boom' failed: ValueError: bad thing"


async def test_execute_raise_errors_propagates() -> None:
    @tool(retries=3)
    async def flaky() -> None:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError, match="down"):
        await execute_tool(flaky, tc("flaky", "c1"), raise_errors=True)


async def test_execute_unserialisable_result_is_error() -> None:
    @tool
    def weird() -> dict:
        return {"x": object()}

    result = await execute_tool(weird, tc("weird", "c1"), raise_errors=True)
    assert result.is_error
    assert "weird" in result.content and "TypeError" in result.content


async def test_execute_cancellation_is_not_caught() -> None:
    @tool
    async def cancelled() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await execute_tool(cancelled, tc("cancelled", "c1"))


async def test_execute_unknown_tool() -> None:
    result = await execute_tool(None, tc("nope", "c1"), available=["a", "b"])
    assert result.is_error
    assert result.tool_call_id == "c1"
    assert result.content == "Unknown tool 'nope'. Available tools: a, b"
    empty = await execute_tool(None, tc("nope", "c1"))
    assert empty.is_error and "Unknown tool 'nope'" in empty.content


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_execute_bad_argument_type() -> None:
    result = await execute_tool(add, tc("add", "c1", a=1, b="x"))
    assert result.is_error
    assert result.content.startswith("Invalid arguments for tool 'add': ")
    assert "b: Input should be a valid integer" in result.content
    assert "(got 'x')" in result.content


async def test_execute_missing_required_argument() -> None:
    result = await execute_tool(add, tc("add", "c1", a=1))
    assert result.is_error
    assert result.content == "Invalid arguments for tool 'add': b: missing required argument"


async def test_execute_unexpected_argument_and_multiple_problems() -> None:
    result = await execute_tool(add, tc("add", "c1", a=1, b="x", c=3))
    assert result.is_error
    assert "b: Input should be a valid integer" in result.content
    assert "c: unexpected argument" in result.content
    assert "; " in result.content


async def test_invalid_arguments_never_raise_even_with_raise_errors() -> None:
    result = await execute_tool(add, tc("add", "c1", c=1), raise_errors=True)
    assert result.is_error and "a: missing required argument" in result.content


def test_validate_arguments_directly() -> None:
    assert add.validate_arguments({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(ToolArgumentsError, match="add"):
        add.validate_arguments({"a": "one", "b": 2})
    # Strict: the schema says integer, so "1" is refused rather than quietly converted.
    with pytest.raises(ToolArgumentsError, match=r"a: Input should be a valid integer \(got '1'\)"):
        add.validate_arguments({"a": "1", "b": 2})


async def test_optional_arguments_keep_function_defaults() -> None:
    sentinel = object()

    @tool
    def f(a: int, marker: Any = sentinel, n: int = None) -> str:  # type: ignore[assignment]
        return f"{a} {marker is sentinel} {n}"

    result = await execute_tool(f, tc("f", "c1", a=1))
    assert result.content == "1 True None"


async def test_unannotated_params_are_strings() -> None:
    @tool
    def echo(x) -> str:
        return repr(x)

    assert echo.parameters["properties"] == {"x": {"type": "string"}}
    assert (await execute_tool(echo, tc("echo", "c1", x="hi"))).content == "'hi'"
    bad = await execute_tool(echo, tc("echo", "c1", x=[1, {"a": 2}]))
    assert bad.is_error and "x: Input should be a valid string" in bad.content


async def test_parameter_names_that_clash_with_basemodel_attributes() -> None:
    @tool
    def f(json: str, copy: int, model_config: bool = False) -> str:
        return f"{json}-{copy}-{model_config}"

    assert (await execute_tool(f, tc("f", "c1", json="j", copy=2, model_config=True))).content == "j-2-True"
    bad = await execute_tool(f, tc("f", "c1", json="j", copy="x"))
    assert "copy: " in bad.content


async def test_pydantic_param_receives_model_instance() -> None:
    received: list[Any] = []

    @tool
    def move(p: Point, points: list[Point] | None = None) -> str:
        received.append(p)
        received.append(points)
        return f"{p.x},{p.y}"

    result = await execute_tool(move, tc("move", "c1", p={"x": 3}, points=[{"x": 1, "y": 2}]))
    assert result.content == "3,0"
    assert isinstance(received[0], Point)
    assert isinstance(received[1][0], Point)

    bad = await execute_tool(move, tc("move", "c1", p={"y": 1}))
    assert bad.is_error and "p.x: missing required field" in bad.content


async def test_positional_only_parameters() -> None:
    @tool
    def f(a: int, /, b: int = 2, c: int = 3) -> str:
        return f"{a}{b}{c}"

    assert (await execute_tool(f, tc("f", "c1", a=1, c=5))).content == "125"


async def test_var_keyword_tool_accepts_extra_arguments() -> None:
    @tool
    def f(a: int, **extra: Any) -> str:
        return f"{a} {sorted(extra.items())}"

    assert f.parameters == {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert (await execute_tool(f, tc("f", "c1", a=1, z=2))).content == "1 [('z', 2)]"


async def test_tool_context_injected() -> None:
    beats: list[tuple] = []
    seen: list[ToolContext] = []

    @tool(retries=2)
    def charge(amount: int, ctx: ToolContext) -> str:
        seen.append(ctx)
        ctx.heartbeat("charging", amount)
        return ctx.idempotency_key

    ctx = ToolContext("wf-9/call-7", attempt=2, tool_call_id="call-7", heartbeat=lambda *d: beats.append(d))
    result = await execute_tool(charge, tc("charge", cid="call-7", amount=10), ctx)
    assert result.content == "wf-9/call-7"
    assert seen == [ctx] and seen[0].attempt == 2
    assert beats == [("charging", 10)]


async def test_tool_context_default_when_none_given() -> None:
    @tool
    async def whoami(context: ToolContext) -> str:
        return f"{context.idempotency_key}|{context.attempt}|{context.tool_call_id}"

    assert whoami.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert (await execute_tool(whoami, tc("whoami", cid="abc"))).content == "abc|1|abc"


async def test_tool_context_cannot_be_supplied_by_the_model() -> None:
    @tool
    def f(ctx: ToolContext) -> str:
        return "x"

    result = await execute_tool(f, tc("f", "c1", ctx="forged"))
    assert result.is_error and "ctx: unexpected argument" in result.content


# --------------------------------------------------------------------------- execute_all


async def test_execute_all_keeps_call_order_and_runs_concurrently() -> None:
    finished: list[str] = []

    @tool
    async def sleepy(name: str, delay: float) -> str:
        await asyncio.sleep(delay)
        finished.append(name)
        return name

    reg = ToolRegistry([sleepy, add])
    calls = [
        tc("sleepy", cid="1", name="slow", delay=0.15),
        tc("missing", cid="2"),
        tc("sleepy", cid="3", name="fast", delay=0.0),
        tc("add", cid="4", a=2, b=3),
        tc("sleepy", cid="5", name="mid", delay=0.05),
    ]
    results = await execute_all(reg, calls)
    assert [r.tool_call_id for r in results] == ["1", "2", "3", "4", "5"]
    assert [r.content for r in results[2:]] == ["fast", "5", "mid"]
    assert results[0].content == "slow"
    assert results[1].is_error and results[1].content == "Unknown tool 'missing'. Available tools: sleepy, add"
    # Concurrent: the short sleeps finished before the long one.
    assert finished == ["fast", "mid", "slow"]


async def test_execute_all_context_factory() -> None:
    @tool
    def key(ctx: ToolContext) -> str:
        return ctx.idempotency_key

    reg = ToolRegistry([key])
    results = await execute_all(
        reg,
        [tc("key", cid="a"), tc("key", cid="b")],
        context_factory=lambda c: ToolContext(f"run-1/{c.id}", tool_call_id=c.id),
    )
    assert [r.content for r in results] == ["run-1/a", "run-1/b"]
    assert await execute_all(reg, []) == []


# --------------------------------------------------------------------------- exact behaviour
# (written against mutation testing, docs/mutation.md: what users and models see)


def test_a_plain_tool_needs_no_approval_runs_as_a_normal_activity_and_never_retries() -> None:
    def lookup(q: str) -> str:
        return q

    for made in (tool(lookup), Tool.from_function(lookup), Tool(lookup, "lookup", "", {}, False)):
        assert (made.requires_approval, made.local, made.retries, made.timeout_s) == (False, False, 0, None)
        assert made.asks_human is False and made.agent is None


def test_tool_options_reach_the_tool_on_every_path() -> None:
    def lookup(q: str) -> str:
        return q

    options = dict(name="find", retries=2, timeout_s=0.5, requires_approval=True, local=True)
    for made in (tool(lookup, **options), tool(**options)(lookup), Tool.from_function(lookup, **options)):
        assert (made.name, made.retries, made.timeout_s, made.requires_approval, made.local) == (
            "find", 2, 0.5, True, True,
        )


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("retries", True, "Tool 'f': retries must be a non-negative integer, got True"),
        ("retries", -1, "Tool 'f': retries must be a non-negative integer, got -1"),
        ("retries", 1.0, "Tool 'f': retries must be a non-negative integer, got 1.0"),
        ("timeout_s", True, "Tool 'f': timeout_s must be a positive number or None, got True"),
        ("timeout_s", "5", "Tool 'f': timeout_s must be a positive number or None, got '5'"),
        ("timeout_s", 0, "Tool 'f': timeout_s must be a positive number or None, got 0"),
    ],
)
def test_bad_tool_options_are_refused_with_a_clear_error(option: str, value: Any, message: str) -> None:
    def f() -> None: ...

    with pytest.raises(ValueError) as raised:
        tool(f, **{option: value})
    assert str(raised.value) == message


def test_tool_refuses_a_non_callable_and_says_how_to_name_a_tool() -> None:
    with pytest.raises(TypeError) as raised:
        tool("weather")
    assert str(raised.value) == (
        "@tool expects a function or keyword options only, got str; write @tool(name=...) to set the name"
    )
    with pytest.raises(TypeError) as raised:
        Tool.from_function(42)
    assert str(raised.value) == "a tool must wrap a callable, got int"


async def test_a_callable_object_is_named_after_its_class_and_an_async_call_is_awaited() -> None:
    class Forecast:
        async def __call__(self, city: str) -> str:
            return f"sunny in {city}"

    made = Tool.from_function(Forecast())
    assert made.name == "Forecast" and not made.is_async  # a sync callable returning an awaitable
    assert (await execute_tool(made, tc("Forecast", "c1", city="Oslo"))).content == "sunny in Oslo"


async def test_a_tool_built_directly_validates_lazily_and_a_builtin_without_signature_runs() -> None:
    def add_(a: int, b: int) -> int:
        return a + b

    direct = Tool(add_, "add", "", {}, False)
    assert direct.validate_arguments({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(ToolArgumentsError):
        direct.validate_arguments({"a": "x", "b": 2})
    def stamp(text: str, ctx: ToolContext) -> str:
        return f"{text}@{ctx.idempotency_key}"

    with_context = Tool(stamp, "stamp", "", {}, False)
    assert with_context.validate_arguments({"text": "a"}) == {"text": "a"}
    assert (await execute_tool(with_context, tc("stamp", cid="k1", text="a"))).content == "a@k1"
    builtin = Tool(dict, "as_dict", "", {}, False)  # inspect.signature(dict) fails: nothing to check
    assert builtin.validate_arguments({"k": 1}) == {"k": 1}
    assert (await execute_tool(builtin, tc("as_dict", "c1", k=1))).content == '{"k": 1}'


async def test_an_omitted_positional_only_argument_keeps_its_default() -> None:
    @tool
    def f(a: int = 7, b: int = 2, /) -> str:
        return f"{a}{b}"

    assert (await execute_tool(f, tc("f", "c1", b=5))).content == "75"

    @tool
    async def g(a: int, /, b: int = 2) -> str:
        return f"{a}{b}"

    assert (await execute_tool(g, tc("g", "c1", a=1))).content == "12"


async def test_unreadable_arguments_are_an_error_result_and_the_tool_does_not_run() -> None:
    ran: list[str] = []

    @tool
    def f(x: int) -> str:
        ran.append("f")
        return "ran"

    broken = ToolCall(id="c9", name="f", arguments={}, arguments_error="Expecting ',' delimiter")
    result = await execute_tool(f, broken)
    assert result == ToolResult(
        tool_call_id="c9",
        content="Invalid arguments for tool 'f': Expecting ',' delimiter. "
        "The tool was not run; send the arguments again as one complete JSON object.",
        is_error=True,
    )
    assert ran == []


async def test_unknown_tool_with_no_tools_at_all() -> None:
    result = await execute_tool(None, tc("nope", "c1"))
    assert result.is_error and result.content == "Unknown tool 'nope'. Available tools: (none)"


@pytest.mark.parametrize("canceller", ["asyncio task.cancel()", "anyio cancel scope"])
async def test_a_cancelled_sync_tool_is_abandoned_not_waited_for(canceller: str) -> None:
    # A sync tool's thread cannot be stopped: cancelling the call (a Temporal activity cancel is
    # an asyncio cancel; an app's anyio timeout is a cancel scope) returns at once and the thread
    # finishes on its own later, so a run never hangs on a stuck tool.
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    @tool
    def stuck() -> str:
        started.set()
        release.wait(5)  # bounds the test if the call wrongly waits for the thread
        finished.set()
        return "late"

    async def until_started() -> None:
        while not started.is_set():
            await asyncio.sleep(0.01)

    try:
        if canceller == "anyio cancel scope":
            async with anyio.create_task_group() as group:
                group.start_soon(execute_tool, stuck, tc("stuck", "c1"))
                await until_started()
                group.cancel_scope.cancel()
        else:
            task = asyncio.ensure_future(execute_tool(stuck, tc("stuck", "c1")))
            await until_started()
            task.cancel()
            await asyncio.wait([task])
            assert task.cancelled()
        assert not finished.is_set()  # the call returned while the tool was still running
    finally:
        release.set()


async def test_describe_agent_reports_each_tools_flags_to_the_durable_run() -> None:
    from temporalio.testing import ActivityEnvironment

    from rein import Agent, MockProvider, ask_human
    from rein.activities.agents import AgentActivities
    from rein.core.contract import DescribeInput

    @tool(requires_approval=True, local=True, retries=2, timeout_s=9)
    def pay(amount: int) -> str:
        return "paid"

    helper = Agent(provider=MockProvider([]), name="helper", engine="local")
    agent = Agent(provider=MockProvider([]), tools=[pay, add, ask_human, helper.as_tool("delegate")], engine="local")
    described = await ActivityEnvironment().run(AgentActivities({"main": agent}).describe_agent, DescribeInput(agent="main"))
    flags = {
        t.spec.name: (t.requires_approval, t.local, t.asks_human, t.agent, t.retries, t.timeout_s)
        for t in described.tools
    }
    assert flags == {
        "pay": (True, True, False, None, 2, 9),
        "add": (False, False, False, None, 0, None),
        "ask_human": (False, False, True, None, 0, None),
        "delegate": (False, False, False, "helper", 0, None),
    }

"""The schema a tool advertises says exactly what its validation accepts.

Each row is a parameter type with JSON values on both sides of its contract. Every
value is checked twice: by the advertised JSON Schema (`jsonschema`, draft 2020-12)
and by the tool's own validation. Both must give the row's verdict, so a type whose
schema says one thing while validation does another fails here.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict, Union

import jsonschema
import pytest
from pydantic import BaseModel, Field

from rein.blueprint.tools import Tool, ToolArgumentsError, execute_tool, tool
from rein.core.ir import ToolCall


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(TypedDict):
    street: str
    number: int


class Options(TypedDict, total=False):
    verbose: bool


class WithOptional(TypedDict):
    name: str
    note: NotRequired[str]


@dataclasses.dataclass
class Size:
    width: int
    height: int = 1


class Point(BaseModel):
    x: int
    y: int = 0


class Segment(BaseModel):
    start: Point
    end: Point
    label: str | None = None


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


class Opaque:
    """A plain class: no schema, so the parameter takes any JSON value and gets it as is."""


Missing = object()  # the argument is left out

# (annotation, default or Missing, values the contract accepts, values it refuses)
ROWS: list[tuple[str, Any, Any, list[Any], list[Any]]] = [
    ("str", str, Missing, ["", "hi"], [1, None, ["a"], True]),
    ("int", int, Missing, [0, -3, 10**12, 3.0], ["1", 1.5, None, True, [1]]),
    ("float", float, Missing, [1.5, 2, -0.25, 2.0], ["1.5", None, True]),
    ("bool", bool, Missing, [True, False], [1, 0, "true", None]),
    ("list[int]", list[int], Missing, [[], [1, 2]], [[1, "a"], "1,2", {"a": 1}]),
    ("dict[str, int]", dict[str, int], Missing, [{}, {"a": 1}], [{"a": "x"}, [1], "a=1"]),
    ("tuple[int, str]", tuple[int, str], Missing, [[1, "a"]], [[1], [1, "a", 2], ["a", 1], "1,a"]),
    ("tuple[int, ...]", tuple[int, ...], Missing, [[], [1, 2, 3]], [[1, "x"], "1,2"]),
    ("set[str]", set[str], Missing, [[], ["a", "b"], ["a", "a"]], [[1], "a"]),
    ("frozenset[int]", frozenset[int], Missing, [[1, 2]], [["x"]]),
    ("int | float", int | float, Missing, [1, 1.5], ["1", None]),
    ("int | str", Union[int, str], Missing, [1, "one"], [1.5, None, [1]]),
    ("list[int] | dict[str, int]", list[int] | dict[str, int], Missing, [[1], {"a": 1}], ["x", [{"a": 1}]]),
    ("Optional[int] required", Optional[int], Missing, [None, 3], ["3", 2.5]),
    ("int | None = None", int | None, None, [None, 7], ["7", "x"]),
    ("int = 3", int, 3, [4], [None, "4"]),
    ("str = 'x'", str, "x", ["y"], [None, 1]),
    ("Literal['a', 'b']", Literal["a", "b"], Missing, ["a", "b"], ["c", None, 1]),
    ("Literal[1, 2]", Literal[1, 2], Missing, [1, 2], [3, "1", True]),
    ("Literal[1, 2.5]", Literal[1, 2.5], Missing, [1, 2.5], [2, "2.5"]),
    ("Literal['a', 1]", Literal["a", 1], Missing, ["a", 1], ["1", 2, "b"]),
    ("Enum", Color, Missing, ["red", "green"], ["RED", "blue", 1]),
    ("IntEnum", Level, Missing, [1, 2], [3, "1", "LOW", True]),
    ("Literal[True]", Literal[True], Missing, [True], [1, False]),
    ("Literal[0, 1] in a list", list[Literal[0, 1]], Missing, [[0, 1]], [[False], [True, 1]]),
    ("list[Enum]", list[Color], Missing, [["red"], []], [["red", "pink"]]),
    ("TypedDict", Address, Missing, [{"street": "Main", "number": 3}], [{"street": "Main"}, {"street": "Main", "number": "3"}, "Main 3"]),
    ("TypedDict total=False", Options, Missing, [{}, {"verbose": True}], [{"verbose": "yes"}]),
    ("TypedDict NotRequired", WithOptional, Missing, [{"name": "a"}, {"name": "a", "note": "b"}],
     [{"note": "b"}, {"name": "a", "note": 1}]),
    ("dataclass", Size, Missing, [{"width": 2}, {"width": 2, "height": 3}], [{"height": 3}, {"width": "2"}, [2, 3]]),
    ("BaseModel", Point, Missing, [{"x": 1}, {"x": 1, "y": 2}], [{"y": 1}, {"x": "1"}, "1,2"]),
    (
        "nested BaseModel",
        Segment,
        Missing,
        [{"start": {"x": 1}, "end": {"x": 2, "y": 3}}, {"start": {"x": 1}, "end": {"x": 2}, "label": None}],
        [{"start": {"x": 1}}, {"start": {"x": 1}, "end": {"y": 2}}, {"start": {"x": 1}, "end": {"x": 2}, "label": 5}],
    ),
    ("recursive BaseModel", Tree, Missing, [{"value": 1, "children": [{"value": 2}]}], [{"value": 1, "children": [{"v": 2}]}]),
    ("list[BaseModel]", list[Point], Missing, [[{"x": 1}], []], [[{"x": "a"}], [1]]),
    ("dict[str, BaseModel]", dict[str, Point], Missing, [{"p": {"x": 1}}], [{"p": {"y": 1}}]),
    ("Optional[BaseModel] = None", Optional[Point], None, [None, {"x": 1}], [{"y": 1}, "p"]),
    ("Annotated[int, Field(ge=0, le=10)]", Annotated[int, Field(ge=0, le=10)], Missing, [0, 10], [-1, 11, "5"]),
    ("Annotated[str, Field(min_length=2)]", Annotated[str, Field(min_length=2, max_length=3)], Missing, ["ab"], ["a", "abcd"]),
    ("Annotated[list[int], Field(max_length=2)]", Annotated[list[int], Field(max_length=2)], Missing, [[1, 2]], [[1, 2, 3]]),
    ("Any", Any, Missing, [1, "a", None, [1], {"a": [1]}], []),
    ("a class pydantic cannot describe", Opaque, Missing, [1, "a", {"a": [1]}], []),
    ("dict", dict, Missing, [{}, {"a": [1]}], [[], "x"]),
    ("list", list, Missing, [[], [1, "a"]], [{}, "x"]),
]


def _tool_for(annotation: Any, default: Any) -> Tool:
    if default is Missing:

        def f(x):  # type: ignore[no-untyped-def]
            return repr(x)

    else:

        def f(x=default):  # type: ignore[no-untyped-def]
            return repr(x)

    f.__annotations__ = {"x": annotation}
    return Tool.from_function(f, name="f")


def _accepted(t: Tool, arguments: dict[str, Any]) -> bool:
    try:
        t.validate_arguments(arguments)
    except ToolArgumentsError:
        return False
    return True


@pytest.mark.parametrize(("label", "annotation", "default", "good", "bad"), ROWS, ids=[r[0] for r in ROWS])
def test_schema_and_validation_agree(label: str, annotation: Any, default: Any, good: list, bad: list) -> None:
    t = _tool_for(annotation, default)
    jsonschema.Draft202012Validator.check_schema(t.parameters)
    schema = jsonschema.Draft202012Validator(t.parameters)
    for value in good:
        arguments = {"x": value}
        assert schema.is_valid(arguments), f"{label}: the schema refuses {value!r}"
        assert _accepted(t, arguments), f"{label}: validation refuses {value!r}"
    for value in bad:
        arguments = {"x": value}
        assert not schema.is_valid(arguments), f"{label}: the schema accepts {value!r}"
        assert not _accepted(t, arguments), f"{label}: validation accepts {value!r}"
    # Leaving the argument out, and sending one the tool does not have.
    required = default is Missing
    assert schema.is_valid({}) is not required and _accepted(t, {}) is not required
    assert not schema.is_valid({"x": good[0] if good else 1, "y": 1})
    assert not _accepted(t, {"x": good[0] if good else 1, "y": 1})


def test_validated_values_have_the_annotated_types() -> None:
    def f(
        color: Color,
        level: Level,
        pair: tuple[int, str],
        tags: set[str],
        size: Size,
        seg: Segment,
        addr: Address,
        tree: Tree,
    ) -> None: ...

    values = Tool.from_function(f).validate_arguments(
        {
            "color": "green",
            "level": 2,
            "pair": [1, "a"],
            "tags": ["a", "a", "b"],
            "size": {"width": 2},
            "seg": {"start": {"x": 1}, "end": {"x": 2}},
            "addr": {"street": "Main", "number": 3},
            "tree": {"value": 1, "children": [{"value": 2}]},
        }
    )
    assert values["color"] is Color.GREEN
    assert values["level"] is Level.HIGH
    assert values["pair"] == (1, "a")
    assert values["tags"] == {"a", "b"}
    assert values["size"] == Size(width=2, height=1)
    assert values["seg"] == Segment(start=Point(x=1), end=Point(x=2))
    assert values["addr"] == {"street": "Main", "number": 3}
    assert values["tree"].children[0] == Tree(value=2)


def test_recursive_model_keeps_its_definition() -> None:
    def f(tree: Tree) -> None: ...

    schema = Tool.from_function(f).parameters
    assert schema["properties"]["tree"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert set(schema["$defs"]) == {"Tree"}


def test_nested_models_are_inlined() -> None:
    def f(seg: Segment) -> None: ...

    schema = Tool.from_function(f).parameters
    assert "$defs" not in schema
    start = schema["properties"]["seg"]["properties"]["start"]
    assert start["type"] == "object" and start["required"] == ["x"]


def test_annotated_field_description_and_constraints() -> None:
    def f(
        count: Annotated[int, Field(ge=0, description="How many, at least zero.")],
        limit: int = Field(10, le=100, description="Upper bound."),
    ) -> str:
        """Count things.

        Args:
            count: Overridden by the Field description.
        """
        return f"{count}/{limit}"

    t = Tool.from_function(f)
    assert t.parameters["properties"] == {
        "count": {"type": "integer", "minimum": 0, "description": "How many, at least zero."},
        "limit": {"type": "integer", "maximum": 100, "description": "Upper bound."},
    }
    assert t.parameters["required"] == ["count"]
    # The default given as Field(10, ...) reaches the function as 10, not as a FieldInfo.
    assert t.validate_arguments({"count": 1}) == {"count": 1, "limit": 10}
    with pytest.raises(ToolArgumentsError, match="limit: Input should be less than or equal to 100"):
        t.validate_arguments({"count": 1, "limit": 101})


GOOGLE = '''Book a table.

Args:
    city: The city,
        for example Paris.
    guests (int): How many people.
    when: Ignored: not a parameter section entry of ours.

Returns:
    The booking id.
'''

NUMPY = '''Book a table.

Parameters
----------
city : str
    The city,
    for example Paris.
guests : int, optional
    How many people.

Returns
-------
str
    The booking id.
'''

SPHINX = '''Book a table.

:param city: The city,
    for example Paris.
:param guests: How many people.
:type guests: int
:returns: The booking id.
'''


@pytest.mark.parametrize("doc", [GOOGLE, NUMPY, SPHINX], ids=["google", "numpy", "sphinx"])
def test_docstring_parameter_descriptions(doc: str) -> None:
    def book(city: str, guests: int = 2) -> str:
        return city

    book.__doc__ = doc
    props = Tool.from_function(book).parameters["properties"]
    assert props["city"] == {"type": "string", "description": "The city, for example Paris."}
    assert props["guests"] == {"type": "integer", "description": "How many people."}
    assert set(props) == {"city", "guests"}


def test_typing_typeddict_is_accepted() -> None:
    # typing.TypedDict (not typing_extensions) is what users write; pydantic refuses it before 3.12.
    def f(addr: Address) -> None: ...

    schema = Tool.from_function(f).parameters["properties"]["addr"]
    assert schema["type"] == "object"
    assert schema["required"] == ["street", "number"]
    assert schema["properties"]["number"]["type"] == "integer"


def test_classes_local_to_the_defining_function_resolve() -> None:
    # This module uses `from __future__ import annotations`, so the hints are strings naming
    # classes that exist only in this function's frame.
    class Mood(enum.Enum):
        HAPPY = "happy"

    class Where(TypedDict):
        city: str

    @tool
    def feel(mood: Mood, where: Where) -> str:
        return mood.value

    props = feel.parameters["properties"]
    assert props["mood"]["enum"] == ["happy"]
    assert props["where"]["properties"] == {"city": {"title": "City", "type": "string"}}
    assert feel.validate_arguments({"mood": "happy", "where": {"city": "Oslo"}})["mood"] is Mood.HAPPY


def test_a_tool_made_in_a_factory_validates_later_with_its_local_classes() -> None:
    # The worker validates calls long after the defining frame is gone: validation uses the
    # model built when the tool was made, not one rebuilt from whatever frame calls it.
    def make() -> Tool:
        class Mood(enum.Enum):
            HAPPY = "happy"

        @tool
        def feel(mood: Mood) -> str:
            return mood.value

        return feel

    feel = make()
    assert feel.validate_arguments({"mood": "happy"})["mood"].value == "happy"


async def test_a_refused_argument_is_an_error_result_the_model_can_read() -> None:
    @tool
    def paint(color: Color, pair: tuple[int, int]) -> str:
        return f"{color.value} {pair}"

    ok = await execute_tool(paint, ToolCall(id="1", name="paint", arguments={"color": "red", "pair": [1, 2]}))
    assert (ok.is_error, ok.content) == (False, "red (1, 2)")
    bad = await execute_tool(paint, ToolCall(id="2", name="paint", arguments={"color": "RED", "pair": "1,2"}))
    assert bad.is_error
    assert "color: Input should be 'red' or 'green' (got 'RED')" in bad.content
    assert "pair: Input should be a valid array (got '1,2')" in bad.content

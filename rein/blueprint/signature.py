"""One pydantic model per tool: the JSON Schema the model sees and the validation of what it sends.

`ToolSignature(fn)` builds a pydantic model from a function's signature (type
hints, defaults, `Annotated`/`Field` metadata) and takes parameter descriptions
from its docstring (Google, NumPy or Sphinx style, parsed by griffe). The same
model produces `schema` and validates arguments, in pydantic's strict JSON mode:
the arguments arrive as JSON, and strict JSON validation accepts exactly what
the JSON Schema describes (an `int` parameter takes 3, not "3"; a tuple takes an
array of the right length; an Enum takes one of its values).

The schema keeps rein-agent 0.2.0's shape where that shape told the truth:
`{"type": "object", "properties": ..., "required": [...]}`, no titles or
defaults on parameters, nested models inlined. Parameters without an annotation,
and all parameters when the hints cannot be resolved, are strings (in the schema
and in validation). A type pydantic cannot describe accepts any JSON value.
"""

from __future__ import annotations

import enum
import inspect
import json
import logging
import sys
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import griffe
import typing_extensions
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError, to_jsonable_python

from rein.core.errors import error_text

__all__ = ["ToolSignature", "ToolArgumentsError", "param_descriptions", "type_schema"]


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool's signature; the text is fed back to it."""


# ---------------------------------------------------------------------------
# Docstrings
# ---------------------------------------------------------------------------

_QUIET = {"warnings": False}
_DOC_OPTIONS: Any = {"google": _QUIET, "numpy": _QUIET, "sphinx": _QUIET}


def param_descriptions(doc: str | None) -> dict[str, str]:
    """Per-parameter descriptions from a docstring's parameter section (any style griffe detects).

    Line breaks inside a description become single spaces.
    """
    if not doc:
        return {}
    logger = logging.getLogger("griffe")
    level = logger.level
    logger.setLevel(logging.ERROR)  # griffe reports docstring style nits as warnings; they are not ours
    try:
        sections = griffe.parse_auto(griffe.Docstring(doc), per_style_options=_DOC_OPTIONS)
    except Exception:  # a docstring griffe cannot read has no usable descriptions
        return {}
    finally:
        logger.setLevel(level)
    found: dict[str, str] = {}
    for section in sections:
        if section.kind in (griffe.DocstringSectionKind.parameters, griffe.DocstringSectionKind.other_parameters):
            for param in section.value:
                text = " ".join(str(param.description or "").split())
                if text:
                    found[param.name.lstrip("*")] = text
    return found


# ---------------------------------------------------------------------------
# Context parameter
# ---------------------------------------------------------------------------


def _is_context(tp: Any, context_type: type) -> bool:
    """True for the context type, `Optional` of it, and their string spellings."""
    if tp is context_type:
        return True
    name = context_type.__name__
    if isinstance(tp, str):
        text = tp.replace(" ", "").replace("'", "").replace('"', "")
        for prefix in ("", "rein.", "rein.blueprint.tools.", "tools."):
            full = prefix + name
            if text in (full, f"{full}|None", f"None|{full}", f"Optional[{full}]"):
                return True
        return False
    if get_origin(tp) in (Union, types.UnionType):
        non_none = [a for a in get_args(tp) if a is not type(None)]
        return len(non_none) == 1 and non_none[0] is context_type
    return False


def _hints(fn: Callable) -> dict[str, Any] | None:
    """`get_type_hints(fn, include_extras=True)`, or None when the hints cannot be resolved.

    String annotations (`from __future__ import annotations`) may name classes local to the
    function that defined the tool; those resolve in the locals of the nearest caller outside
    rein (where `@tool`, `Tool.from_function` or `Agent(tools=...)` was called).
    """
    try:
        return get_type_hints(fn, include_extras=True)
    except NameError:
        pass
    except Exception:
        return None
    try:
        return get_type_hints(fn, localns=_caller_locals(), include_extras=True)
    except Exception:
        return None


def _caller_locals() -> dict[str, Any]:
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "rein":
        frame = frame.f_back
    return dict(frame.f_locals) if frame is not None else {}


def find_context_param(fn: Callable, context_type: type, hints: dict[str, Any] | None = None) -> str | None:
    """Name of the parameter annotated `context_type`, found by annotation, not by name."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if hints is None:
        hints = _hints(fn)
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        tp = hints[pname] if hints is not None and pname in hints else param.annotation
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        if _is_context(tp, context_type):
            return pname
    return None


# ---------------------------------------------------------------------------
# Types pydantic reads
# ---------------------------------------------------------------------------


class _Probe(typing.TypedDict):
    """Only its metaclass is used: how `typing.TypedDict` classes are told apart."""


_TYPING_TYPEDDICT = type(_Probe)


def _compatible(tp: Any) -> Any:
    """`tp` with `typing.TypedDict` classes rebuilt on `typing_extensions` (pydantic needs that before 3.12)."""
    if sys.version_info >= (3, 12):
        return tp
    if type(tp) is _TYPING_TYPEDDICT:
        hints = typing.get_type_hints(tp, include_extras=True)
        fields = {
            k: _compatible(v) if k in tp.__required_keys__ else typing_extensions.NotRequired[_compatible(v)]
            for k, v in hints.items()
        }
        namespace = {"__annotations__": fields, "__module__": tp.__module__, "__doc__": tp.__doc__}
        return types.new_class(tp.__name__, (typing_extensions.TypedDict,), {}, lambda ns: ns.update(namespace))
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return _exact_choices(tp, args)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _exact_choices(tp, tuple(m.value for m in tp))
    if not args:
        return tp
    new = tuple(_compatible(a) if not isinstance(a, (FieldInfo, str)) else a for a in args)
    if new == args:
        return tp
    if origin is Annotated:
        return Annotated[(new[0], *new[1:])]
    if origin in (Union, types.UnionType):
        return Union[new]  # type: ignore[return-value]
    try:
        return origin[new] if len(new) > 1 else origin[new[0]]
    except TypeError:
        return tp


def _exact_choices(tp: Any, choices: tuple) -> Any:
    """A Literal or Enum that refuses `true` for 1 and `1` for true, as its JSON Schema `enum` does.

    Python's `True == 1` lets pydantic's choice check accept either for the other.
    """
    numbers = any(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices)
    bools = any(isinstance(c, bool) for c in choices)
    if numbers == bools:  # neither, or a Literal mixing both: nothing to tell apart
        return tp

    def check(value: Any) -> Any:
        if isinstance(value, (int, float)) and isinstance(value, bool) != bools:
            expected = " or ".join(repr(c) for c in choices)
            raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
        return value

    return Annotated[tp, BeforeValidator(check)]


def _readable(tp: Any) -> Any:
    """`tp` made compatible, or Any when even that fails (a TypedDict with unresolvable hints)."""
    try:
        return _compatible(tp)
    except Exception:
        return Any


def _usable(tp: Any) -> Any:
    """`tp` (made compatible) if pydantic can both validate it and describe it, else Any."""
    if tp is Any:
        return Any
    try:
        tp = _compatible(tp)
        TypeAdapter(tp).json_schema()
    except Exception:
        return Any
    return tp


# ---------------------------------------------------------------------------
# Schema shaping
# ---------------------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "$defs", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains")


def _tidy(schema: Any, defs: dict[str, Any], stack: tuple[str, ...] = ()) -> Any:
    """Inline `$ref`s (except recursive ones) and drop keywords that say nothing.

    `items: {}` and `additionalProperties: true` are JSON Schema's defaults; `uniqueItems`
    is dropped because validation turns duplicates into one set member rather than refusing them.
    """
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref[len("#/$defs/") :]
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        if name in stack or name not in defs:
            return {"$ref": ref, **siblings}  # recursive: keep the reference
        return {**_tidy(defs[name], defs, (*stack, name)), **_tidy(siblings, defs, stack)}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            if key == "$defs":
                continue
            out[key] = {k: _tidy(v, defs, stack) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_tidy(v, defs, stack) for v in value]
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            out[key] = _tidy(value, defs, stack)
        else:
            out[key] = value
    if out.get("items") == {}:
        del out["items"]
    if out.get("additionalProperties") is True:
        del out["additionalProperties"]
    out.pop("uniqueItems", None)
    if "enum" in out and "type" not in out:  # pydantic names no type for Literal[1, 2.5]; rein-agent said number
        values = out["enum"]
        if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out["type"] = "number"
    return out


def _used_refs(schema: Any, found: set[str]) -> set[str]:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            found.add(ref[len("#/$defs/") :])
        for v in schema.values():
            _used_refs(v, found)
    elif isinstance(schema, list):
        for v in schema:
            _used_refs(v, found)
    return found


def _with_defs(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Attach the definitions the tidied schema still refers to (recursive types only)."""
    needed: set[str] = set()
    pending = _used_refs(schema, set())
    out_defs: dict[str, Any] = {}
    while pending:
        name = pending.pop()
        if name in needed or name not in defs:
            continue
        needed.add(name)
        out_defs[name] = _tidy(defs[name], defs, (name,))
        pending |= _used_refs(out_defs[name], set()) - needed
    if out_defs:
        schema["$defs"] = dict(sorted(out_defs.items()))
    return schema


def type_schema(tp: Any) -> dict[str, Any]:
    """JSON Schema of one type as a tool parameter would show it (Any for types pydantic cannot describe)."""
    raw = TypeAdapter(_usable(tp)).json_schema()
    defs = raw.get("$defs", {})
    return _with_defs(_tidy(raw, defs), defs)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _format_validation_error(tool_name: str, err: ValidationError) -> str:
    problems: list[str] = []
    for e in err.errors(include_url=False):
        loc = ".".join(str(p) for p in e.get("loc", ())) or "arguments"
        top_level = len(e.get("loc", ())) == 1
        kind = e.get("type")
        if kind == "missing" and top_level:
            problems.append(f"{loc}: missing required argument")
        elif kind == "extra_forbidden" and top_level:
            problems.append(f"{loc}: unexpected argument")
        elif kind == "missing":
            problems.append(f"{loc}: missing required field")
        elif kind == "extra_forbidden":
            problems.append(f"{loc}: unexpected field")
        else:
            problems.append(f"{loc}: {error_text(e)} (got {_short_repr(e.get('input'))})")
    return f"Invalid arguments for tool '{tool_name}': " + "; ".join(problems)


class ToolSignature:
    """A function's parameters as one pydantic model (`model`), its JSON Schema (`schema`) and validation.

    Fields get internal names (`p0`, `p1`, …) with the parameter name as alias, so
    parameter names such as `json`, `copy` or `model_config` cannot clash with
    BaseModel attributes; the schema and the errors use the real names.
    `self`/`cls`, `*args` and the context parameter are left out; `**kwargs`
    lets the model send extra arguments, which are passed on as they are.
    """

    def __init__(self, fn: Callable, context_param: str | None = None) -> None:
        sig = inspect.signature(fn)  # TypeError/ValueError: no readable signature
        hints = _hints(fn)
        descriptions = param_descriptions(inspect.getdoc(fn))
        self.params: list[tuple[str, str, inspect.Parameter]] = []  # (field, name, param)
        self.accepts_extra = False
        self._field_defaults: dict[str, Any] = {}  # defaults given as `= Field(...)`
        fields: dict[str, Any] = {}
        for pname, param in sig.parameters.items():
            if param.kind is param.VAR_KEYWORD:
                self.accepts_extra = True
                continue
            if param.kind is param.VAR_POSITIONAL or pname in ("self", "cls") or pname == context_param:
                continue
            field = f"p{len(self.params)}"
            self.params.append((field, pname, param))
            tp = _readable(hints[pname]) if hints is not None and pname in hints else str
            if param.default is inspect.Parameter.empty:
                info = Field(..., alias=pname)
            elif isinstance(param.default, FieldInfo):  # `x: int = Field(3, ge=0)`
                info = FieldInfo.merge_field_infos(param.default, Field(alias=pname))
                self._field_defaults[pname] = field
            else:
                # An argument the model leaves out is not passed at all, so the
                # function's own default applies; this placeholder is never used.
                info = Field(default=None, alias=pname)
            if pname in descriptions and not _has_description(tp, info):
                info = FieldInfo.merge_field_infos(info, Field(description=descriptions[pname]))
            fields[field] = (tp, info)
        config = ConfigDict(extra="allow" if self.accepts_extra else "forbid", populate_by_name=False)
        try:
            self.model: type[BaseModel] = create_model("ToolArguments", __config__=config, **fields)
            self.schema: dict[str, Any] = self._schema()
        except Exception:  # some type pydantic cannot validate or describe: find it, accept any JSON there
            fields = {f: (_usable(tp), info) for f, (tp, info) in fields.items()}
            self.model = create_model("ToolArguments", __config__=config, **fields)
            self.schema = self._schema()

    def _schema(self) -> dict[str, Any]:
        raw = self.model.model_json_schema(by_alias=True)
        defs = raw.get("$defs", {})
        properties: dict[str, Any] = {}
        for name, prop in raw.get("properties", {}).items():
            # The parameter's own title and default say nothing the model needs (rein-agent shows neither).
            prop = {k: v for k, v in prop.items() if k not in ("title", "default")}
            properties[name] = _tidy(prop, defs)
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if raw.get("required"):
            schema["required"] = list(raw["required"])
        if not self.accepts_extra:
            schema["additionalProperties"] = False
        return _with_defs(schema, defs)

    def validate(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments, validated and converted; only those given (function defaults apply to the rest)."""
        try:
            text = json.dumps(_whole_numbers(arguments), allow_nan=False, default=to_jsonable_python)
        except (TypeError, ValueError) as exc:
            raise ToolArgumentsError(f"Invalid arguments for tool '{tool_name}': not JSON ({exc})") from None
        try:
            inst = self.model.model_validate_json(text, strict=True)
        except ValidationError as err:
            raise ToolArgumentsError(_format_validation_error(tool_name, err)) from None
        given = inst.model_fields_set
        values = {
            name: getattr(inst, field)
            for field, name, _ in self.params
            if field in given or name in self._field_defaults
        }
        if self.accepts_extra and inst.model_extra:
            values.update(inst.model_extra)
        return values


def _whole_numbers(value: Any) -> Any:
    """`value` with floats such as 3.0 turned into ints: JSON Schema counts them as integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_whole_numbers(v) for v in value]
    return value


def _has_description(tp: Any, info: FieldInfo) -> bool:
    if info.description:
        return True
    if get_origin(tp) is Annotated:
        return any(isinstance(m, FieldInfo) and m.description for m in get_args(tp)[1:])
    return False

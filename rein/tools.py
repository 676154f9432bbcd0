"""Tools: plain Python functions turned into something a model can call.

`build_schema` reads a function's signature and type hints and produces the
JSON Schema the model sees (compatible with rein-agent 0.2.0). `Tool` bundles
the live function with that schema; `ToolRegistry` holds a set of them.
`execute_tool` is the single place that runs a tool, used by both the
in-process runner and the durable tool activity, so argument validation,
context injection and error reporting cannot differ between the two engines.

A Tool holds a live callable: it never enters the Session or Temporal history.
Only its `ToolSpec` and the text produced by `serialize_result` do.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from rein.ir import ToolCall, ToolResult, ToolSpec

__all__ = [
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolRegistry",
    "build_schema",
    "execute_all",
    "execute_tool",
    "serialize_result",
    "tool",
]

# Python base types and their JSON Schema "type" (same table as rein-agent).
_PY_TO_JSON: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}

_STRING: dict[str, Any] = {"type": "string"}


# ---------------------------------------------------------------------------
# ToolContext
# ---------------------------------------------------------------------------


class ToolContext:
    """What a tool gets when it declares a parameter annotated `ToolContext`.

    `idempotency_key` is stable across retries of the same tool call
    (`<workflow id>/<tool call id>` in durable runs, `<run id>/<tool call id>`
    in-process), so a tool with side effects can deduplicate them.
    `attempt` is 1-based. `heartbeat(*details)` reports liveness to the engine
    (a Temporal activity heartbeat in durable runs, a no-op otherwise).
    """

    __slots__ = ("idempotency_key", "attempt", "tool_call_id", "_heartbeat")

    def __init__(
        self,
        idempotency_key: str,
        attempt: int = 1,
        tool_call_id: str = "",
        heartbeat: Callable[..., Any] | None = None,
    ) -> None:
        self.idempotency_key = idempotency_key
        self.attempt = attempt
        self.tool_call_id = tool_call_id
        self._heartbeat = heartbeat

    def heartbeat(self, *details: Any) -> None:
        """Tell the engine the tool is still alive (optionally with progress details)."""
        if self._heartbeat is not None:
            self._heartbeat(*details)

    def __repr__(self) -> str:
        return (
            f"ToolContext(idempotency_key={self.idempotency_key!r}, attempt={self.attempt}, "
            f"tool_call_id={self.tool_call_id!r})"
        )


def _is_context_annotation(tp: Any) -> bool:
    """True for `ToolContext`, `ToolContext | None` and their string spellings."""
    if tp is ToolContext:
        return True
    if isinstance(tp, str):
        text = tp.replace(" ", "").replace("'", "").replace('"', "")
        for prefix in ("", "rein.", "rein.tools.", "tools."):
            name = prefix + "ToolContext"
            if text in (name, f"{name}|None", f"None|{name}", f"Optional[{name}]"):
                return True
        return False
    if get_origin(tp) in (Union, types.UnionType):
        non_none = [a for a in get_args(tp) if a is not type(None)]
        return len(non_none) == 1 and non_none[0] is ToolContext
    return False


def _safe_hints(fn: Callable) -> dict[str, Any] | None:
    """`get_type_hints(fn)`, or None when the hints cannot be resolved."""
    try:
        return get_type_hints(fn)
    except Exception:
        return None


def _find_context_param(fn: Callable, hints: dict[str, Any] | None = None) -> str | None:
    """Name of the parameter annotated `ToolContext`, found by annotation, not by name."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if hints is None:
        hints = _safe_hints(fn)
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if hints is not None and pname in hints:
            if _is_context_annotation(hints[pname]):
                return pname
        elif _is_context_annotation(param.annotation):
            return pname
    return None


# ---------------------------------------------------------------------------
# Schema generation
# ---------------------------------------------------------------------------


def _enum_base_type(values: list) -> str:
    """JSON type for a Literal's values.

    bool is checked before int because `isinstance(True, int)` is true; mixed
    kinds fall back to string, the most permissive choice.
    """
    if values and all(isinstance(v, bool) for v in values):
        return "boolean"
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "integer"
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "number"
    return "string"


def _type_to_schema(tp: Any) -> dict:
    """JSON Schema fragment for one type hint; anything unrecognised becomes string."""
    try:
        if tp in _PY_TO_JSON:
            return {"type": _PY_TO_JSON[tp]}
    except TypeError:  # unhashable annotation object
        pass

    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp.model_json_schema()

    origin = get_origin(tp)

    if origin is Literal:
        values = list(get_args(tp))
        return {"type": _enum_base_type(values), "enum": values}

    if origin is Union or origin is types.UnionType:
        non_none = [a for a in get_args(tp) if a is not type(None)]
        if len(non_none) == 1:
            return _type_to_schema(non_none[0])
        return dict(_STRING)

    if origin is list:
        args = get_args(tp)
        return {"type": "array", "items": _type_to_schema(args[0]) if args else {}}

    if origin is dict:
        args = get_args(tp)
        if len(args) == 2:
            return {"type": "object", "additionalProperties": _type_to_schema(args[1])}
        return {"type": "object"}

    return dict(_STRING)


_ARGS_HEADER = re.compile(r"^(\s*)(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):\s*$")
_ARG_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _param_descriptions(doc: str | None) -> dict[str, str]:
    """Per-parameter text from Google-style `Args:` sections (`name: text` or `name (type): text`).

    Continuation lines (indented deeper than the entry) are joined with spaces.
    """
    if not doc:
        return {}
    lines = doc.expandtabs().splitlines()
    found: dict[str, str] = {}
    i = 0
    while i < len(lines):
        header = _ARGS_HEADER.match(lines[i])
        i += 1
        if not header:
            continue
        header_indent = len(header.group(1))
        entry_indent: int | None = None
        current: str | None = None
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            indent = _indent(line)
            if indent <= header_indent:
                break  # next section (e.g. "Returns:")
            if entry_indent is None:
                entry_indent = indent
            if indent <= entry_indent:
                m = _ARG_ENTRY.match(line.strip())
                if m:
                    current = m.group(1)
                    found[current] = m.group(2).strip()
                else:
                    current = None
            elif current is not None:
                found[current] = f"{found[current]} {line.strip()}".strip()
            i += 1
    return {k: v for k, v in found.items() if v}


def build_schema(fn: Callable) -> dict:
    """JSON Schema of `fn`'s parameters: what the model sees as `ToolSpec.parameters`.

    Parameters without a default are required; self/cls, *args/**kwargs and
    the ToolContext parameter are left out; unannotated parameters (and all
    parameters, if the hints cannot be resolved) are strings.
    """
    sig = inspect.signature(fn)
    hints = _safe_hints(fn)
    context_param = _find_context_param(fn, hints)
    descriptions = _param_descriptions(inspect.getdoc(fn))

    properties: dict[str, dict] = {}
    required: list[str] = []
    for pname, param in sig.parameters.items():
        if pname in ("self", "cls") or pname == context_param:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        tp = hints.get(pname, str) if hints is not None else str
        prop = _type_to_schema(tp)
        if pname in descriptions:
            prop = {**prop, "description": descriptions[pname]}
        properties[pname] = prop
        if param.default is inspect.Parameter.empty:
            required.append(pname)

    schema: dict = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def serialize_result(value: Any) -> str:
    """Turn a tool's return value into the text the model (and the Session) gets.

    str as is; pydantic models as compact JSON; dict/list as JSON (non-ASCII
    kept, TypeError when not serialisable); anything else via `str()`.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


# ---------------------------------------------------------------------------
# Argument validation
# ---------------------------------------------------------------------------


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool's signature; the text is fed back to it."""


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
            problems.append(f"{loc}: {e['msg']} (got {_short_repr(e.get('input'))})")
    return f"Invalid arguments for tool '{tool_name}': " + "; ".join(problems)


def _validatable(tp: Any) -> Any:
    """`tp` if pydantic can validate it, else Any (the value is passed through as is)."""
    if tp is Any:
        return Any
    try:
        TypeAdapter(tp)
    except Exception:
        return Any
    return tp


class _ArgsValidator:
    """A pydantic model built once from a tool's signature.

    Fields get internal names (`p0`, `p1`, …) with the parameter name as alias,
    so parameter names such as `json`, `copy` or `model_config` cannot clash
    with BaseModel attributes; errors are still reported under the real names.
    """

    def __init__(self, fn: Callable, context_param: str | None) -> None:
        sig = inspect.signature(fn)
        hints = _safe_hints(fn) or {}
        self.params: list[tuple[str, str, inspect.Parameter]] = []  # (field, name, param)
        self.accepts_extra = False
        fields: dict[str, Any] = {}
        for pname, param in sig.parameters.items():
            if param.kind is param.VAR_KEYWORD:
                self.accepts_extra = True
                continue
            if param.kind is param.VAR_POSITIONAL or pname in ("self", "cls") or pname == context_param:
                continue
            field = f"p{len(self.params)}"
            self.params.append((field, pname, param))
            tp = _validatable(hints[pname]) if pname in hints else Any
            if param.default is inspect.Parameter.empty:
                fields[field] = (tp, Field(..., alias=pname))
            else:
                # Unset optional arguments are not passed at all, so the function's
                # own default applies; this placeholder is never used.
                fields[field] = (tp, Field(default=None, alias=pname))
        config = ConfigDict(extra="allow" if self.accepts_extra else "forbid", populate_by_name=False)
        try:
            self.model: type[BaseModel] = create_model("ToolArguments", __config__=config, **fields)
        except Exception:
            loose = {f: (Any, info) for f, (_, info) in fields.items()}
            self.model = create_model("ToolArguments", __config__=config, **loose)

    def validate(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            inst = self.model.model_validate(arguments)
        except ValidationError as err:
            raise ToolArgumentsError(_format_validation_error(tool_name, err)) from None
        given = inst.model_fields_set
        values = {name: getattr(inst, field) for field, name, _ in self.params if field in given}
        if self.accepts_extra and inst.model_extra:
            values.update(inst.model_extra)
        return values


# ---------------------------------------------------------------------------
# Tool, decorator, registry
# ---------------------------------------------------------------------------


class Tool:
    """A live function plus what the model needs to call it.

    `retries` is how many extra attempts the durable engine may make when the
    tool raises (opt-in: with 0, an exception becomes an error result at once).
    `timeout_s` bounds one attempt in the durable engine (None = engine default).
    `local` runs it as a Temporal local activity (in the worker that runs the workflow, no
    task-queue round trip): for quick, cheap tools; its result must stay small.
    """

    def __init__(
        self,
        fn: Callable,
        name: str,
        description: str,
        parameters: dict,
        is_async: bool,
        *,
        retries: int = 0,
        timeout_s: float | None = None,
        requires_approval: bool = False,
        local: bool = False,
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"Tool '{name}': retries must be a non-negative integer, got {retries!r}")
        if timeout_s is not None and (
            isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0
        ):
            raise ValueError(f"Tool '{name}': timeout_s must be a positive number or None, got {timeout_s!r}")
        self.fn = fn
        self.name = name
        self.description = description
        self.parameters = parameters
        self.is_async = is_async
        self.retries = retries
        self.timeout_s = timeout_s
        self.context_param: str | None = _find_context_param(fn)
        self.asks_human = False
        """True for `rein.ask_human`: its calls are questions for a person, never executed."""
        self.requires_approval = bool(requires_approval)
        self.local = bool(local)
        """Every call waits for a person's approval, even under `permission="allow"`."""
        self._validator: _ArgsValidator | None = None

    @classmethod
    def from_function(
        cls,
        fn: Callable,
        *,
        name: str | None = None,
        description: str | None = None,
        retries: int = 0,
        timeout_s: float | None = None,
        requires_approval: bool = False,
        local: bool = False,
    ) -> Tool:
        """Build a Tool from a function: name from `__name__`, description from the docstring."""
        if not callable(fn):
            raise TypeError(f"a tool must wrap a callable, got {type(fn).__name__}")
        return cls(
            fn=fn,
            name=name or getattr(fn, "__name__", type(fn).__name__),
            description=description or (inspect.getdoc(fn) or ""),
            parameters=build_schema(fn),
            is_async=inspect.iscoroutinefunction(fn),
            retries=retries,
            timeout_s=timeout_s,
            requires_approval=requires_approval,
            local=local,
        )

    def spec(self) -> ToolSpec:
        """The serialisable definition sent to the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate and coerce (pydantic lax mode) the model's arguments.

        Returns only the arguments that were given, so the function's own
        defaults apply to the rest. Raises ToolArgumentsError with a text that
        names the tool and every bad field.
        """
        if self._validator is None:
            try:
                self._validator = _ArgsValidator(self.fn, self.context_param)
            except (TypeError, ValueError):  # no readable signature (some builtins): nothing to check
                return dict(arguments)
        return self._validator.validate(self.name, arguments)

    def _call_args(self, values: dict[str, Any], context: ToolContext | None) -> tuple[list, dict]:
        """Split validated values into positional and keyword arguments for `fn`."""
        if self.context_param is not None:
            values = {**values, self.context_param: context}
        try:
            params = list(inspect.signature(self.fn).parameters.values())
        except (TypeError, ValueError):
            return [], values
        positional = [p for p in params if p.kind is p.POSITIONAL_ONLY]
        last = max((i for i, p in enumerate(positional) if p.name in values), default=-1)
        args: list[Any] = []
        kwargs = dict(values)
        for p in positional[: last + 1]:
            if p.name in kwargs:
                args.append(kwargs.pop(p.name))
            else:
                args.append(p.default)
        return args, kwargs

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, is_async={self.is_async}, retries={self.retries})"


def tool(
    fn: Callable | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    retries: int = 0,
    timeout_s: float | None = None,
    requires_approval: bool = False,
    local: bool = False,
) -> Any:
    """Make a function a Tool: `@tool`, or `@tool(name=..., retries=3, timeout_s=30, requires_approval=True, local=True)`."""
    options = dict(name=name, description=description, retries=retries, timeout_s=timeout_s,
                   requires_approval=requires_approval, local=local)
    if fn is not None:
        if not callable(fn):
            raise TypeError(
                f"@tool expects a function or keyword options only, got {type(fn).__name__}; "
                "write @tool(name=...) to set the name"
            )
        return Tool.from_function(fn, **options)

    def decorate(f: Callable) -> Tool:
        return Tool.from_function(f, **options)

    return decorate


class ToolRegistry:
    """A named set of tools; adding a tool with an existing name replaces it."""

    def __init__(self, tools: Iterable[Tool | Callable] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, tool: Tool | Callable) -> Tool:
        """Register a Tool (a bare function is wrapped with Tool.from_function)."""
        if not isinstance(tool, Tool):
            tool = Tool.from_function(tool)
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self) -> list[ToolSpec]:
        """Tool definitions for the model, in insertion order."""
        return [t.spec() for t in self._tools.values()]

    def names(self) -> list[str]:
        return list(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()!r})"


# ---------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------


def _error(call: ToolCall, text: str) -> ToolResult:
    return ToolResult(tool_call_id=call.id, content=text, is_error=True)


async def execute_tool(
    tool: Tool | None,
    call: ToolCall,
    context: ToolContext | None = None,
    *,
    raise_errors: bool = False,
    available: Sequence[str] = (),
) -> ToolResult:
    """Run one tool call and return its result; the one code path both engines use.

    Unknown tools and invalid arguments always become error results, so the
    model can correct itself. An exception from the tool becomes an error
    result too, unless `raise_errors` is set: the durable engine sets it for
    tools with retries, so Temporal retries them. BaseException (cancellation)
    is never caught.
    """
    if tool is None:
        names = ", ".join(available) if available else "(none)"
        return _error(call, f"Unknown tool '{call.name}'. Available tools: {names}")

    if call.arguments_error:
        return _error(
            call,
            f"Invalid arguments for tool '{call.name}': {call.arguments_error}. "
            "The tool was not run; send the arguments again as one complete JSON object.",
        )
    try:
        values = tool.validate_arguments(call.arguments)
    except ToolArgumentsError as exc:
        return _error(call, str(exc))

    if tool.context_param is not None and context is None:
        context = ToolContext(idempotency_key=call.id, tool_call_id=call.id)
    args, kwargs = tool._call_args(values, context)

    try:
        if tool.is_async:
            value = await tool.fn(*args, **kwargs)
        else:
            value = await anyio.to_thread.run_sync(functools.partial(tool.fn, *args, **kwargs))
            if inspect.isawaitable(value):  # e.g. an object whose __call__ is async
                value = await value
    except Exception as exc:
        if raise_errors:
            raise
        return _error(call, f"Tool '{tool.name}' failed: {type(exc).__name__}: {exc}")

    try:
        content = serialize_result(value)
    except Exception as exc:
        # Retrying cannot fix a result that does not serialise, so this never propagates.
        return _error(
            call, f"Tool '{tool.name}' returned a value that cannot be serialised: {type(exc).__name__}: {exc}"
        )
    return ToolResult(tool_call_id=call.id, content=content)


async def execute_all(
    registry: ToolRegistry,
    calls: Sequence[ToolCall],
    *,
    context_factory: Callable[[ToolCall], ToolContext | None] | None = None,
) -> list[ToolResult]:
    """Run a batch of tool calls concurrently; results are in call order."""
    available = registry.names()

    async def one(call: ToolCall) -> ToolResult:
        context = context_factory(call) if context_factory is not None else None
        return await execute_tool(registry.get(call.name), call, context, available=available)

    return list(await asyncio.gather(*(one(c) for c in calls)))

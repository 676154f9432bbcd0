"""Tools: plain Python functions turned into something a model can call.

Each tool has one pydantic model of its parameters (`rein.blueprint.signature`): it
gives the JSON Schema the model sees (`build_schema`) and validates what the
model sends. `Tool` bundles the live function with that model; `ToolRegistry`
holds a set of them.
`execute_tool` is the single place that runs a tool, used by both the
in-process runner and the durable tool activity, so argument validation,
context injection and error reporting cannot differ between the two engines.

A Tool holds a live callable: it never enters the Session or Temporal history.
Only its `ToolSpec` and the text produced by `serialize_result` do.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import anyio.to_thread
from pydantic import BaseModel

from rein.blueprint.signature import ToolArgumentsError, ToolSignature, find_context_param, type_schema
from rein.core import shared_state
from rein.core.ir import ToolCall, ToolResult, ToolSpec

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

# ---------------------------------------------------------------------------
# ToolContext
# ---------------------------------------------------------------------------

NO_THREAD: Any = type("NoThread", (), {"__repr__": lambda self: "NO_THREAD", "__deepcopy__": lambda self, memo: self})()
"""ToolContext's state outside a thread's turn."""


class ToolContext:
    """What a tool gets when it declares a parameter annotated `ToolContext`.

    `idempotency_key` is stable across retries of the same tool call
    (`<workflow id>/<tool call id>` in durable runs, `<run id>/<tool call id>`
    in-process), so a tool with side effects can deduplicate them.
    `attempt` is 1-based. `heartbeat(*details)` reports liveness to the engine
    (a Temporal activity heartbeat in durable runs, a no-op otherwise).
    `state` is the thread's shared JSON state (rein.core.shared_state), in a thread's turn.
    """

    __slots__ = ("idempotency_key", "attempt", "tool_call_id", "_heartbeat", "_state", "_read")

    def __init__(
        self,
        idempotency_key: str,
        attempt: int = 1,
        tool_call_id: str = "",
        heartbeat: Callable[..., Any] | None = None,
        state: Any = NO_THREAD,
    ) -> None:
        self.idempotency_key = idempotency_key
        self.attempt = attempt
        self.tool_call_id = tool_call_id
        self._heartbeat = heartbeat
        self._state = state
        self._read = copy.deepcopy(state)

    def heartbeat(self, *details: Any) -> None:
        """Tell the engine the tool is still alive (optionally with progress details)."""
        if self._heartbeat is not None:
            self._heartbeat(*details)

    @property
    def state(self) -> Any:
        """The thread's shared state as this call sees it (a JSON value, `{}` until something sets it): change it
        in place or assign a new value; the change reaches the thread when the tool returns, as a JSON Patch
        applied in the order the calls were made (docs/threads.md, "Shared state"). Outside a thread's turn
        (a plain run, the in-process engine) there is none: RuntimeError."""
        if self._state is NO_THREAD:
            raise RuntimeError("no shared state here: only a thread's tool calls have one (agent.thread(...), "
                               "ReinClient.send)")
        return self._state

    @state.setter
    def state(self, value: Any) -> None:
        self.state  # noqa: B018  (raises outside a thread)
        self._state = value

    def state_patch(self) -> list[dict[str, Any]] | None:
        """The call's change to the state as an RFC 6902 patch; None when it changed nothing (or has no state).
        StateError (rein.core.shared_state) when the new state is not JSON."""
        if self._state is NO_THREAD:
            return None
        shared_state.size(self._state)  # StateError when it is not JSON
        return shared_state.diff(self._read, self._state) or None

    def __repr__(self) -> str:
        return (
            f"ToolContext(idempotency_key={self.idempotency_key!r}, attempt={self.attempt}, "
            f"tool_call_id={self.tool_call_id!r})"
        )


def build_schema(fn: Callable) -> dict:
    """JSON Schema of `fn`'s parameters: what the model sees as `ToolSpec.parameters`.

    It comes from the same pydantic model that validates the model's arguments
    (`rein.blueprint.signature.ToolSignature`), so it says exactly what validation accepts.
    """
    return ToolSignature(fn, find_context_param(fn, ToolContext)).schema


def _type_to_schema(tp: Any) -> dict:
    """JSON Schema fragment for one type hint, as a parameter of that type shows it."""
    return type_schema(tp)


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
        replay: str = "recorded",
    ) -> None:
        if replay not in ("recorded", "run"):
            raise ValueError(f"Tool '{name}': replay must be 'recorded' or 'run', got {replay!r}")
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
        self.context_param: str | None = find_context_param(fn, ToolContext)
        self.asks_human = False
        """True for `rein.ask_human`: its calls are questions for a person, never executed."""
        self.requires_approval = bool(requires_approval)
        self.local = bool(local)
        self.replay = replay
        """In a what-if run (`rein eval`): "run" lets a call the recorded run did not make run (the tool is
        safe to run again); "recorded" (default) ends the what-if run at such a call instead."""
        self.agent: Any = None
        """Set by `Agent.as_tool`: the agent this tool runs (a child workflow in durable runs)."""
        self._signature: ToolSignature | None = None

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
        replay: str = "recorded",
    ) -> Tool:
        """Build a Tool from a function: name from `__name__`, description from the docstring."""
        if not callable(fn):
            raise TypeError(f"a tool must wrap a callable, got {type(fn).__name__}")
        signature = ToolSignature(fn, find_context_param(fn, ToolContext))
        fn_name: str = getattr(fn, "__name__", type(fn).__name__)
        made = cls(
            fn=fn,
            name=name or fn_name,
            description=description or (inspect.getdoc(fn) or ""),
            parameters=signature.schema,
            is_async=inspect.iscoroutinefunction(fn),
            retries=retries,
            timeout_s=timeout_s,
            requires_approval=requires_approval,
            local=local,
            replay=replay,
        )
        made._signature = signature  # the schema above and validation come from this one model
        return made

    def spec(self) -> ToolSpec:
        """The serialisable definition sent to the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate the model's arguments against the tool's model (strict JSON: what the schema says).

        Returns the converted values (Enum members, tuples, model instances, …)
        of the arguments that were given, so the function's own defaults apply
        to the rest. Raises ToolArgumentsError with a text that names the tool
        and every bad field.
        """
        if self._signature is None:
            try:
                self._signature = ToolSignature(self.fn, self.context_param)
            except (TypeError, ValueError):  # no readable signature (some builtins): nothing to check
                return dict(arguments)
        return self._signature.validate(self.name, arguments)

    def _call_args(self, values: dict[str, Any], context: ToolContext | None) -> tuple[list, dict]:
        """Split validated values into positional and keyword arguments for `fn`."""
        if self.context_param is not None:
            values = {**values, self.context_param: context}
        positional = self._positional_params
        if positional is None:
            return [], values
        last = max((i for i, p in enumerate(positional) if p.name in values), default=-1)
        args: list[Any] = []
        kwargs = dict(values)
        for p in positional[: last + 1]:
            if p.name in kwargs:
                args.append(kwargs.pop(p.name))
            else:
                args.append(p.default)
        return args, kwargs

    @functools.cached_property
    def _positional_params(self) -> list[inspect.Parameter] | None:
        """`fn`'s positional-only parameters (None: no readable signature), read once, not per call."""
        try:
            params = inspect.signature(self.fn).parameters.values()
        except (TypeError, ValueError):
            return None
        return [p for p in params if p.kind is p.POSITIONAL_ONLY]

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
    replay: str = "recorded",
) -> Any:
    """Make a function a Tool: `@tool`, or `@tool(name=..., retries=3, timeout_s=30, requires_approval=True,
    local=True, replay="run")` (`replay="run"`: safe to run again in a what-if run, docs/evals.md)."""
    def decorate(f: Callable) -> Tool:
        return Tool.from_function(f, name=name, description=description, retries=retries, timeout_s=timeout_s,
                                  requires_approval=requires_approval, local=local, replay=replay)

    if fn is not None:
        if not callable(fn):
            raise TypeError(
                f"@tool expects a function or keyword options only, got {type(fn).__name__}; "
                "write @tool(name=...) to set the name"
            )
        return decorate(fn)
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
            # A sync tool runs in a thread, which nothing can stop: on timeout or cancel the run
            # moves on (abandon_on_cancel) while a hung thread lingers until it returns by itself.
            value = await anyio.to_thread.run_sync(functools.partial(tool.fn, *args, **kwargs), abandon_on_cancel=True)
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

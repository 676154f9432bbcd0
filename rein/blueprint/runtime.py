"""Runtimes execute tool calls for the in-process runner (`rein.local.loop.arun(..., runtime=...)`).

The durable engine runs each call as a `rein.run_tool` activity instead; both
end up in `rein.blueprint.tools.execute_tool`, so results are the same. `DockerRuntime`
runs each call in a throw-away container instead (in-process runner only).
"""

from __future__ import annotations

import ast
import asyncio
import functools
import inspect
import json
import textwrap
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread
from pydantic_core import to_jsonable_python

from rein.blueprint.tools import Tool, ToolArgumentsError, ToolRegistry, execute_tool
from rein.core.ir import ToolCall, ToolResult
from rein.core.machine import policy_denial


@runtime_checkable
class Runtime(Protocol):
    async def execute(self, call: ToolCall, registry: ToolRegistry, permission: str = "allow") -> ToolResult: ...

    async def execute_all(
        self, calls: list[ToolCall], registry: ToolRegistry, permission: str = "allow"
    ) -> list[ToolResult]: ...


class LocalRuntime:
    """Runs tools in this process: async ones on the loop, sync ones in a thread."""

    async def execute(self, call: ToolCall, registry: ToolRegistry, permission: str = "allow") -> ToolResult:
        if permission == "deny":
            return policy_denial(call)
        return await execute_tool(registry.get(call.name), call, available=registry.names())

    async def execute_all(
        self, calls: list[ToolCall], registry: ToolRegistry, permission: str = "allow"
    ) -> list[ToolResult]:
        return list(await asyncio.gather(*(self.execute(c, registry, permission) for c in calls)))


# ---------------------------------------------------------------------------
# DockerRuntime
# ---------------------------------------------------------------------------

_RESULT_MARKER = "__REIN_SANDBOX_RESULT__"

# Runs inside the container, after the tool's source: calls the tool with the
# JSON arguments and prints one marker line with a JSON verdict. The container
# has no rein, so the serialisation mirrors rein.blueprint.tools.serialize_result here.
_SCRIPT_TAIL = '''

_rein_tool = __REIN_FN__  # before any name below could shadow the tool's


def _rein_sandbox_main():
    import asyncio as _asyncio
    import inspect as _inspect
    import json as _json
    import sys as _sys

    def _serialize(value):
        if isinstance(value, str):
            return value
        if hasattr(value, "model_dump_json") and not isinstance(value, type):
            return value.model_dump_json()
        if isinstance(value, (dict, list)):
            return _json.dumps(value, ensure_ascii=False)
        return str(value)

    call = _json.loads(__REIN_CALL__)
    try:
        value = _rein_tool(*call["args"], **call["kwargs"])
        if _inspect.isawaitable(value):
            value = _asyncio.run(value)
    except Exception as exc:
        verdict = {"ok": False, "stage": "call", "error": type(exc).__name__ + ": " + str(exc)}
    else:
        try:
            verdict = {"ok": True, "content": _serialize(value)}
        except Exception as exc:
            verdict = {"ok": False, "stage": "serialize", "error": type(exc).__name__ + ": " + str(exc)}
    _sys.stdout.write("\\n" + __REIN_MARKER__ + _json.dumps(verdict) + "\\n")
    _sys.stdout.flush()


_rein_sandbox_main()
'''


def tool_source(tool: Tool) -> tuple[str, str]:
    """(source without decorators, function name) of a tool defined with `def`.

    Decorators are cut by position (everything above the `def` line), so
    multi-line decorators such as `@tool(\\n retries=3)` go too. Raises
    ValueError when the source is unavailable or is not a plain function.
    """
    try:
        source = textwrap.dedent(inspect.getsource(tool.fn))
    except (OSError, TypeError) as exc:
        raise ValueError(f"cannot get the source of tool '{tool.name}': {exc}") from None
    try:
        module = ast.parse(source)
    except SyntaxError as exc:  # e.g. a lambda's line cut out of an expression
        raise ValueError(f"the source of tool '{tool.name}' is not a function definition: {exc}") from None
    defs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    # The name check also catches a lambda on a decorator line, whose "source" is the decorated def.
    if len(module.body) != 1 or not defs or defs[0].name != getattr(tool.fn, "__name__", None):
        raise ValueError(f"the source of tool '{tool.name}' is not a single function definition (a lambda?)")
    lines = source.splitlines()
    return "\n".join(lines[defs[0].lineno - 1 :]) + "\n", defs[0].name


def sandbox_script(tool: Tool, arguments: dict[str, Any]) -> str:
    """The Python program DockerRuntime runs as `python -c <script>` for one call.

    `arguments` are already validated (`tool.validate_arguments`); they travel
    as JSON, so a pydantic-model argument arrives in the container as a dict.
    The program prints the serialised result (or the tool's exception) on a
    marker line that `DockerRuntime` reads back; anything else the tool prints
    is ignored.
    """
    source, fn_name = tool_source(tool)
    args, kwargs = tool._call_args(arguments, None)
    payload = json.dumps({"args": to_jsonable_python(args), "kwargs": to_jsonable_python(kwargs)}, ensure_ascii=False)
    tail = (  # the arguments last, so text in them is never taken for a placeholder
        _SCRIPT_TAIL.replace("__REIN_MARKER__", repr(_RESULT_MARKER))
        .replace("__REIN_FN__", fn_name)
        .replace("__REIN_CALL__", repr(payload))
    )
    # Annotations stay unevaluated, so type hints naming classes the container lacks do no harm.
    return "from __future__ import annotations\n\n" + source + tail


def read_sandbox_output(tool_name: str, call: ToolCall, stdout: str) -> ToolResult:
    """Turn the output of a `sandbox_script` program into the call's ToolResult."""
    # The last line that starts with the marker is the script's own: anything the
    # tool printed came before it, and the verdict's JSON never contains a newline.
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(_RESULT_MARKER)), None)
    if line is None:
        tail = stdout.strip()[-500:] or "(no output)"
        return _sandbox_error(call, f"Tool '{tool_name}' produced no result in the Docker sandbox; output: {tail}")
    try:
        verdict = json.loads(line[len(_RESULT_MARKER) :])
    except ValueError as exc:
        return _sandbox_error(call, f"Tool '{tool_name}': unreadable result from the Docker sandbox ({exc})")
    if verdict.get("ok"):
        return ToolResult(tool_call_id=call.id, content=str(verdict.get("content", "")))
    if verdict.get("stage") == "serialize":
        text = f"Tool '{tool_name}' returned a value that cannot be serialised: {verdict.get('error')}"
    else:
        text = f"Tool '{tool_name}' failed: {verdict.get('error')}"
    return _sandbox_error(call, text)


def _sandbox_error(call: ToolCall, text: str) -> ToolResult:
    return ToolResult(tool_call_id=call.id, content=text, is_error=True)


class DockerRuntime:
    """Runs each tool call in a fresh, throw-away Docker container.

    The tool's source (decorators removed) and its validated arguments (as JSON)
    become a `python -c` program run in `image`, with the network disabled and
    memory limited by default; extra keyword arguments go to
    `docker.containers.run` (e.g. `cpu_quota=50_000`, `volumes={...}`). The
    container is removed afterwards, also when the call fails or times out
    (`@tool(timeout_s=...)` bounds the wait). Results are serialised as by
    `rein.blueprint.tools.serialize_result`.

    Use it with the in-process runner: `rein.local.loop.arun(session, provider,
    registry, config, runtime=DockerRuntime())`.

    A tool must be self-contained: a `def` whose imports live in its body and
    which needs nothing from its module (globals, closures, ToolContext) and no
    package the image lacks. Denied calls, unknown tools and invalid arguments
    are answered without a container, exactly as LocalRuntime answers them; any
    other failure (no docker SDK, no Docker engine, no source, a crash in the
    container) is an `is_error` result naming the exception.

    Needs the docker SDK (`pip install 'rein[docker]'`) and, for the container
    path itself, a reachable Docker engine.
    """

    def __init__(
        self,
        image: str = "python:3.12-slim",
        *,
        network_disabled: bool = True,
        mem_limit: str | int | None = "256m",
        **container_kwargs: Any,
    ) -> None:
        self.image = image
        self.network_disabled = network_disabled
        self.mem_limit = mem_limit
        self.container_kwargs = container_kwargs

    def __repr__(self) -> str:
        return (
            f"DockerRuntime(image={self.image!r}, network_disabled={self.network_disabled}, "
            f"mem_limit={self.mem_limit!r})"
        )

    async def execute(self, call: ToolCall, registry: ToolRegistry, permission: str = "allow") -> ToolResult:
        if permission == "deny":
            return policy_denial(call)
        tool = registry.get(call.name)
        if tool is None:
            return await execute_tool(None, call, available=registry.names())
        try:
            values = tool.validate_arguments(call.arguments)
        except ToolArgumentsError as exc:
            return _sandbox_error(call, str(exc))
        except Exception as exc:  # e.g. a builtin whose signature cannot be read
            return _sandbox_error(call, f"Tool '{tool.name}' cannot run in the Docker sandbox: {type(exc).__name__}: {exc}")
        if tool.context_param is not None:
            return _sandbox_error(
                call, f"Tool '{tool.name}' takes a ToolContext, which DockerRuntime cannot pass into a container"
            )
        try:
            script = sandbox_script(tool, values)
        except Exception as exc:
            return _sandbox_error(call, f"Tool '{tool.name}' cannot run in the Docker sandbox: {type(exc).__name__}: {exc}")
        try:
            stdout = await anyio.to_thread.run_sync(functools.partial(self._run_container, script, tool.timeout_s))
        except Exception as exc:
            return _sandbox_error(call, f"Tool '{tool.name}' failed in the Docker sandbox: {type(exc).__name__}: {exc}")
        return read_sandbox_output(tool.name, call, stdout)

    async def execute_all(
        self, calls: list[ToolCall], registry: ToolRegistry, permission: str = "allow"
    ) -> list[ToolResult]:
        return list(await asyncio.gather(*(self.execute(c, registry, permission) for c in calls)))

    def _run_container(self, script: str, timeout_s: float | None) -> str:
        """Run `python -c script` in a new container (blocking; called in a worker thread); its stdout."""
        try:
            import docker
        except ImportError as exc:
            raise ImportError(f"DockerRuntime needs the docker SDK: pip install 'rein[docker]' ({exc})") from None

        client = docker.from_env()
        try:
            container = client.containers.run(
                self.image,
                ["python", "-c", script],
                detach=True,
                network_disabled=self.network_disabled,
                mem_limit=self.mem_limit,
                **self.container_kwargs,
            )
            try:
                try:
                    status = container.wait(timeout=timeout_s)
                except Exception as exc:
                    if timeout_s is None:
                        raise
                    raise TimeoutError(f"no result within {timeout_s} s ({type(exc).__name__})") from None
                stdout = container.logs(stdout=True, stderr=False).decode("utf-8", errors="replace")
                code = status.get("StatusCode", 0) if isinstance(status, dict) else status
                if code != 0 and _RESULT_MARKER not in stdout:
                    stderr = container.logs(stdout=False, stderr=True).decode("utf-8", errors="replace")
                    detail = stderr.strip()[-1000:] or stdout.strip()[-1000:] or "(no output)"
                    if code == 137:
                        detail += " (killed: out of memory?)"
                    raise RuntimeError(f"the container exited with code {code}: {detail}")
                return stdout
            finally:
                container.remove(force=True)
        finally:
            close = getattr(client, "close", None)
            if close is not None:
                close()

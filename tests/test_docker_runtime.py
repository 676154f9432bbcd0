"""DockerRuntime without a Docker engine (this machine has none).

What is tested: the paths that never reach a container (deny, unknown tool,
bad arguments, tools it cannot ship, a missing docker SDK, an unreachable
engine); the program it would run in the container, run here with this
interpreter; and the whole container path against a stand-in `docker` module
whose containers are local `python -c` processes.
"""

from __future__ import annotations

import asyncio
import functools
import subprocess
import sys
import tempfile
import time
import types
from typing import Any

import pytest
from pydantic import BaseModel

import rein.local.loop
from rein import LoopConfig, Message, MockProvider, Session, ToolCall, ToolContext, ToolRegistry, tool
from rein.blueprint.runtime import DockerRuntime, LocalRuntime, Runtime, read_sandbox_output, sandbox_script, tool_source
from rein.blueprint.tools import Tool, execute_tool
from rein.core.machine import policy_denial
from tests.support.tools import add, tc

# --------------------------------------------------------------------------- tools (self-contained)

GREETING = "hello"  # module globals do not exist in the container


def describe(city: str, days: int = 3, *, units: str = "metric") -> dict:
    """Non-ASCII text and JSON output."""
    return {"city": city, "days": days, "units": units}


def chatty(text: str) -> str:
    """Prints to stdout, also lines that look like the result marker."""
    print("noise before the result")
    print("__REIN_SANDBOX_RESULT__ not json")
    return text.upper()


def boom(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


def unserialisable() -> dict:
    """A dict json cannot encode."""
    return {"when": {1, 2}}


def uses_a_global() -> str:
    return GREETING


def positional_only(a: int, b: int = 10, /) -> list:
    return [a, b]


def nothing() -> None:
    return None


def value(call: str) -> str:
    """Names the script itself uses must not shadow the tool."""
    return f"value({call})"


def dies() -> str:
    import os

    os._exit(3)


def slow(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "woke up"


def rendezvous(folder: str, label: str, expected: int) -> str:
    """Marks itself started, then waits (bounded) until `expected` calls have started: a barrier
    only calls that run at the same time can pass."""
    import os
    import time

    open(os.path.join(folder, label + ".started"), "w").close()
    for _ in range(600):
        if len([f for f in os.listdir(folder) if f.endswith(".started")]) >= expected:
            return f"{label} met {expected}"
        time.sleep(0.05)
    return f"{label} alone"


def await_flag(path: str) -> str:
    """Waits (bounded) until `path` exists: someone else must create it meanwhile."""
    import os
    import time

    for _ in range(600):
        if os.path.exists(path):
            return "flagged"
        time.sleep(0.05)
    return "never flagged"


async def async_double(x: float) -> float:
    import asyncio

    await asyncio.sleep(0)
    return x * 2


class Point(BaseModel):
    x: int
    y: int


def norm1(p: Point) -> int:
    """A pydantic-model argument arrives in the container as a dict."""
    return abs(p["x"]) + abs(p["y"])


@tool(
    name="shout",
    retries=1,
)
def shout_impl(text: str) -> str:
    """Decorated with a multi-line decorator."""
    return text.upper() + "!"


@tool(timeout_s=0.5)
def too_slow() -> str:
    import time

    time.sleep(30)
    return "never"


def with_context(x: int, ctx: ToolContext) -> int:
    return x


NO_ARGS = lambda: 1  # noqa: E731


REGISTRY = ToolRegistry(
    [add, describe, chatty, boom, unserialisable, uses_a_global, positional_only, nothing, value, dies, slow,
     rendezvous, await_flag, async_double, norm1, shout_impl, too_slow, with_context]
)


def run_locally(script: str) -> str:
    """The container's `python -c <script>`, with this interpreter."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


# --------------------------------------------------------------------------- a stand-in docker SDK


class FakeContainer:
    def __init__(self, command: list[str]):
        assert command[:2] == ["python", "-c"]
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, *command[1:]], stdout=self.out, stderr=self.err)
        self.removed = False

    def wait(self, timeout: float | None = None) -> dict:
        return {"StatusCode": self.proc.wait(timeout=timeout), "Error": None}

    def logs(self, stdout: bool = True, stderr: bool = True) -> bytes:
        data = b""
        for wanted, f in ((stdout, self.out), (stderr, self.err)):
            if wanted:
                f.seek(0)
                data += f.read()
        return data

    def remove(self, force: bool = False) -> None:
        assert force or self.proc.poll() is not None
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.removed = True


class FakeDocker(types.ModuleType):
    """Enough of the docker SDK: from_env().containers.run(..., detach=True) → FakeContainer."""

    def __init__(self, from_env_error: Exception | None = None):
        super().__init__("docker")
        self.runs: list[dict[str, Any]] = []
        self.containers_made: list[FakeContainer] = []
        self.closed = 0
        self.from_env_error = from_env_error

    def from_env(self) -> Any:
        if self.from_env_error is not None:
            raise self.from_env_error
        fake = self

        class Containers:
            def run(self, image: str, command: list[str], **kwargs: Any) -> FakeContainer:
                fake.runs.append({"image": image, "command": command, **kwargs})
                container = FakeContainer(command)
                fake.containers_made.append(container)
                return container

        class Client:
            containers = Containers()

            def close(self) -> None:
                fake.closed += 1

        return Client()


@pytest.fixture
def fake_docker(monkeypatch: pytest.MonkeyPatch) -> FakeDocker:
    fake = FakeDocker()
    monkeypatch.setitem(sys.modules, "docker", fake)
    return fake


@pytest.fixture
def no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)  # `import docker` raises ImportError


# --------------------------------------------------------------------------- answered without a container


def test_is_a_runtime() -> None:
    rt = DockerRuntime()
    assert isinstance(rt, Runtime)
    assert (rt.image, rt.network_disabled, rt.mem_limit, rt.container_kwargs) == ("python:3.12-slim", True, "256m", {})
    assert "python:3.12-slim" in repr(rt)


async def test_deny_is_the_policy_denial(fake_docker: FakeDocker) -> None:
    c = tc("add", "c1", a=1, b=2)
    assert await DockerRuntime().execute(c, REGISTRY, "deny") == policy_denial(c)
    assert fake_docker.runs == []


async def test_unknown_tool_is_the_same_error_as_execute_tool(fake_docker: FakeDocker) -> None:
    c = tc("nope", "c1")
    result = await DockerRuntime().execute(c, REGISTRY)
    assert result == await execute_tool(None, c, available=REGISTRY.names())
    assert result.is_error and "Unknown tool 'nope'" in result.content
    assert fake_docker.runs == []


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [({"a": 1}, "b: missing required argument"), ({"a": "x", "b": 2}, "a: "), ({"a": 1, "b": 2, "c": 3}, "c: unexpected")],
)
async def test_bad_arguments_never_reach_a_container(
    fake_docker: FakeDocker, arguments: dict, problem: str
) -> None:
    c = ToolCall(id="c1", name="add", arguments=arguments)
    result = await DockerRuntime().execute(c, REGISTRY)
    assert result.is_error and problem in result.content
    assert result == await LocalRuntime().execute(c, REGISTRY)  # the same text as in-process
    assert fake_docker.runs == []


async def test_tools_taking_a_context_are_refused(fake_docker: FakeDocker) -> None:
    result = await DockerRuntime().execute(tc("with_context", "c1", x=1), REGISTRY)
    assert result.is_error and "ToolContext" in result.content
    assert fake_docker.runs == []


@pytest.mark.parametrize("fn", [time.time, lambda: 1, NO_ARGS, functools.partial(add, 1, 2)],
    ids=["builtin", "lambda-on-a-decorator-line", "lambda", "partial"],
)
async def test_tools_without_usable_source_are_error_results(fake_docker: FakeDocker, fn: Any) -> None:
    registry = ToolRegistry([Tool(fn, "t", "", {"type": "object", "properties": {}}, False)])
    result = await DockerRuntime().execute(ToolCall(id="c1", name="t", arguments={}), registry)
    assert result.is_error and "cannot run in the Docker sandbox" in result.content
    assert fake_docker.runs == []


async def test_missing_docker_sdk_is_an_error_result_with_the_install_hint(no_docker: None) -> None:
    result = await DockerRuntime().execute(tc("add", "c1", a=1, b=2), REGISTRY)
    assert result.is_error and result.tool_call_id == "c1"
    assert "ImportError" in result.content
    assert "pip install 'rein[docker]'" in result.content


async def test_unreachable_engine_is_an_error_result(monkeypatch: pytest.MonkeyPatch) -> None:
    class DockerException(Exception):
        pass

    monkeypatch.setitem(sys.modules, "docker", FakeDocker(DockerException("Error while fetching server API version")))
    result = await DockerRuntime().execute(tc("add", "c1", a=1, b=2), REGISTRY)
    assert result.is_error
    assert result.content == (
        "Tool 'add' failed in the Docker sandbox: DockerException: Error while fetching server API version"
    )


# --------------------------------------------------------------------------- the program run in the container


def test_source_without_decorators() -> None:
    source, name = tool_source(REGISTRY.get("shout"))
    assert name == "shout_impl"
    assert source.startswith("def shout_impl(text: str) -> str:")
    assert "@tool" not in source and "retries" not in source


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("add", {"a": 2, "b": 3}, "5"),
        ("add", {"a": 2, "b": 3.0}, "5"),  # validated (3.0 is a JSON Schema integer) before it is shipped
        ("describe", {"city": "北京"}, '{"city": "北京", "days": 3, "units": "metric"}'),
        ("describe", {"city": "Oslo", "days": 1, "units": "imperial"}, '{"city": "Oslo", "days": 1, "units": "imperial"}'),
        ("chatty", {"text": "quiet"}, "QUIET"),
        ("positional_only", {"a": 1}, "[1, 10]"),
        ("positional_only", {"a": 1, "b": 2}, "[1, 2]"),
        ("nothing", {}, "None"),
        ("value", {"call": "x"}, "value(x)"),
        ("async_double", {"x": 1.5}, "3.0"),
        ("norm1", {"p": {"x": -2, "y": 3}}, "5"),
        ("shout", {"text": "hi"}, "HI!"),
        ("chatty", {"text": "__REIN_CALL__ __REIN_FN__ __REIN_MARKER__ __REIN_SANDBOX_RESULT__ '\"\\"},
         "__REIN_CALL__ __REIN_FN__ __REIN_MARKER__ __REIN_SANDBOX_RESULT__ '\"\\".upper()),
    ],
)
async def test_script_prints_what_execute_tool_returns(name: str, arguments: dict, expected: str) -> None:
    t = REGISTRY.get(name)
    c = ToolCall(id="c1", name=name, arguments=arguments)
    script = sandbox_script(t, t.validate_arguments(arguments))
    result = read_sandbox_output(t.name, c, run_locally(script))
    assert not result.is_error, result.content
    assert result.content == expected
    if name != "norm1":  # in-process, norm1 gets a Point, which has no ["x"]
        assert result == await execute_tool(t, c)


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("boom", {"reason": "bad luck"}, "Tool 'boom' failed: ValueError: bad luck"),
        ("uses_a_global", {}, "Tool 'uses_a_global' failed: NameError: name 'GREETING' is not defined"),
        ("unserialisable", {}, "Tool 'unserialisable' returned a value that cannot be serialised: TypeError: "),
    ],
)
def test_script_reports_the_tools_failures(name: str, arguments: dict, expected: str) -> None:
    t = REGISTRY.get(name)
    script = sandbox_script(t, t.validate_arguments(arguments))
    result = read_sandbox_output(t.name, tc(name, "c1"), run_locally(script))
    assert result.is_error
    assert result.content.startswith(expected)


def test_output_without_a_result_is_an_error() -> None:
    result = read_sandbox_output("add", tc("add", "c1"), "Traceback ...\nSyntaxError: oops\n")
    assert result.is_error and "produced no result" in result.content and "SyntaxError: oops" in result.content


# --------------------------------------------------------------------------- the container path (stand-in docker)


async def test_runs_in_a_container_that_is_removed(fake_docker: FakeDocker) -> None:
    rt = DockerRuntime("python:3.13-alpine", mem_limit="64m", cpu_quota=50_000)
    result = await rt.execute(tc("describe", "c1", city="Zürich"), REGISTRY)
    assert result.model_dump() == {
        "tool_call_id": "c1", "content": '{"city": "Zürich", "days": 3, "units": "metric"}', "is_error": False
    }
    [run] = fake_docker.runs
    assert run["image"] == "python:3.13-alpine"
    assert run["command"][:2] == ["python", "-c"] and "def describe(" in run["command"][2]
    assert run["network_disabled"] is True and run["mem_limit"] == "64m" and run["cpu_quota"] == 50_000
    assert run["detach"] is True
    assert all(c.removed for c in fake_docker.containers_made)
    assert fake_docker.closed == 1


async def test_network_can_be_enabled(fake_docker: FakeDocker) -> None:
    await DockerRuntime(network_disabled=False, mem_limit=None).execute(tc("add", "c1", a=1, b=2), REGISTRY)
    assert fake_docker.runs[0]["network_disabled"] is False and fake_docker.runs[0]["mem_limit"] is None


async def test_tool_failure_in_the_container(fake_docker: FakeDocker) -> None:
    result = await DockerRuntime().execute(tc("boom", "c1", reason="no"), REGISTRY)
    assert (result.is_error, result.content) == (True, "Tool 'boom' failed: ValueError: no")
    assert fake_docker.containers_made[0].removed


async def test_a_container_that_dies_is_an_error_result(fake_docker: FakeDocker) -> None:
    result = await DockerRuntime().execute(tc("dies", "c1"), REGISTRY)
    assert result.is_error
    assert result.content.startswith("Tool 'dies' failed in the Docker sandbox: RuntimeError: the container exited with code 3")
    assert fake_docker.containers_made[0].removed


async def test_timeout_kills_and_removes_the_container(fake_docker: FakeDocker) -> None:
    result = await DockerRuntime().execute(tc("too_slow", "c1"), REGISTRY)
    assert result.is_error
    assert result.content.startswith("Tool 'too_slow' failed in the Docker sandbox: TimeoutError: no result within 0.5 s")
    container = fake_docker.containers_made[0]
    # Killed (by a signal), not waited for: a container that ran to its end would have exited 0.
    assert container.removed and container.proc.returncode is not None and container.proc.returncode < 0


async def test_execute_all_keeps_the_call_order(fake_docker: FakeDocker, tmp_path) -> None:  # noqa: ANN001
    """The calls run at the same time (each container waits until all three have started, which
    one-after-the-other execution never reaches), and results come back in call order."""
    folder = str(tmp_path)
    calls = [
        tc("rendezvous", "c1", folder=folder, label="first", expected=3),
        tc("add", "c2", a=1, b=1),
        tc("nope", "c3"),
        tc("add", "c4", a=1),
        tc("rendezvous", "c5", folder=folder, label="second", expected=3),
        tc("rendezvous", "c6", folder=folder, label="third", expected=3),
    ]
    results = await DockerRuntime().execute_all(calls, REGISTRY)
    assert [r.tool_call_id for r in results] == ["c1", "c2", "c3", "c4", "c5", "c6"]
    assert [r.content for r in results[:2]] == ["first met 3", "2"]
    assert [r.content for r in results[4:]] == ["second met 3", "third met 3"]
    assert [r.is_error for r in results] == [False, False, True, True, False, False]
    assert len(fake_docker.runs) == 4  # the unknown tool and the bad arguments needed no container


async def test_execute_all_deny(fake_docker: FakeDocker) -> None:
    calls = [tc("add", "c1", a=1, b=2), tc("add", "c2", a=3, b=4)]
    assert await DockerRuntime().execute_all(calls, REGISTRY, "deny") == [policy_denial(c) for c in calls]
    assert fake_docker.runs == []


async def test_same_results_as_local_runtime(fake_docker: FakeDocker) -> None:
    calls = [
        tc("add", "c1", a=2, b=5),
        tc("describe", "c2", city="Kyōto", days=2),
        tc("boom", "c3", reason="x"),
        tc("positional_only", "c4", a=7),
        tc("async_double", "c5", x=4),
        tc("shout", "c6", text="ok"),
        tc("add", "c7", a=[1]),
        tc("missing", "c8"),
    ]
    docker_results = await DockerRuntime().execute_all(calls, REGISTRY)
    local_results = await LocalRuntime().execute_all(calls, REGISTRY)
    assert docker_results == local_results


async def test_the_in_process_runner_can_use_it(fake_docker: FakeDocker) -> None:
    provider = MockProvider([[ToolCall(id="t1", name="add", arguments={"a": 20, "b": 22})], "42 it is."])
    session = Session(messages=[Message(role="user", content="20 + 22?")])
    result = await rein.local.loop.arun(
        session, provider, ToolRegistry([add]), LoopConfig(), runtime=DockerRuntime()
    )
    assert result.output == "42 it is."
    assert [m.content for m in result.session.messages if m.role == "tool"] == ["42"]
    assert len(fake_docker.runs) == 1


def test_runtime_call_from_a_thread_does_not_block_the_loop(fake_docker: FakeDocker, tmp_path) -> None:  # noqa: ANN001
    """The container is waited for in a worker thread: the event loop keeps running meanwhile (here it
    raises the flag the container waits for; a blocked loop would leave it waiting)."""
    flag = tmp_path / "flag"

    async def scenario() -> str:
        async def raise_flag() -> None:
            while not fake_docker.containers_made:  # the container has started
                await asyncio.sleep(0.01)
            flag.touch()

        task = asyncio.create_task(raise_flag())
        try:
            result = await DockerRuntime().execute(tc("await_flag", "c1", path=str(flag)), REGISTRY)
        finally:
            task.cancel()
        return result.content

    assert asyncio.run(scenario()) == "flagged"

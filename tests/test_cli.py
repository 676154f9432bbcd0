"""The `rein` command line.

Remote commands (`start`, `status`, `waiting`, `approve`, `deny`, `answer`,
`retry`, `cancel`, `result`) run in-process through `rein.cli.main(argv)` (in a
thread, since each one calls `asyncio.run`) against a real dev server
(`rein.testing.start_local()`) and an in-process worker on task queue "rein".
`rein server` and `rein run` run as subprocesses, as a user runs them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client

import rein
from rein import Agent, Completion, LoopConfig, Message, StreamChunk, ToolCall, Usage
from rein.cli import main
from rein.client import ReinClient
from rein.server import free_port
from rein.testing import start_local

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")


# --------------------------------------------------------------------------- agents the worker serves


class _Scripted:
    """Stateless scripted model: `decide(messages)` returns a Completion; `stream` follows it."""

    def decide(self, messages: list[Message]) -> Completion:  # pragma: no cover - overridden
        raise NotImplementedError

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        return self.decide(messages)

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any):
        completion = await self.complete(messages, tools)
        if completion.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls)
        else:
            yield StreamChunk(type="text", text=completion.message.content)
        yield StreamChunk(type="done", finish_reason=completion.finish_reason, usage=completion.usage)


USAGE = Usage(input_tokens=3, output_tokens=2)


def _text(text: str) -> Completion:
    return Completion(message=Message(role="assistant", content=text), finish_reason="stop", usage=USAGE)


def _call(call_id: str, name: str, **arguments: Any) -> Completion:
    call = ToolCall(id=call_id, name=name, arguments=arguments)
    return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls", usage=USAGE)


def _tool_results(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


class OpsModel(_Scripted):
    """restart(service=<first word of the prompt>), then report the tool result."""

    def decide(self, messages: list[Message]) -> Completion:
        results = _tool_results(messages)
        if results:
            return _text(f"Report: {results[-1].content}")
        service = next(m.content for m in messages if m.role == "user").split()[0]
        return _call("call-restart", "restart", service=service)


class AskingModel(_Scripted):
    """Asks a person which region, then deploys there."""

    def decide(self, messages: list[Message]) -> Completion:
        results = _tool_results(messages)
        if results:
            return _text(f"Deploying to {results[-1].content}")
        return _call("call-ask", "ask_human", question="Which region?")


class ServiceUnavailable(Exception):
    status_code = 503


class FlakyModel(_Scripted):
    """The first call for each prompt fails with a 503; later calls answer."""

    def __init__(self) -> None:
        self.failed: set[str] = set()
        self.calls = 0

    def decide(self, messages: list[Message]) -> Completion:
        self.calls += 1
        prompt = next(m.content for m in messages if m.role == "user")
        if prompt not in self.failed:
            self.failed.add(prompt)
            raise ServiceUnavailable("upstream said 503 Service Unavailable")
        return _text("recovered after retry")


restarted: list[str] = []
"""Services the `restart` tool really ran for."""


def restart(service: str) -> str:
    """Restart a service.

    Args:
        service: Which service.
    """
    restarted.append(service)
    return f"{service} restarted"


flaky_model = FlakyModel()
AGENTS = [
    Agent(provider=OpsModel(), tools=[restart], config=LoopConfig(permission="ask"), name="cli-ops"),
    Agent(provider=AskingModel(), tools=[rein.ask_human], name="cli-human"),
    Agent(provider=flaky_model, config=LoopConfig(model_attempts=1), name="cli-flaky"),
]


# --------------------------------------------------------------------------- fixtures and helpers


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env():
    environment = await start_local()
    try:
        async with rein.create_worker(environment.client, agents=AGENTS, task_queue="rein"):
            yield environment
    finally:
        await environment.shutdown()


@pytest.fixture
def address(env, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: ANN001
    for name in ("REIN_TASK_QUEUE", "TEMPORAL_NAMESPACE", "TEMPORAL_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    return env.client.service_client.config.target_host


class Cli:
    """`rein ...` in this process; returns the JSON it printed."""

    def __init__(self, address: str, capsys: pytest.CaptureFixture[str]):
        self.address = address
        self.capsys = capsys

    async def __call__(self, *argv: str) -> Any:
        self.capsys.readouterr()
        code = await asyncio.to_thread(main, [*argv, "--address", self.address])
        out = self.capsys.readouterr().out
        assert code == 0, out
        return json.loads(out)


@pytest.fixture
def cli(address: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(address, capsys)


async def poll(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last: {last!r}")


async def start_and_wait(cli: Cli, agent: str, prompt: str, status: str) -> tuple[str, dict]:
    """`rein start`, then `rein status` until the run is in `status`."""
    started = await cli("start", agent, prompt)
    run_id = started["run_id"]

    async def reached() -> dict | None:
        view = await cli("status", run_id)
        return view if view["status"] == status else None

    return run_id, await poll(reached, 15, f"{run_id} to be {status}")


async def session_of(env, run_id: str) -> rein.Session:  # noqa: ANN001
    return await ReinClient(env.client).session(run_id)


# --------------------------------------------------------------------------- start, status, waiting, approve, result


async def test_start_status_waiting_approve_result(env, cli: Cli) -> None:  # noqa: ANN001
    started = await cli("start", "cli-ops", "billing please")
    assert set(started) == {"run_id"}
    run_id = started["run_id"]
    assert run_id.startswith("cli-ops-")

    async def waiting() -> dict | None:
        view = await cli("status", run_id)
        return view if view["status"] == "waiting_approval" else None

    view = await poll(waiting, 15, "waiting_approval")
    assert view["interrupt"]["type"] == "need_approval"
    assert view["pending_tool_calls"] == [{"id": "call-restart", "name": "restart", "arguments": {"service": "billing"}}]
    assert view["stage"] == "run_tools"
    assert view["iteration"] == 1

    async def listed() -> list | None:
        ids = await cli("waiting")
        return ids if run_id in ids else None

    assert run_id in await poll(listed, 15, "`rein waiting` to list the run")
    assert run_id not in await cli("waiting", "--status", "waiting_input")

    assert await cli("approve", run_id, "--approver", "alice", "--reason", "change ticket 42") == {
        "signalled": "approve", "run_id": run_id,
    }
    result = await cli("result", run_id)
    assert result["status"] == "done"
    assert result["output"] == "Report: billing restarted"
    assert "billing" in restarted
    assert result["run_id"] == run_id
    assert "session" not in result
    assert [s["kind"] for s in result["steps"]] == ["model", "tool", "model"]

    session = await session_of(env, run_id)
    assert [d.model_dump() for d in session.decisions] == [
        {"tool_call_id": "call-restart", "approved": True, "approver": "alice",
         "reason": "change ticket 42", "answer": None}
    ]
    assert (await cli("status", run_id))["status"] == "done"

    async def unlisted() -> bool:
        return run_id not in await cli("waiting")

    await poll(unlisted, 15, "the finished run to leave `rein waiting`")


async def test_approve_one_call_by_id(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, _ = await start_and_wait(cli, "cli-ops", "search please", "waiting_approval")
    # An unknown id is rejected to the caller (the `rein.approve` update's validator): exit 1, one line.
    cli.capsys.readouterr()
    code = await asyncio.to_thread(
        main, ["approve", run_id, "--tool-call-id", "no-such-call", "--approver", "eve", "--address", cli.address]
    )
    err = cli.capsys.readouterr().err
    assert code == 1
    assert "no pending tool call with id 'no-such-call'" in err and err.count("\n") == 1
    view = await cli("status", run_id)
    assert view["status"] == "waiting_approval"
    assert (await session_of(env, run_id)).decisions == []

    await cli("approve", run_id, "--tool-call-id", "call-restart", "--approver", "dave")
    result = await cli("result", run_id)
    assert result["output"] == "Report: search restarted"
    decisions = (await session_of(env, run_id)).decisions
    assert [(d.tool_call_id, d.approved, d.approver, d.reason) for d in decisions] == [
        ("call-restart", True, "dave", "")
    ]


async def test_deny_with_approver_and_reason(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, _ = await start_and_wait(cli, "cli-ops", "payments please", "waiting_approval")
    assert await cli("deny", run_id, "--approver", "bob", "--reason", "not during business hours") == {
        "signalled": "deny", "run_id": run_id,
    }
    result = await cli("result", run_id)
    assert result["status"] == "done"
    # the model saw a denial naming the approver and the reason; the tool never ran
    assert result["output"].startswith("Report: Denied by bob")
    assert "not during business hours" in result["output"]
    assert "payments" not in restarted
    tool_steps = [s for s in result["steps"] if s["kind"] == "tool"]
    assert [s["is_error"] for s in tool_steps] == [True]
    decisions = (await session_of(env, run_id)).decisions
    assert [(d.approved, d.approver, d.reason) for d in decisions] == [(False, "bob", "not during business hours")]


async def test_answer(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, view = await start_and_wait(cli, "cli-human", "deploy the app", "waiting_input")
    assert view["interrupt"]["type"] == "need_input"
    assert view["interrupt"]["message"] == "Which region?"

    async def listed() -> list | None:
        ids = await cli("waiting", "--status", "waiting_input")
        return ids if run_id in ids else None

    await poll(listed, 15, "`rein waiting --status waiting_input` to list the run")

    assert await cli("answer", run_id, "eu-west-1", "--approver", "carol") == {"signalled": "answer", "run_id": run_id}
    result = await cli("result", run_id)
    assert result["output"] == "Deploying to eu-west-1"
    decisions = (await session_of(env, run_id)).decisions
    assert [(d.tool_call_id, d.answer, d.approver) for d in decisions] == [("call-ask", "eu-west-1", "carol")]


async def test_retry_after_exhausted_model_attempts(env, cli: Cli) -> None:  # noqa: ANN001
    calls_before = flaky_model.calls
    run_id, view = await start_and_wait(cli, "cli-flaky", "flaky question", "waiting_retry")
    assert view["interrupt"]["type"] == "error"
    assert "503" in view["interrupt"]["message"]
    assert flaky_model.calls - calls_before == 1  # model_attempts=1: no Temporal retry before the interrupt

    assert await cli("retry", run_id) == {"signalled": "retry", "run_id": run_id}
    result = await cli("result", run_id)
    assert result["status"] == "done"
    assert result["output"] == "recovered after retry"
    assert flaky_model.calls - calls_before == 2


async def test_cancel(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, _ = await start_and_wait(cli, "cli-ops", "ledger please", "waiting_approval")
    assert await cli("cancel", run_id, "--reason", "wrong ticket") == {"signalled": "cancel", "run_id": run_id}
    result = await cli("result", run_id)
    assert result["stop_reason"] == "cancelled"
    assert "ledger restarted" not in json.dumps(result)
    assert "ledger" not in restarted
    assert (await cli("status", run_id))["status"] == "cancelled"


async def test_decision_commands_on_a_run_in_the_wrong_state_are_rejected(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, _ = await start_and_wait(cli, "cli-ops", "cache please", "waiting_approval")
    for argv, why in ((["retry", run_id], "not waiting after an error"), (["answer", run_id, "hello"], "not waiting for input")):
        cli.capsys.readouterr()
        code = await asyncio.to_thread(main, [*argv, "--address", cli.address])
        assert code == 1
        assert why in cli.capsys.readouterr().err
    view = await cli("status", run_id)
    assert view["status"] == "waiting_approval" and view["ignored_signals"] == 0
    await cli("approve", run_id)
    assert (await cli("result", run_id))["output"] == "Report: cache restarted"


# --------------------------------------------------------------------------- rein run (subprocess)


def _run_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_MODEL", "REIN_TASK_QUEUE")}
    env.update(extra)
    return env


def test_rein_run_local_auto_approve() -> None:
    proc = subprocess.run(
        [REIN_BIN, "run", "examples.calculator:agent", "What is 2 + 3?", "--no-input", "--auto-approve"],
        cwd=str(ROOT), env=_run_env(REIN_ENGINE="local"), capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "The answer is 5."
    assert "run local" in proc.stderr


def test_rein_run_local_without_auto_approve_denies() -> None:
    proc = subprocess.run(
        [REIN_BIN, "run", "examples.calculator:agent", "What is 2 + 3?", "--no-input"],
        cwd=str(ROOT), env=_run_env(REIN_ENGINE="local"), capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    # --no-input without --auto-approve denies every call: the add tool never runs
    assert "The answer is 5." not in proc.stdout
    assert "run local" in proc.stderr


# --------------------------------------------------------------------------- rein server (subprocess)


def _children(pid: int) -> set[int]:
    """Direct children of `pid` (all its threads), from /proc."""
    found: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found |= {int(c) for c in f.read().split()}
    except OSError:
        pass
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            return True
    except OSError:
        return False


def _wait_until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


class ReinServer:
    """`rein server` as a subprocess; stdout read without blocking."""

    def __init__(self, unbuffered: bool):
        self.port, self.ui_port = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        if unbuffered:
            env["PYTHONUNBUFFERED"] = "1"
        self.process = subprocess.Popen(
            [REIN_BIN, "server", "--port", str(self.port), "--ui-port", str(self.ui_port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=str(ROOT),
        )
        os.set_blocking(self.process.stdout.fileno(), False)
        self.output = b""
        self.children: set[int] = set()

    def read(self) -> str:
        try:
            while chunk := os.read(self.process.stdout.fileno(), 65536):
                self.output += chunk
        except BlockingIOError:
            pass
        self.children |= _children(self.process.pid)
        return self.output.decode(errors="replace")

    def read_until(self, text: str, timeout: float) -> str:
        _wait_until(lambda: text in self.read() or self.process.poll() is not None, timeout)
        return self.read()

    def cleanup(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        for pid in self.children:  # the dev server rein started, if rein left it behind
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def rein_server() -> Iterator[Callable[[bool], ReinServer]]:
    started: list[ReinServer] = []

    def start(unbuffered: bool = True) -> ReinServer:
        server = ReinServer(unbuffered)
        started.append(server)
        return server

    yield start
    for server in started:
        server.cleanup()


async def test_rein_server_prints_addresses_registers_attributes_serves_ui(rein_server) -> None:  # noqa: ANN001
    server = rein_server(True)
    out = await asyncio.to_thread(server.read_until, "Temporal UI:", 30)
    assert "Temporal UI:" in out, f"rein server printed: {out!r} (exit code {server.process.poll()})"
    address = out.split("Temporal dev server:", 1)[1].split()[0]
    assert address == f"127.0.0.1:{server.port}"
    ui_url = out.split("Temporal UI:", 1)[1].split()[0]
    assert ui_url == f"http://127.0.0.1:{server.ui_port}"

    client = await Client.connect(address)
    listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="default"))
    assert {k: v for k, v in listed.custom_attributes.items() if k.startswith("Rein")} == {
        "ReinAgent": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "ReinStatus": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "ReinIterations": IndexedValueType.INDEXED_VALUE_TYPE_INT,
        "ReinTokens": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    }

    def ui_status() -> int | None:
        try:
            with urllib.request.urlopen(ui_url, timeout=2) as response:
                return response.status
        except OSError:
            return None

    assert await asyncio.to_thread(_wait_until, lambda: ui_status() == 200, 20), f"no HTTP 200 from {ui_url}"

    # Ctrl-C (the documented way to stop it) ends rein and the dev server it started
    server.process.send_signal(signal.SIGINT)
    assert await asyncio.to_thread(server.process.wait, 20) == 0
    assert await asyncio.to_thread(_wait_until, lambda: not _listening(server.port), 15)


def test_rein_server_terminate_stops_the_dev_server(rein_server) -> None:  # noqa: ANN001
    """SIGTERM (Popen.terminate, `kill`, docker stop, systemd) must not leave the dev server running."""
    server = rein_server(True)
    assert "Temporal UI:" in server.read_until("Temporal UI:", 30)
    assert server.children, "rein server started no child process"
    dev_servers = set(server.children)

    server.process.terminate()
    server.process.wait(timeout=20)
    assert server.process.returncode is not None
    stopped = _wait_until(lambda: not _listening(server.port) and not any(_alive(p) for p in dev_servers), 5)
    assert stopped, (
        f"`rein server` exited on SIGTERM (code {server.process.returncode}) but its Temporal dev server "
        f"(pid {sorted(p for p in dev_servers if _alive(p))}) still listens on {server.port}"
    )


def test_rein_server_prints_addresses_when_stdout_is_a_pipe(rein_server) -> None:  # noqa: ANN001
    """A user piping `rein server` (tee, docker logs, systemd) must see the addresses while it runs."""
    server = rein_server(False)  # no PYTHONUNBUFFERED: Python block-buffers a piped stdout
    assert _wait_until(lambda: _listening(server.port) or server.process.poll() is not None, 30)
    out = server.read_until("Temporal UI:", 3)
    assert server.process.poll() is None, out
    assert f"127.0.0.1:{server.port}" in out and "Temporal UI:" in out, (
        f"`rein server` is running and its dev server listens on {server.port}, "
        f"but nothing was printed on the pipe after 3 s: {out!r}"
    )

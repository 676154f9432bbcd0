"""The `rein` command line, against a real dev server with an in-process worker.

Happy paths run in-process through `rein.cli.main(argv)` (in a thread: each command calls
`asyncio.run`) with `--json`, and so do most error paths (tests.support.in_process.rein_inproc: the
same exit code and the same one line on stderr). Each kind of error once, `rein run` at a terminal
or without one, `rein worker`, `rein server`, `rein codec-server` and the teardown check run the
real `rein` console script as a subprocess, as a user runs it: every error is one line on stderr,
no traceback, and the documented exit code.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client

import rein
from rein import Agent, Completion, LoopConfig, Message, Usage
from rein.cli import (
    EXIT_CANCELLED,
    EXIT_NEEDS_PERSON,
    EXIT_NO_WORKER,
    EXIT_NOT_FOUND,
    EXIT_REJECTED,
    EXIT_RUN_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    main,
)
from rein.client import ReinClient
from rein.durable.embedded_server import free_port, listening, stop_embedded
from tests.support.embedded import embedded_server  # noqa: F401  (a fixture)
from tests.support.in_process import rein_inproc
from tests.support.processes import stop_process, wait_for_text
from tests.support.providers import CallThenReport, OpsModel, StreamsItsCompletion, Unavailable
from tests.support.waiting import poll, wait_until

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")


# --------------------------------------------------------------------------- agents the worker serves


USAGE = Usage(input_tokens=3, output_tokens=2)


def _text(text: str) -> Completion:
    return Completion(message=Message(role="assistant", content=text), finish_reason="stop", usage=USAGE)


class FlakyModel(StreamsItsCompletion):
    """The first call for each prompt fails with a 503; later calls answer."""

    def __init__(self) -> None:
        self.failed: set[str] = set()
        self.calls = 0

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        self.calls += 1
        prompt = next(m.content for m in messages if m.role == "user")
        if prompt not in self.failed:
            self.failed.add(prompt)
            raise Unavailable("upstream said 503 Service Unavailable")
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
    Agent(provider=CallThenReport("ask_human", {"question": "Which region?"}, "call-ask", "Deploying to {}"),
          tools=[rein.ask_human], name="cli-human"),
    Agent(provider=flaky_model, config=LoopConfig(model_attempts=1), name="cli-flaky"),
]


# --------------------------------------------------------------------------- fixtures and helpers


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(dev):  # noqa: ANN001
    """The module's dev server, with a worker serving AGENTS on rein's default task queue."""
    async with rein.create_worker(dev.client, agents=AGENTS, task_queue="rein"):
        yield dev


@pytest.fixture
def address(env, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: ANN001
    for name in ("REIN_TASK_QUEUE", "TEMPORAL_NAMESPACE", "TEMPORAL_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    return env.client.service_client.config.target_host


class Cli:
    """`rein ... --json` in this process; returns the JSON it printed."""

    def __init__(self, address: str, capsys: pytest.CaptureFixture[str]):
        self.address = address
        self.capsys = capsys

    async def run(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = await asyncio.to_thread(main, [*argv, "--address", self.address])
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    async def proc(self, *argv: str) -> subprocess.CompletedProcess:
        """The same as a CompletedProcess (for assert_one_line_error)."""
        code, out, err = await self.run(*argv)
        return subprocess.CompletedProcess(["rein", *argv], code, out, err)

    async def __call__(self, *argv: str) -> Any:
        code, out, err = await self.run(*argv, "--json")
        assert code == 0, err
        return json.loads(out)

    async def text(self, *argv: str) -> str:
        code, out, err = await self.run(*argv)
        assert code == 0, err
        return out


@pytest.fixture
def cli(address: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(address, capsys)


async def start_and_wait(cli: Cli, agent: str, prompt: str, status: str) -> tuple[str, dict]:
    """`rein start`, then `rein status` until the run is in `status`."""
    run_id = (await cli("start", agent, prompt))["run_id"]

    async def reached() -> dict | None:
        view = await cli("status", run_id)
        return view if view["status"] == status else None

    return run_id, await poll(reached, f"{run_id} to be {status}", 15, interval=0.1)


async def listed(cli: Cli, run_id: str, *argv: str) -> dict:
    """The run's row in `rein list ARGV --json` (visibility is eventually consistent)."""

    async def row() -> dict | None:
        return next((r for r in await cli("list", *argv) if r["run_id"] == run_id), None)

    return await poll(row, f"`rein list {' '.join(argv)}` to show {run_id}", 15, interval=0.1)


async def session_of(env, run_id: str) -> rein.Session:  # noqa: ANN001
    return await ReinClient(env.client).session(run_id)


def rein_cli(*argv: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """The real `rein` console script."""
    environ = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")}
    environ.update(env)
    return subprocess.run([REIN_BIN, *argv], cwd=str(ROOT), env=environ, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """Exit `code`, nothing on stdout, exactly one line on stderr naming the problem, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == "", proc.stdout
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rein: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# --------------------------------------------------------------------------- start, list, show, status, approve, result


async def test_start_list_show_approve_result(env, cli: Cli) -> None:  # noqa: ANN001
    started = await cli("start", "cli-ops", "billing please")
    assert set(started) == {"run_id"}
    run_id = started["run_id"]
    assert run_id.startswith("cli-ops-")

    async def waiting() -> dict | None:
        view = await cli("status", run_id)
        return view if view["status"] == "waiting_approval" else None

    view = await poll(waiting, "waiting_approval", 15, interval=0.1)
    assert view["interrupt"]["type"] == "need_approval"
    assert view["pending_tool_calls"] == [{"id": "call-restart", "name": "restart", "arguments": {"service": "billing"}}]
    assert view["stage"] == "run_tools"
    assert view["iteration"] == 1
    assert view["summary"] == "cli-ops: billing please"  # the static summary rein start sets

    row = await listed(cli, run_id, "--status", "waiting_approval")
    assert row["agent"] == "cli-ops" and row["status"] == "waiting_approval"
    assert row["waits_for"] == 'approval: restart(service="billing")'
    assert row["iterations"] == 1 and row["tokens"] == 5
    assert run_id not in [r["run_id"] for r in await cli("list", "--status", "waiting_input")]
    assert run_id in [r["run_id"] for r in await cli("list", "--agent", "cli-ops")]
    assert run_id not in [r["run_id"] for r in await cli("list", "--agent", "cli-human")]

    # the human views: the table and the pending call with its arguments and the commands to answer
    table = await cli.text("list", "--status", "waiting_approval")
    assert run_id in table and 'restart(service="billing")' in table
    shown = await cli.text("show", run_id)
    assert "waiting_approval" in shown and "tool calls: restart" in shown
    assert "steps" in shown and "model" in shown.split("steps", 1)[1]  # the steps table: the model call so far
    assert '"service": "billing"' in shown and f"rein approve {run_id}" in shown

    out = await cli.text("approve", run_id, "--approver", "alice", "--reason", "change ticket 42")
    assert out.strip().startswith(f'approved restart(service="billing") [call-restart] in run {run_id} (wait 1-')
    result = await cli("result", run_id)
    assert result["status"] == "done"
    assert result["output"] == "Report: billing restarted"
    assert "billing" in restarted
    assert result["run_id"] == run_id
    assert "session" not in result
    assert [s["kind"] for s in result["steps"]] == ["model", "tool", "model"]
    assert (await cli.text("result", run_id)).strip() == "Report: billing restarted"

    session = await session_of(env, run_id)
    assert [(d.tool_call_id, d.approved, d.approver, d.reason) for d in session.decisions] == [
        ("call-restart", True, "alice", "change ticket 42")
    ]
    assert (await cli("status", run_id))["status"] == "done"
    detail = await cli("show", run_id)
    assert [(s["kind"], s["summary"]) for s in detail["steps"]] == [
        ("model", "tool calls: restart"), ("tool", "restart → billing restarted"), ("model", "text reply"),
    ] or [s["kind"] for s in detail["steps"]] == ["model", "tool", "model"]
    assert (await listed(cli, run_id, "--status", "done"))["waits_for"] == ""


async def test_approve_one_call_by_id_and_a_bogus_id_is_rejected(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, _ = await start_and_wait(cli, "cli-ops", "search please", "waiting_approval")
    code, out, err = await cli.run("approve", run_id, "--tool-call-id", "no-such-call", "--approver", "eve")
    assert code == EXIT_REJECTED and out == ""
    assert "no pending tool call with id 'no-such-call'" in err and err.count("\n") == 1
    assert (await cli("status", run_id))["status"] == "waiting_approval"
    assert (await session_of(env, run_id)).decisions == []

    await cli.text("approve", run_id, "--tool-call-id", "call-restart", "--approver", "dave")
    assert (await cli("result", run_id))["output"] == "Report: search restarted"
    decisions = (await session_of(env, run_id)).decisions
    assert [(d.tool_call_id, d.approved, d.approver) for d in decisions] == [("call-restart", True, "dave")]


async def test_deny_with_approver_and_reason(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, _ = await start_and_wait(cli, "cli-ops", "payments please", "waiting_approval")
    out = await cli.text("deny", run_id, "--approver", "bob", "--reason", "not during business hours")
    assert out.strip().startswith(f'denied restart(service="payments") [call-restart] in run {run_id} (wait 1-')
    result = await cli("result", run_id)
    assert result["status"] == "done"
    assert result["output"].startswith("Report: Denied by bob")
    assert "not during business hours" in result["output"]
    assert "payments" not in restarted
    assert [s["is_error"] for s in result["steps"] if s["kind"] == "tool"] == [True]


async def test_answer(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, view = await start_and_wait(cli, "cli-human", "deploy the app", "waiting_input")
    assert view["interrupt"] == {"type": "need_input", "tool_call": view["interrupt"]["tool_call"],
                                 "message": "Which region?", "wait": view["wait"]}
    assert view["wait"].startswith("1-")  # the run's first wait
    row = await listed(cli, run_id, "--status", "waiting_input")
    assert row["waits_for"] == "input: Which region?"

    assert (await cli.text("answer", run_id, "eu-west-1", "--approver", "carol")).strip() == f"answered run {run_id}"
    assert (await cli("result", run_id))["output"] == "Deploying to eu-west-1"
    decisions = (await session_of(env, run_id)).decisions
    assert [(d.tool_call_id, d.answer, d.approver) for d in decisions] == [("call-ask", "eu-west-1", "carol")]


async def test_retry_after_exhausted_model_attempts(env, cli: Cli) -> None:  # noqa: ANN001
    calls_before = flaky_model.calls
    run_id, view = await start_and_wait(cli, "cli-flaky", "flaky question", "waiting_retry")
    assert view["interrupt"]["type"] == "error"
    assert "503" in view["interrupt"]["message"]
    assert "503" in (await listed(cli, run_id, "--status", "waiting_retry"))["waits_for"]

    assert (await cli.text("retry", run_id)).strip() == f"retrying run {run_id}"
    result = await cli("result", run_id)
    assert result["output"] == "recovered after retry"
    assert flaky_model.calls - calls_before == 2


async def test_cancel(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, _ = await start_and_wait(cli, "cli-ops", "ledger please", "waiting_approval")
    assert (await cli.text("cancel", run_id, "--reason", "wrong ticket")).strip() == f"cancelled run {run_id}"
    code, out, err = await cli.run("result", run_id, "--json")
    assert code == EXIT_CANCELLED, err  # the output (if any) and a line saying why
    assert json.loads(out)["stop_reason"] == "cancelled"
    assert err.strip() == f"rein: run {run_id} was cancelled: wrong ticket"
    assert "ledger" not in restarted
    assert (await cli("status", run_id))["status"] == "cancelled"
    assert (await listed(cli, run_id, "--status", "cancelled"))["status"] == "cancelled"


async def test_watch_prints_steps_until_the_run_pauses(env, cli: Cli) -> None:  # noqa: ANN001
    run_id = (await cli("start", "cli-ops", "watch please"))["run_id"]
    code, out, err = await cli.run("watch", run_id)
    assert code == 0, err
    assert err == ""  # what the run does is stdout's; stderr is for errors
    assert "tool calls: restart" in out  # the model step, live
    assert "waiting_approval" in out and f"rein approve {run_id}" in out
    await cli.text("approve", run_id)
    code, out, err = await cli.run("watch", run_id)
    assert code == 0, err
    assert "done" in out and "Report: watch restarted" in out


# --------------------------------------------------------------------------- error paths, through the real entry point


def test_errors_are_one_line_with_exit_codes(env, address: str, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """Each kind of error once through the real console script (what a person's terminal shows: one line,
    the exit code, nothing a logger adds), the rest of the same kinds in this process (`rein.cli.main`)."""
    proc = rein_cli("status", "no-such-run", "--address", address)
    assert_one_line_error(proc, EXIT_NOT_FOUND, "no run with id 'no-such-run'")
    here = rein_inproc("status", "no-such-run", "--address", address)
    assert (here.returncode, here.stdout, here.stderr) == (proc.returncode, proc.stdout, proc.stderr)  # the same
    for command in ("approve", "result"):
        assert_one_line_error(rein_inproc(command, "no-such-run", "--address", address), EXIT_NOT_FOUND,
                              "no-such-run")

    closed = f"127.0.0.1:{free_port()}"  # a stale TEMPORAL_ADDRESS: nothing listens there
    assert_one_line_error(rein_cli("list", TEMPORAL_ADDRESS=closed), EXIT_UNREACHABLE, closed, "connection refused")
    assert_one_line_error(rein_inproc("status", "x", "--address", closed), EXIT_UNREACHABLE, closed)

    for i, (target, needle) in enumerate((
            ("rein.examples.calculator", "expected MODULE:ATTR"),
            ("examples.nowhere:agent", "no module named 'examples.nowhere'"),
            ("rein.examples.calculator:nothing", "module 'rein.examples.calculator' has no attribute 'nothing'"),
            ("rein.examples.calculator:add", "is not a rein.Agent (got function)"))):
        run = rein_cli if i == 0 else rein_inproc  # the first through the console script
        assert_one_line_error(run("run", target, "hi"), EXIT_USAGE, needle)
        assert_one_line_error(run("worker", "--agent", target, "--address", address), EXIT_USAGE, needle)

    debug = rein_cli("status", "no-such-run", "--address", address, "--debug")
    assert debug.returncode == EXIT_NOT_FOUND and "Traceback" in debug.stderr


async def test_rejected_decisions_are_one_line(env, cli: Cli, address: str) -> None:  # noqa: ANN001
    run_id, _ = await start_and_wait(cli, "cli-ops", "cache please", "waiting_approval")
    for argv, why in ((["retry", run_id], "not waiting after an error"),
                      (["answer", run_id, "hello"], "not waiting for input"),
                      (["approve", run_id, "--tool-call-id", "bogus"], "no pending tool call with id 'bogus'")):
        assert_one_line_error(await cli.proc(*argv), EXIT_REJECTED, why)
    view = await cli("status", run_id)
    assert view["status"] == "waiting_approval" and view["ignored_signals"] == 0
    await cli.text("approve", run_id)
    assert (await cli("result", run_id))["output"] == "Report: cache restarted"
    proc = await asyncio.to_thread(rein_cli, "approve", run_id, "--address", address)  # a finished run
    assert_one_line_error(proc, EXIT_REJECTED, run_id)  # through the console script: a terminal sees one line too


async def test_a_run_of_an_unknown_agent_is_failed_everywhere(env, cli: Cli) -> None:  # noqa: ANN001
    refused = await cli.proc("start", "no-such-agent", "hello")
    line = assert_one_line_error(refused, EXIT_NO_WORKER, "no worker serves agent 'no-such-agent'", "--no-check")
    assert "Unknown agent 'no-such-agent'" in line  # what the worker on the shared queue answered
    run_id = (await cli("start", "no-such-agent", "hello", "--no-check", "--queue", "rein"))["run_id"]
    proc = await cli.proc("result", run_id)
    assert_one_line_error(proc, EXIT_RUN_FAILED, f"run {run_id} failed", "Unknown agent 'no-such-agent'")
    view = await cli("status", run_id)
    assert view["status"] == "failed" and "Unknown agent" in view["error"]
    assert view["summary"] == "no-such-agent: hello"

    async def recorded() -> bool:  # the search attribute itself, as `temporal workflow list` sees it
        ids = [w.id async for w in env.client.list_workflows(f'ReinStatus="failed" AND WorkflowId="{run_id}"')]
        return ids == [run_id]

    await poll(recorded, "ReinStatus=failed", 15, interval=0.1)
    assert (await listed(cli, run_id, "--status", "failed"))["status"] == "failed"


async def test_status_reflects_a_terminated_run(env, cli: Cli) -> None:  # noqa: ANN001
    run_id, _ = await start_and_wait(cli, "cli-ops", "terminate please", "waiting_approval")
    await env.client.get_workflow_handle(run_id).terminate(reason="operator pulled the plug")
    view = await cli("status", run_id)
    assert view["status"] == "failed"  # not the stale ReinStatus=waiting_approval
    assert "operator pulled the plug" in view["error"] or "terminated" in view["error"].lower()
    assert (await listed(cli, run_id, "--status", "failed"))["status"] == "failed"
    assert_one_line_error(await cli.proc("result", run_id), EXIT_RUN_FAILED, run_id)


TEARDOWN_MARK = "rein-test: the interpreter's teardown ran"
SHORT_COMMAND = ("import atexit, sys\n"
                 f"atexit.register(print, {TEARDOWN_MARK!r}, file=sys.stderr)\n"
                 "from rein.cli import entry\n"
                 "sys.argv[0] = 'rein'\n"
                 "sys.exit(entry())\n")
"""The `rein` console script's own code (`sys.exit(rein.cli:entry())`), plus a first atexit hook: the last to run in
the interpreter's teardown, so it prints its mark whenever a process gets there."""


async def test_short_commands_exit_cleanly(env, cli: Cli, address: str) -> None:  # noqa: ANN001
    """temporalio's shutdown race (sdk-python#300) used to abort ~15% of short calls with exit 134: its core's
    threads called into an interpreter tearing down. The console script flushes and leaves with os._exit, so no
    `rein` process reaches the teardown: the mark checks that in every process (without the fix, each prints it).
    N=12 short commands, two at a time, check that they all exit 0 with their JSON and nothing on stderr
    (at issue 9's ~15% abort rate, 12 calls would show an abort in ~86% of runs: the mark is what never misses)."""
    run_id, _ = await start_and_wait(cli, "cli-ops", "short please", "waiting_approval")

    def once(_: int) -> subprocess.CompletedProcess:
        environ = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")}
        return subprocess.run([sys.executable, "-c", SHORT_COMMAND, "status", run_id, "--json", "--address", address],
                              cwd=str(ROOT), env=environ, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = await asyncio.to_thread(lambda: list(pool.map(once, range(12))))
    codes = [p.returncode for p in procs]
    assert codes == [0] * 12, [(p.returncode, p.stderr[-300:]) for p in procs if p.returncode]
    assert all(json.loads(p.stdout)["status"] == "waiting_approval" for p in procs)
    assert not [p.stderr for p in procs if p.stderr]  # the teardown's mark included
    await cli.text("cancel", run_id)


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    def help_of(*argv: str) -> str:
        assert main([*argv, "--help"]) == 0, argv
        return " ".join(capsys.readouterr().out.split())

    for command in ("server", "worker", "start", "run", "list", "show", "status", "result", "approve", "deny",
                    "answer", "retry", "cancel", "watch", "new", "codec-server"):
        assert "Usage: rein " + command in help_of(command), command
    assert "Usage: rein server status" in help_of("server", "status")
    assert "Usage: rein server stop" in help_of("server", "stop")
    for status in ("running", "waiting_approval", "waiting_input", "waiting_retry", "done", "cancelled", "failed"):
        assert status in help_of("list")
    assert "--task-queue" not in help_of("status")
    top = help_of()  # the top level (test_exit_codes_help.py reads it through the console script)
    assert "Exit codes" in top and "codec-server" in top


# --------------------------------------------------------------------------- rein run (subprocess)


def test_rein_run_local_auto_approve(capsys: pytest.CaptureFixture[str]) -> None:
    """In this process (`rein.cli.main`): what it prints where; the terminal tests below run the real process."""
    proc = rein_inproc("run", "rein.examples.calculator:agent", "What is 2 + 3?", "--auto-approve",
                     REIN_ENGINE="local")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "The answer is 5."
    assert "auto-approved add(a=2.0, b=3.0)" in proc.stderr
    assert "tool calls: add" in proc.stderr and "add → 5" in proc.stderr  # the steps, as they happen
    assert "run local" in proc.stderr


@pytest.mark.usefixtures("embedded_server")
def test_rein_run_without_a_terminal_stops_with_a_hint(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    proc = rein_cli("run", "rein.examples.calculator:agent", "What is 2 + 3?")
    assert proc.returncode == EXIT_NEEDS_PERSON, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert '"a": 2.0' in proc.stderr and "add" in proc.stderr  # what it waits for, with the arguments
    hint = proc.stderr.strip().splitlines()[-1]
    assert hint.startswith("rein: stopped: run calculator-") and "rein approve calculator-" in hint
    run_id = hint.split("run ", 1)[1].split()[0]
    # The run was not denied: it waits, durably, in the shared embedded server (REIN_HOME). Its
    # worker has just exited: the status is replayed from history at once (not after 3 s).
    monkeypatch.setenv("REIN_QUERY_GRACE_S", "0")
    assert main(["status", run_id, "--json"]) == 0
    monkeypatch.delenv("REIN_QUERY_GRACE_S")
    view = json.loads(capsys.readouterr().out)
    assert view["status"] == "waiting_approval"

    # ...and `rein worker` (another process) serves it once someone approves it.
    environ = {k: v for k, v in os.environ.items() if k != "TEMPORAL_ADDRESS"}
    worker = subprocess.Popen([REIN_BIN, "worker", "--agent", "rein.examples.calculator:agent"], cwd=str(ROOT),
                              env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL)
    try:
        assert main(["approve", run_id, "--approver", "ops", "--wait"]) == 0  # until the worker polls
        assert main(["result", run_id]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == "The answer is 5."
    finally:
        _, stderr = stop_process(worker, 30, signal.SIGINT)
    assert worker.returncode == 0, stderr[-2000:]


class Terminal:
    """`rein run ...` with a pseudo-terminal as its stdin, stdout and stderr (so it asks there)."""

    def __init__(self, *args: str, **env: str):
        self.master, slave = pty.openpty()
        environ = {k: v for k, v in os.environ.items() if k != "TEMPORAL_ADDRESS"}
        self.process = subprocess.Popen([REIN_BIN, "run", *args], cwd=str(ROOT),
                                        env={**environ, "COLUMNS": "200", "NO_COLOR": "1", **env},
                                        stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        self.seen = b""

    def read_until(self, text: bytes, timeout: float) -> bytes:
        """What the terminal showed, once it shows `text` (or the bound passed, or the process closed it)."""
        deadline = time.monotonic() + timeout
        while text not in self.seen and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.master, 4096)
                except OSError:
                    break
        return self.seen

    @property
    def plain(self) -> str:
        return re.sub(rb"\x1b\[[0-9;]*m", b"", self.seen).decode(errors="replace")  # a terminal gets styles

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.master)


@pytest.mark.usefixtures("embedded_server")
def test_rein_run_asks_at_the_terminal_with_the_arguments() -> None:
    with Terminal("rein.examples.calculator:agent", "What is 2 + 3?") as term:
        assert b"Approve?" in term.read_until(b"Approve?", 90), term.seen
        assert "Approval needed" in term.plain and "add" in term.plain
        assert '"a": 2.0' in term.plain and '"b": 3.0' in term.plain
        os.write(term.master, b"y\n")
        term.read_until(b"The answer is", 90)
        assert term.process.wait(timeout=60) == 0, term.seen
        term.read_until(b"run calculator-", 5)
    assert "The answer is 5." in term.plain
    assert "add \u2192 5" in term.plain  # the approved tool's step, shown as it ran


@pytest.mark.usefixtures("embedded_server")
@pytest.mark.parametrize("engine", ["temporal", "local"])
def test_rein_run_at_the_terminal_denies_what_is_refused(engine: str, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Answering no denies the call: the tool does not run, the model is told, and the run finishes
    (it does not stop at the refusal, and it does not wait for someone else)."""
    with Terminal("rein.examples.calculator:agent", "What is 2 + 3?", REIN_ENGINE=engine) as term:
        assert b"Approve?" in term.read_until(b"Approve?", 90), term.seen
        os.write(term.master, b"n\n")
        term.read_until(b"tokens \xc2\xb7 run ", 90)
        assert term.process.wait(timeout=60) == 0, term.seen
        term.read_until(b"\n", 5)
    plain = term.plain
    assert "I could not compute that: a tool call was not approved." in plain
    assert "add \u2192 5" not in plain and "The answer is" not in plain
    assert re.search(r"\u2717 +tool +add \u2192 Denied\b.*was not run", plain), plain  # the step, as shown
    if engine == "local":
        return
    run_id = re.search(r"run (calculator-\S+)", plain.rsplit("tokens", 1)[1]).group(1)
    monkeypatch.setenv("REIN_QUERY_GRACE_S", "0")  # its worker has just exited: steps from history at once
    assert main(["show", run_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "done"
    steps = shown["steps"]
    assert [s["kind"] for s in steps] == ["model", "tool", "model"], steps
    assert steps[1]["is_error"] is True and steps[1]["summary"].startswith("add \u2192 Denied by "), steps[1]
    assert "was not run" in steps[1]["summary"]
    assert steps[2]["summary"] == "I could not compute that: a tool call was not approved."


# --------------------------------------------------------------------------- rein server (subprocess)



class ReinServer:
    """`rein server` as a subprocess with its own REIN_HOME; stdout read without blocking."""

    def __init__(self, home: Path, unbuffered: bool, port: int | None = None, ui_port: int | None = None):
        self.home = home
        self.port, self.ui_port = port or free_port(), ui_port or free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "TEMPORAL_ADDRESS")}
        env["REIN_HOME"] = str(home)
        if unbuffered:
            env["PYTHONUNBUFFERED"] = "1"
        self.process = subprocess.Popen(
            [REIN_BIN, "server", "--port", str(self.port), "--ui-port", str(self.ui_port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=str(ROOT),
        )
        os.set_blocking(self.process.stdout.fileno(), False)
        self.output = b""

    def read(self) -> str:
        try:
            while chunk := os.read(self.process.stdout.fileno(), 65536):
                self.output += chunk
        except BlockingIOError:
            pass
        return self.output.decode(errors="replace")

    def read_until(self, text: str, timeout: float) -> str:
        wait_until(lambda: text in self.read() or self.process.poll() is not None, f"{text!r} or an exit", timeout)
        return self.read()

    def cleanup(self) -> None:
        """Kill it if it still runs, and stop a dev server it left (what `rein server stop` does, here)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        stop_embedded(self.home)


@pytest.fixture
def rein_server(tmp_path: Path) -> Iterator[Callable[..., ReinServer]]:
    started: list[ReinServer] = []

    def start(unbuffered: bool = True, name: str = "home", **ports: int) -> ReinServer:
        server = ReinServer(tmp_path / name, unbuffered, **ports)
        started.append(server)
        return server

    yield start
    for server in started:
        server.cleanup()


async def test_rein_server_prints_addresses_registers_attributes_serves_ui(
        rein_server, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    server = rein_server(True)
    out = await asyncio.to_thread(server.read_until, "Ctrl-C", 60)
    assert "Temporal UI:" in out, f"rein server printed: {out!r} (exit code {server.process.poll()})"
    address = out.split("Temporal dev server:", 1)[1].split()[0]
    assert address == f"127.0.0.1:{server.port}"
    ui_url = out.split("Temporal UI:", 1)[1].split()[0]
    assert ui_url == f"http://127.0.0.1:{server.ui_port}"
    assert str(server.home / "temporal.db") in out  # where the runs live

    client = await Client.connect(address)
    listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="default"))
    assert {k: v for k, v in listed.custom_attributes.items() if k.startswith("Rein")} == {
        "ReinAgent": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "ReinStatus": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "ReinEvalOf": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "ReinIterations": IndexedValueType.INDEXED_VALUE_TYPE_INT,
        "ReinTokens": IndexedValueType.INDEXED_VALUE_TYPE_INT,
        "ReinForkOf": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "ReinAgentVersion": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "ReinCostUsd": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
        "ReinTenant": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    }

    def ui_status() -> int | None:
        try:
            with urllib.request.urlopen(ui_url, timeout=2) as response:
                return response.status
        except OSError:
            return None

    await asyncio.to_thread(wait_until, lambda: ui_status() == 200, f"HTTP 200 from {ui_url}", 20)

    env = {"REIN_HOME": str(server.home)}  # `rein server status` in this process: what it says, not a process
    status = await asyncio.to_thread(rein_inproc, "server", "status", "--json", **env)
    assert status.returncode == 0, status.stderr
    state = json.loads(status.stdout)
    assert state["address"] == address and state["ui"] == ui_url and state["in_use"] is True

    # Ctrl-C (the documented way to stop it): the last user leaves, the server stops.
    server.process.send_signal(signal.SIGINT)
    assert await asyncio.to_thread(server.process.wait, 30) == 0
    await asyncio.to_thread(wait_until, lambda: not listening(server.port), "the dev server to stop listening", 30)
    stopped = await asyncio.to_thread(rein_inproc, "server", "status", **env)
    assert stopped.returncode == 1 and "not running" in stopped.stdout


def test_rein_server_on_a_busy_port_fails_with_one_line(rein_server) -> None:  # noqa: ANN001
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        server = rein_server(True, port=busy.getsockname()[1])
        assert server.process.wait(timeout=60) == 1
        out = server.read()
        assert out.count("\n") == 1 and "already in use" in out and "Traceback" not in out, out
        assert "Temporal UI:" not in out
    finally:
        busy.close()


def test_rein_server_prints_addresses_when_stdout_is_a_pipe_and_terminate_stops_it(rein_server) -> None:  # noqa: ANN001
    """A user piping `rein server` (tee, docker logs, systemd) must see the addresses while it runs; and SIGTERM
    (Popen.terminate, `kill`, docker stop, systemd) must not leave the dev server running. One server for both."""
    server = rein_server(False)  # no PYTHONUNBUFFERED: Python block-buffers a piped stdout
    wait_until(lambda: listening(server.port) or server.process.poll() is not None, "the server to listen", 60)
    out = server.read_until("Ctrl-C", 30)
    assert server.process.poll() is None, out
    assert f"127.0.0.1:{server.port}" in out and "Temporal UI:" in out, out

    assert listening(server.port)
    server.process.terminate()
    assert server.process.wait(timeout=30) == 0
    wait_until(lambda: not listening(server.port), "the dev server to stop listening after SIGTERM", 30)


# --------------------------------------------------------------------------- rein codec-server (subprocess)


def test_rein_codec_server_round_trips_payloads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import base64

    key = base64.b64encode(os.urandom(32)).decode()
    port, log = free_port(), tmp_path / "codec.log"
    environ = {**os.environ, "REIN_CODEC_KEY": key, "REIN_CODEC_TOKEN": "cli-test-token"}
    with open(log, "wb") as out:
        process = subprocess.Popen([REIN_BIN, "codec-server", "--port", str(port)], env=environ, cwd=str(ROOT),
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:  # once it says it listens: a port that accepts could be another process's
        wait_for_text(log, f"rein codec server on http://127.0.0.1:{port}", process, 60)

        def post(path: str, body: dict) -> dict:
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json",
                                                      "Authorization": "Bearer cli-test-token"})
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())

        plain = {"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
                 "data": base64.b64encode(b'{"secret": "tool output"}').decode()}
        encoded = post("/encode", {"payloads": [plain]})
        assert b"tool output" not in base64.b64decode(encoded["payloads"][0]["data"])
        assert post("/decode", encoded)["payloads"] == [plain]
    finally:
        stop_process(process, 20)
    no_key = rein_inproc("codec-server", REIN_CODEC_KEY="")  # refused before it serves: in this process
    assert_one_line_error(no_key, EXIT_USAGE, "REIN_CODEC_KEY is not set")

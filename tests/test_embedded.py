"""Durable by default, across real processes: the shared embedded server of REIN_HOME.

Every test has its own REIN_HOME (so its own embedded server) and runs scripts as separate
Python processes with no TEMPORAL_ADDRESS, as a user runs them. The agent
(tests/agents/durable.py) counts its tool's side effects in files.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rein.durable.embedded_server import embedded_status, start_dev_server, stop_embedded
from tests.support.processes import stop_process
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
TIMEOUT = 120

RUN = """
import json, sys
from tests.agents.durable import agent
result = agent.run("note it")
open(sys.argv[1], "w").write(result.session.model_dump_json())
print(json.dumps({"status": result.status, "run_id": result.run_id}), flush=True)
"""

RESUME = """
import json, sys
from rein import Session
from tests.agents.durable import agent
session = Session.model_validate_json(open(sys.argv[1]).read())
result = agent.resume(session, approve=True)
print(json.dumps({"status": result.status, "run_id": result.run_id, "output": result.output,
                  "steps": [s.summary for s in result.steps]}), flush=True)
"""

RUN_THEN_APPROVE_SLOWLY = """
import json, sys
from tests.agents.durable import agent
result = agent.run("note it")
open(sys.argv[1], "w").write(result.session.model_dump_json())
print(json.dumps({"run_id": result.run_id}), flush=True)
agent.resume(result.session, approve=True)  # the tool's first attempt sleeps: killed meanwhile
"""

RUN_THEN_AWAIT_DECISION = """
import asyncio, json
from rein.client import ReinClient, connect
from tests.agents.durable import agent
result = agent.run("note it")
print(json.dumps({"run_id": result.run_id, "status": result.status}), flush=True)

async def outcome():  # someone else decides; this process's worker runs the tool
    return await ReinClient(await connect()).result(result.run_id)

print(json.dumps({"output": asyncio.run(outcome()).output}), flush=True)
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "rein-home"
    (tmp_path / "out").mkdir()
    try:
        yield home
    finally:
        stop_embedded(home)
        _kill(_processes_using(home))


@pytest.fixture
def out(home: Path) -> Path:
    return home.parent / "out"


def _env(home: Path, **extra: str) -> dict[str, str]:
    drop = ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_PROFILE", "REIN_TASK_QUEUE", "REIN_ENGINE",
            "REIN_SERVER_IDLE_S")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(REIN_HOME=str(home), REINTEST_DIR=str(home.parent / "out"), PYTHONUNBUFFERED="1", **extra)
    return env


def _script(home: Path, code: str, *args: str, **env: str) -> dict:
    """Run `code` in a new Python process; the JSON its last line printed."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=_env(home, **env),
        capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"{proc.stderr[-3000:]}\nstdout: {proc.stdout[-500:]}\nserver log: {_log(home)}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _log(home: Path, tail: int = 1500) -> str:
    log = home / "server.log"
    return log.read_text(errors="replace")[-tail:] if log.exists() else "(none)"


def _rein_text(home: Path, *argv: str) -> str:
    proc = subprocess.run(
        [REIN_BIN, *argv], cwd=ROOT, env=_env(home), capture_output=True, text=True, timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def _rein(home: Path, *argv: str) -> dict:
    return json.loads(_rein_text(home, *argv))


async def _result(home: Path, run_id: str) -> Any:
    """The run's result, read in this process from the running embedded server of `home` (no lease taken)."""
    from rein.client import ReinClient, connect

    status = embedded_status(home)
    assert status is not None, _log(home)
    return await ReinClient(await connect(status["address"])).result(run_id)


def _processes_using(home: Path) -> list[int]:
    """Pids whose command line names this REIN_HOME (its supervisor and `temporal` server)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            except OSError:
                continue
            if str(home).encode() in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _no_server_left(home: Path) -> None:
    wait_until(lambda: not _processes_using(home), f"the embedded server of {home} to stop", 30)
    assert embedded_status(home) is None


# --------------------------------------------------------------------------- tests


def test_a_run_waiting_for_approval_is_seen_by_the_cli_and_resumed_by_another_process(home: Path, out: Path) -> None:
    """One run a script left waiting: `rein status` (another process) sees it, a third process resumes it.
    (The two were separate tests, each paying a script and a server start for the same waiting run.)"""
    first = _script(home, RUN, str(out / "session.json"))
    assert first["status"] == "interrupted"
    _no_server_left(home)  # the process exited and was the server's last user: runs stay on disk

    view = _rein(home, "status", first["run_id"], "--json")  # restarts the server; read from the run's history
    assert view["status"] == "waiting_approval"
    assert view["interrupt"]["type"] == "need_approval"
    assert [c["id"] for c in view["pending_tool_calls"]] == ["call-record"]
    assert _lines(out / "starts") == []  # no process serves the agent: the tool never started
    _no_server_left(home)

    session = json.loads((out / "session.json").read_text())
    assert session["run_id"] == first["run_id"]
    resumed = _script(home, RESUME, str(out / "session.json"))
    assert resumed["status"] == "done"
    assert resumed["run_id"] == first["run_id"]  # the same workflow, not a new run
    assert resumed["output"] == "Done: recorded hello."
    assert len(_lines(out / "effects")) == 1 and len(_lines(out / "starts")) == 1  # the tool ran once

    again = _script(home, RESUME, str(out / "session.json"))  # that run has finished: a new run
    assert again["status"] == "done" and again["run_id"] != first["run_id"]
    _no_server_left(home)


def test_a_process_killed_mid_tool_loses_nothing(home: Path, out: Path) -> None:
    doomed = subprocess.Popen(
        [sys.executable, "-c", RUN_THEN_APPROVE_SLOWLY, str(out / "session.json")], cwd=ROOT,
        env=_env(home, REINTEST_SLOW_FIRST="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: (out / "started").exists() or doomed.poll() is not None, "the tool to start", TIMEOUT)
        assert doomed.poll() is None, doomed.communicate()[1][-3000:]
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)
    finally:
        if doomed.poll() is None:
            doomed.kill()
        doomed.communicate()
    run_id = json.loads((out / "session.json").read_text())["run_id"]
    assert _lines(out / "effects") == []  # killed before the tool finished
    _no_server_left(home)  # the kernel dropped the killed process's lease: the idle server stopped

    finished = _script(home, RESUME, str(out / "session.json"))  # the next process serving the agent
    assert finished["run_id"] == run_id and finished["status"] == "done"
    assert finished["output"] == "Done: recorded hello."
    starts = _lines(out / "starts")
    assert len(starts) == 2 and starts[0].endswith("attempt 1") and starts[1].endswith("attempt 2")
    assert len(_lines(out / "effects")) == 1
    assert not _lines(out / "effects")[0].endswith(f"by {doomed.pid}")
    _no_server_left(home)


def test_a_waiting_script_and_the_cli_share_runs(home: Path, out: Path) -> None:
    script = subprocess.Popen(
        [sys.executable, "-c", RUN_THEN_AWAIT_DECISION], cwd=ROOT, env=_env(home),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )
    try:
        started = json.loads(script.stdout.readline() or "{}")
        assert started.get("status") == "interrupted", script.stderr.read()[-3000:] if script.poll() is not None else started
        run_id = started["run_id"]

        view = _rein(home, "status", run_id, "--json")  # another process, no TEMPORAL_ADDRESS: the same runs
        assert view["status"] == "waiting_approval"
        assert [c["name"] for c in view["pending_tool_calls"]] == ["record"]
        assert _rein_text(home, "approve", run_id).startswith(f"approved record(note=\"hello\") [call-record] in run {run_id} (wait 1-")

        stdout, stderr = script.communicate(timeout=TIMEOUT)
        assert script.returncode == 0, stderr[-3000:]
    finally:
        if script.poll() is None:
            script.kill()
            script.communicate()
    assert json.loads(stdout.strip().splitlines()[-1]) == {"output": "Done: recorded hello."}
    effects = _lines(out / "effects")
    assert effects == [f"hello by {script.pid}"]  # the waiting script's worker ran the tool
    _no_server_left(home)


def test_worker_py_finishes_a_run_a_script_left_waiting(home: Path, out: Path) -> None:
    """`python worker.py` (no address: the same embedded server) serves the agent's own queue too."""
    first = _script(home, RUN, str(out / "session.json"))
    worker = subprocess.Popen(
        [sys.executable, "worker.py", "--agent", "tests.agents.durable:agent"], cwd=ROOT, env=_env(home),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )
    try:
        # --wait: the decision goes once worker.py polls the agent's queue (a worker still starting is no error)
        approved = _rein_text(home, "approve", first["run_id"], "--wait")
        assert approved.startswith(f"approved record(note=\"hello\") [call-record] in run {first['run_id']} (wait 1-")
        result = asyncio.run(_result(home, first["run_id"]))  # read here: worker.py's lease keeps the server up
        assert result.output == "Done: recorded hello."
        assert _lines(out / "effects") == [f"hello by {worker.pid}"]
    finally:
        stop_process(worker, 30)
    _no_server_left(home)


USE_THE_SERVER = """
import json
from rein.durable.embedded_server import ensure_embedded
print(json.dumps({"address": ensure_embedded()}), flush=True)
"""
"""A process that uses the embedded server and exits: its lease goes at exit (atexit), as an agent script's does."""


def test_server_kept_while_idle_when_asked_then_stopped(home: Path) -> None:
    """After its last user exits (a process that only takes the lease: an agent's run adds nothing the idle
    rule reads, and costs ~3 s of CPU more), the server stays while REIN_SERVER_IDLE_S says so."""
    assert _script(home, USE_THE_SERVER, REIN_SERVER_IDLE_S="600")["address"]
    status = embedded_status(home)
    assert status is not None and status["in_use"] is False
    assert Path(status["db"]).parent == home and Path(status["db"]).exists()
    assert status["pid"] in _processes_using(home)
    assert stop_embedded(home) is True
    _no_server_left(home)
    assert stop_embedded(home) is False


def test_processes_starting_at_once_share_one_server(home: Path) -> None:
    code = (
        "import json, os, time\n"
        "from rein.durable.embedded_server import embedded_status, ensure_embedded\n"
        "address = ensure_embedded()\n"
        "print(json.dumps({'address': address, 'pid': embedded_status()['pid']}), flush=True)\n"
        "time.sleep(1)\n"
    )
    starters = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=_env(home), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        for _ in range(3)
    ]
    seen = []
    for starter in starters:
        stdout, stderr = starter.communicate(timeout=TIMEOUT)
        assert starter.returncode == 0, stderr[-3000:]
        seen.append(json.loads(stdout.strip().splitlines()[-1]))
    assert len({s["address"] for s in seen}) == 1 and len({s["pid"] for s in seen}) == 1
    _no_server_left(home)


def test_a_dev_server_stops_without_waiting_out_the_frontend_drain(tmp_path: Path) -> None:
    """Every process that was the embedded server's last user waits for its stop: no system worker
    keeps a long poll open then, so the frontend's graceful stop ends at once, not after its 1 s drain."""
    log = tmp_path / "server.log"
    server = start_dev_server(db_filename=str(tmp_path / "temporal.db"), log_path=log,
                              extra_args=["--log-level", "info"])  # the last --log-level counts
    server.stop()
    text = log.read_text(errors="replace")
    assert server.process.returncode == 0, text[-3000:]
    assert "ShutdownHandler: Draining traffic" in text and "frontend stopped" in text
    assert "Drain time expired" not in text


def test_the_supervisor_imports_no_temporalio_or_pydantic(home: Path) -> None:
    """Every process that starts the embedded server waits for its supervisor's imports (rein issue 21):
    temporalio and pydantic (through rein.core.contract) cost it 1-2 s. Its import trace goes to server.log.
    A script of its own: the server lease is one per process, and this pytest process's engine holds one."""
    started = _script(home, "import json; from rein.durable.embedded_server import ensure_embedded, release_embedded\n"
                            "print(json.dumps({'address': ensure_embedded()})); release_embedded()",
                      PYTHONPROFILEIMPORTTIME="1")  # inherited by the supervisor (-X importtime)
    assert started["address"]
    imported = {line.rsplit("|", 1)[-1].strip() for line in _log(home, 10**6).splitlines() if line.startswith("import time:")}
    assert "rein.temporal.dev_server" in imported  # the trace is there
    heavy = sorted(m for m in imported if m.split(".")[0] in ("temporalio", "pydantic", "google"))
    assert heavy == []


def test_a_port_taken_between_the_pick_and_the_bind_gets_fresh_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process may bind a port rein picked before the server binds it; the server exits at once
    and rein starts it again on fresh ports (more likely the more servers a machine starts at once)."""
    import socket

    from rein.temporal import dev_server

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        picks, pick_free = iter([port]), dev_server.free_port
        monkeypatch.setattr(dev_server, "free_port", lambda: next(picks, None) or pick_free())
        server = start_dev_server()
    try:
        assert server.port != port and server.process.poll() is None
    finally:
        server.stop()


def test_a_recorded_pid_counts_only_as_a_live_rein_supervisor() -> None:
    """server.json may name a pid that has since exited (a zombie nobody reaped yet) or been recycled
    by another program: neither is a running server to share, stop or kill."""
    import psutil

    from rein.durable import embedded_server as server

    other = subprocess.Popen(["sleep", "30"])
    exited = subprocess.Popen([sys.executable, "-c", "pass", "rein.durable.embedded_server"])  # not reaped: a zombie
    supervisor_like = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "rein.durable.embedded_server"])
    try:
        wait_until(lambda: psutil.Process(exited.pid).status() == psutil.STATUS_ZOMBIE, "a zombie", 30)
        assert server._alive(supervisor_like.pid)
        assert not server._alive(other.pid)
        assert not server._alive(exited.pid)
    finally:
        for process in (other, exited, supervisor_like):
            process.kill()
            process.wait(timeout=10)
    assert not server._alive(other.pid)  # gone


def test_picked_ports_are_below_the_range_outgoing_connections_use() -> None:
    """An outgoing connection's source port comes from the kernel's ephemeral range, so a port picked
    there can be taken before the server binds it (a codec server's test once talked to another
    process's listener that way); rein picks below it, and the port binds."""
    import socket

    from rein.temporal import dev_server

    start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {dev_server.free_port() for _ in range(20)}
    assert all(1024 < port < start for port in ports) and len(ports) > 1, (start, ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports.pop()))


@pytest.mark.parametrize("failure", ["timeout", "unusable-db"])
def test_a_failed_start_leaves_no_process(home: Path, failure: str) -> None:
    extra = {}
    if failure == "timeout":
        extra["REIN_SERVER_START_TIMEOUT_S"] = "0.01"  # a real server start, given no time to become healthy (0.2 s was sometimes enough)
    else:
        (home / "temporal.db").mkdir(parents=True)  # the server cannot open its database
    proc = subprocess.run(
        [sys.executable, "-c", "from rein.durable.embedded_server import ensure_embedded; ensure_embedded()"],
        cwd=ROOT, env=_env(home, **extra), capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode != 0
    assert "embedded Temporal server did not become healthy" in proc.stderr
    assert str(home) in proc.stderr  # the message says where its log is
    assert _processes_using(home) == []
    assert embedded_status(home) is None


async def test_replayed_history_answers_queries_exactly_as_the_worker_does() -> None:
    """rein.temporal.history (used when no worker serves a run) against the real queries."""
    import uuid

    from rein import Agent, LoopConfig, MockProvider, ToolCall
    from rein.durable.engine import engine
    from rein.temporal import history

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    agent = Agent(
        provider=MockProvider([[ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})], "3",
                               [ToolCall(id="c2", name="add", arguments={"a": 3, "b": 4})]]),
        tools=[add], config=LoopConfig(permission="ask"), name=f"replayed-{uuid.uuid4().hex[:6]}",
    )
    first = await agent.arun("1 + 2, then 3 + 4")
    second = await agent.aresume(first.session, approve=True)
    assert second.run_id == first.run_id and second.status == "done"
    third = await agent.arun("again")
    assert third.status == "interrupted"

    eng = await engine()
    for run_id in (first.run_id, third.run_id):
        handle = eng.client.get_workflow_handle(run_id)
        replayed = await eng.submit(history.replayed(eng.client, run_id))
        for name in ("status", "session", "steps"):
            assert replayed.query(name) == await eng.submit(handle.query(name)), name
    assert replayed.query("status")["status"] == "waiting_approval"

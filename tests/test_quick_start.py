"""docs/inbox.md's quick start, run as written: its five command lines, in order, from a directory that is not the
repository, against a server of the test's own (the worker and the page in processes of their own, as a newcomer
runs them in terminals of their own). Only the page's port is the test's (the machine's 8000 may be taken)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from rein.durable.embedded_server import free_port
from tests.support.processes import stop_process, wait_for_text
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def quick_start() -> list[str]:
    """The command lines of docs/inbox.md's quick start (comments cut off)."""
    text = (ROOT / "docs" / "inbox.md").read_text()
    block = re.search(r"## Quick start\n.*?```sh\n(.*?)```", text, re.S)
    assert block is not None, "docs/inbox.md has no quick start"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


async def test_the_inbox_quick_start_runs_as_written(private_server, tmp_path: Path) -> None:  # noqa: ANN001
    lines = quick_start()
    assert [line.split()[:2] for line in lines] == [["rein", "worker"], ["rein", "start"], ["rein", "inbox"],
                                                   ["rein", "serve"], ["rein", "policy"]]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REIN_", "TEMPORAL_"))}
    env.update(TEMPORAL_ADDRESS=private_server.address, REIN_HOME=str(tmp_path / "home"), COLUMNS="200",
               PATH=f"{BIN}:{env.get('PATH', '')}")
    here = tmp_path / "elsewhere"
    here.mkdir()

    def run(line: str) -> subprocess.CompletedProcess:
        return subprocess.run(shlex.split(line), cwd=here, env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)

    def background(line: str, log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(shlex.split(line), cwd=here, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)

    worker = background(lines[0], tmp_path / "worker.log")
    page = None
    try:
        wait_for_text(tmp_path / "worker.log", "serving: calculator", worker, 90)
        started = run(lines[1])
        assert started.returncode == 0, started.stderr
        run_id = started.stdout.strip()
        assert run_id.startswith("calculator-"), started.stdout

        def listed() -> str | None:
            shown = run(lines[2])
            return shown.stdout if run_id in shown.stdout else None

        inbox = await poll(listed, "the waiting run in `rein inbox`")  # visibility lags a little
        assert "add(a=2.0, b=3.0)" in inbox and "approval" in inbox, inbox
        port = free_port()
        page = background(f"{lines[3]} --port {port}", tmp_path / "serve.log")
        wait_for_text(tmp_path / "serve.log", f"http://127.0.0.1:{port}/inbox", page, 60)  # the link to open
        stop_process(page)
        rule = run(lines[4])
        assert rule.returncode == 0, rule.stderr
        assert "added rule r1: allow add agent=calculator" in rule.stdout, rule.stdout
        assert "are told, and decide by it themselves" in rule.stdout, rule.stdout  # the runs' own rule check decides
        answer = run(f"rein result {run_id}")  # waits for the run: the rule decided what waited
        assert (answer.returncode, answer.stdout) == (0, "The answer is 5.\n"), answer.stderr
    finally:
        stop_process(page)
        stop_process(worker)

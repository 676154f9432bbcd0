"""Ctrl-C pressed in a real terminal (a pseudo-terminal: the byte the terminal turns into SIGINT for the
foreground process group) at several moments of `rein run` and of the README's demo: one line that says what
became of the run, exit 130, the process gone (no deadline here: a process that stays fails the test at its
timeout), no traceback, and the run where the line says it is.

Before: at `Approve? [y/N]:` the first Ctrl-C did nothing and a second printed `rein: the run failed: Abort`
(exit 6) while the run waited; in the demo's first second a 40-line KeyboardInterrupt traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents.interrupts import FIRST_WORDS
from tests.support.terminal import Terminal

ROOT = Path(__file__).resolve().parent.parent
REIN = str(Path(sys.executable).parent / "rein")
NOT_STARTED = {"rein: interrupted: nothing was done (the command had not started)", "rein: interrupted: no run was started"}
"""The line of a Ctrl-C while `rein run` imports: typer and the command groups, or the agent's module."""


def environ(dev, **extra: str) -> dict[str, str]:  # noqa: ANN001
    env = {k: v for k, v in os.environ.items()
           if k not in ("REIN_DEBUG", "COLUMNS", "REIN_TASK_QUEUE", "TEMPORAL_NAMESPACE", "REIN_MODEL", "PYTHONPROFILEIMPORTTIME")}
    env.update(TEMPORAL_ADDRESS=dev.client.service_client.config.target_host, TERM="xterm", **extra)
    return env


def the_line(term: Terminal, prefix: str = "rein: interrupted") -> str:
    """The one line a Ctrl-C printed: the last thing shown, once, with no traceback and no "failed"."""
    text = term.text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text and "failed" not in text, text
    lines = [line.strip() for line in text.replace("^C", "\n").splitlines()
             if line.strip() and not line.startswith("import time:")]
    assert [line for line in lines if line.startswith(prefix)] == lines[-1:], text
    return lines[-1]


async def pressed(term: Terminal, shown: str | re.Pattern[str], key: bytes = b"\x03") -> int:
    """Once `shown` is on the terminal, press `key` (Ctrl-C); the exit code once the process has gone."""
    try:
        await asyncio.to_thread(term.expect, shown)
        term.type(key)
        return await asyncio.to_thread(term.wait)
    finally:
        term.close()


async def rein_status(dev, run_id: str) -> str:  # noqa: ANN001
    proc = await asyncio.to_thread(
        subprocess.run, [REIN, "status", run_id, "--json"], cwd=str(ROOT), env=environ(dev), capture_output=True,
        text=True, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["status"]


@pytest.mark.parametrize("key", [b"\x03", b"\x04"], ids=["ctrl-c", "ctrl-d"])
async def test_at_the_approval_prompt_one_key_stops_it_and_the_run_waits(dev, key: bytes) -> None:  # noqa: ANN001
    term = Terminal([REIN, "run", "rein.examples.calculator:agent", "what is 9 + 8"], environ(dev), ROOT)
    code = await pressed(term, "Approve? [y/N]:", key)
    assert code == 130, term.text
    line = the_line(term)
    found = re.fullmatch(r"rein: interrupted: run (calculator-\w+) waits for approval; answer it with `rein approve "
                         r"(\S+)` \(or `rein deny \S+`\) while `rein worker --agent rein.examples.calculator:agent` "
                         r"serves it", line)
    assert found and found[1] == found[2], line
    run_id = found[1]
    try:
        assert await rein_status(dev, run_id) == "waiting_approval"  # not failed: it waits, as the line says
    finally:
        await dev.client.get_workflow_handle(run_id).terminate("the test is done")


async def test_while_the_answer_streams_it_stops_at_once_and_the_run_goes_on(dev) -> None:  # noqa: ANN001
    term = Terminal([REIN, "run", "tests.agents.interrupts:streaming", "hi"], environ(dev), ROOT)
    code = await pressed(term, FIRST_WORDS)
    assert code == 130, term.text
    line = the_line(term)
    found = re.fullmatch(r"rein: interrupted: run (ctrl-c-stream-\w+) goes on when a worker serves it \(`rein worker "
                         r"--agent tests.agents.interrupts:streaming`\); follow it with `rein watch (\S+)`", line)
    assert found and found[1] == found[2], line
    try:
        assert await rein_status(dev, found[1]) == "running"
    finally:
        await dev.client.get_workflow_handle(found[1]).terminate("the test is done")


async def test_during_the_imports_of_rein_run_it_is_the_same_one_line(dev) -> None:  # noqa: ANN001
    """PYTHONPROFILEIMPORTTIME prints a line as each module is imported: Ctrl-C once typer has been (the command
    groups, the agent's module and everything they import are still to come)."""
    term = Terminal([REIN, "run", "rein.examples.calculator:agent", "what is 2 + 3"],
                    environ(dev, PYTHONPROFILEIMPORTTIME="1"), ROOT)
    code = await pressed(term, re.compile(r"^import time:.*\|\s+typer$", re.M))
    assert code == 130, term.text
    assert the_line(term) in NOT_STARTED
    assert "Approve?" not in term.text


async def test_during_the_demos_imports_it_is_one_line(dev) -> None:  # noqa: ANN001
    """The README's demo, Ctrl-C while `from rein import ...` is being imported (its first second)."""
    term = Terminal([sys.executable, "examples/calculator.py"], environ(dev, PYTHONPROFILEIMPORTTIME="1"), ROOT)
    code = await pressed(term, re.compile(r"^import time:.*\|\s+pydantic$", re.M))
    assert code == 130, term.text
    assert the_line(term, "interrupted").startswith("interrupted")

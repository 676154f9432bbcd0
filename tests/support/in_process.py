"""`rein` commands in the test's own process, for tests about a command's output, exit code or effect (not
about being a process): each real `rein` process costs ~1 s of CPU just to import (issue 55, item 4).

`rein_inproc` answers like tests/test_cli.py's `rein_cli` (a CompletedProcess: exit code, stdout, stderr) and
gives the command the environment a `rein_cli` process would see: this process's, without TEMPORAL_ADDRESS,
REIN_DEBUG and COLUMNS, plus the given variables, restored afterwards, and an empty stdin. It runs `rein.cli.main` (the console
script's own dispatcher, which turns every error into its one line and exit code) in a worker thread, so a
command that runs its own event loop can be called from an async test: `await asyncio.to_thread(rein_inproc, ...)`
or `await rein_async(...)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

_ONE_AT_A_TIME = threading.Lock()
"""sys.stdout, sys.stderr and os.environ are the process's: one in-process command at a time."""
LEFT_OUT = ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")
"""What the tests' `rein` subprocesses never inherit from the test process (nor the commands here)."""


@contextlib.contextmanager
def _environment(env: dict[str, str], drop: tuple[str, ...]) -> Iterator[None]:
    """rein_cli's environment, and an empty stdin (its stdin is /dev/null: a prompt reads end-of-file)."""
    saved, stdin = dict(os.environ), sys.stdin
    for name in drop:
        os.environ.pop(name, None)
    os.environ.update(env)
    sys.stdin = io.StringIO("")
    try:
        yield
    finally:
        sys.stdin = stdin
        os.environ.clear()
        os.environ.update(saved)


def rein_inproc(*argv: str, drop: tuple[str, ...] = LEFT_OUT, **env: str) -> subprocess.CompletedProcess:
    """`rein ARGV` in this process: its exit code and what it printed, as `rein_cli` returns them (`drop`: the
    variables it does not see)."""
    from rein.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _ONE_AT_A_TIME, _environment(env, drop), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return subprocess.CompletedProcess(["rein", *argv], code, out.getvalue(), err.getvalue())


async def rein_async(*argv: str, **env: Any) -> subprocess.CompletedProcess:
    """`rein_inproc` from an async test (the command may run an event loop of its own)."""
    return await asyncio.to_thread(rein_inproc, *argv, **env)

"""`rein ARGV` in the test's own process: the same exit code, stdout and stderr as the console script.

A `rein` process costs ~1 s of CPU just to import (temporalio, pydantic, rein). A test about a
command's output, exit code or effect runs `rein.cli.main` here instead; a test about the process
itself (its entry point, a signal, a terminal, stdin, its teardown) keeps a real one. Errors come
back as `main` prints them: one `rein: ...` line on stderr, the documented exit code.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator

import pytest

DROPPED = ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")
"""What the tests' `rein` subprocesses never inherit from the test process (the same here)."""


@contextlib.contextmanager
def environment(drop: tuple[str, ...] = DROPPED, **env: str) -> Iterator[None]:
    """os.environ without `drop`, with `env`, for the block (restored after, whatever happens)."""
    saved = {name: os.environ.get(name) for name in (*drop, *env)}
    try:
        for name in drop:
            os.environ.pop(name, None)
        os.environ.update(env)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def rein_here(capsys: pytest.CaptureFixture[str], *argv: str, drop: tuple[str, ...] = DROPPED,
              **env: str) -> subprocess.CompletedProcess:
    """`rein ARGV` through `rein.cli.main` with `env`, as a CompletedProcess (returncode, stdout, stderr).

    Call it from a thread (`asyncio.to_thread`) in an async test: each command runs its own event loop."""
    from rein.cli import main

    capsys.readouterr()
    with environment(drop, **env):
        code = main(list(argv))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(["rein", *argv], code, captured.out, captured.err)

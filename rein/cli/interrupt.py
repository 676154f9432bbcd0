"""Ctrl-C in the `rein` command: one line that says what became of the run, exit 130, at any moment.

The `rein` console script installs the handler before anything else is imported (typer, temporalio,
an agent's module), so a Ctrl-C during imports is the same one line as one at a prompt or while a
stream is printed. The handler leaves at once (`os._exit` after flushing): a durable run lives on the
server, and nothing this process holds needs tearing down (the shared embedded server counts its users
by a lock the kernel drops) but what a command registered with `on_leave` (bounded). A command says
what the line should say with `fate(...)`, updated as its run moves on (started, paused for a person,
resumed). A command that must ask the server before it can say (a decision under way: was it sent?)
takes SIGINT back for that while with `graceful()`.

Standard library only: this module is imported before anything else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

EXIT_INTERRUPTED = 130
_fate = ""
_installed = False
_leaving: list[Any] = []


def install() -> None:
    """Ctrl-C ends this process with the one line (the `rein` console script calls it first thing)."""
    global _installed
    signal.signal(signal.SIGINT, _on_ctrl_c)
    _installed = True


def fate(text: str) -> None:
    """What the Ctrl-C line says from now on, after `rein: interrupted: ` (empty: nothing more)."""
    global _fate
    _fate = text


def on_leave(hook: Any) -> None:
    """Call `hook()` (bounded, never raising) as Ctrl-C ends the process: what must not wait for a person's next
    command (the engine letting go of the runs it pinned to its build: rein.durable.engine_versioning)."""
    _leaving.append(hook)


def line() -> str:
    return "rein: interrupted" + (f": {_fate}" if _fate else "")


@contextlib.contextmanager
def graceful() -> Iterator[None]:
    """Within the block Ctrl-C is Python's KeyboardInterrupt again (so `asyncio.run` cancels its main task
    and the command can ask the server where things stand before its own one line)."""
    if not _installed:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, _on_ctrl_c)


def _on_ctrl_c(signum: int, frame: Any) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a write the signal cut short: flushing may refuse (reentrant)
            stream.flush()
    # Straight to the descriptor: the signal may have landed inside a write to sys.stderr's buffer.
    # On a terminal: the cursor shown again (a spinner hides it) and a new line (it may sit after a prompt).
    start = "\x1b[?25h\n" if _isatty(2) else ""
    with contextlib.suppress(OSError):
        os.write(2, f"{start}{line()}\n".encode())
    for hook in _leaving:
        with contextlib.suppress(Exception):
            hook()
    os._exit(EXIT_INTERRUPTED)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False

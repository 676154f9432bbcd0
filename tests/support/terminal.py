"""A command in a real pseudo-terminal, as a person runs it: its stdin, stdout and stderr are the terminal,
and Ctrl-C is the byte the terminal turns into SIGINT for the foreground process group (not a signal the
test sends itself). Nothing here has a deadline of its own: a command that never shows what is expected, or
never ends, is stopped by the test's timeout (pytest-timeout), and one that ends early fails at once.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
CTRL_C = b"\x03"


class Terminal:
    """`argv` in a pseudo-terminal (its own session: the terminal is its controlling terminal)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec the command with the terminal as stdin, stdout and stderr
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))  # 50 rows, 200 columns
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.raw = b""
        self.code: int | None = None

    @property
    def text(self) -> str:
        """Everything the terminal showed, without colours and carriage returns."""
        return ANSI.sub("", self.raw.decode(errors="replace"))

    def expect(self, wanted: str | re.Pattern[str]) -> str:
        """Read until `wanted` (a substring or a pattern) has been shown; returns all that was shown."""
        while not (wanted.search(self.text) if isinstance(wanted, re.Pattern) else wanted in self.text):
            if not self._read():
                self.wait()
                raise AssertionError(f"the command ended (exit {self.code}) without showing {wanted!r}:\n{self.text}")
        return self.text

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)

    def ctrl_c(self) -> None:
        """What pressing Ctrl-C does: the terminal sends SIGINT to the process group in the foreground."""
        self.type(CTRL_C)

    def wait(self) -> int:
        """Until the process has ended (reading what it shows meanwhile); its exit code."""
        while self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
            elif not self._read(0.1):
                time.sleep(0.01)  # closed already: the process is on its way out
        while self._read(0):  # what it wrote last
            pass
        return self.code

    def close(self) -> None:
        if self.code is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)

    def _read(self, timeout: float | None = None) -> bool:
        """Take what the terminal shows (waiting at most `timeout`, None: until it shows something or closes);
        False when nothing came or every process holding the terminal has closed it."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: every process holding the terminal has closed it
            return False
        self.raw += chunk
        return bool(chunk)

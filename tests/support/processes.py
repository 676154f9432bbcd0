"""Real processes for the tests: `worker.py` workers, servers and their logs, started, killed, restarted.

Everything is bounded in time and uses loopback, free ports and a temporary REIN_HOME.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rein.durable.embedded_server import TUNED_DYNAMIC_CONFIG

ROOT = Path(__file__).resolve().parents[2]

STUCK_RUNS_RETRY_SOON = {
    **TUNED_DYNAMIC_CONFIG,
    "history.defaultWorkflowTaskTimeout": '"2s"',
    "history.workflowTaskRetryMaxInterval": '"1s"',
    "history.longPollExpirationInterval": '"1s"',
}
"""Dev-server settings for tests whose runs get stuck on purpose (a deployed bug, a build that cannot
replay a run) or whose worker stops mid-task: such a run's workflow task is tried again within ~3 s,
and a decision sent to it is refused within ~1 s of the failing task's second attempt timing out.

A worker reports a workflow task's failure only on its first attempt and lets later attempts time out,
and a task its worker took with it also times out: so these runs move at the pace of the workflow task
timeout (Temporal's default 10 s), plus a backoff from the fourth attempt on (5 s, doubling, capped by
workflowTaskRetryMaxInterval). An update sent to such a run waits in the server until the history
service's long poll expires (20 s by default); the client then asks again, and once the failing task's
second attempt has timed out it is refused ("Workflow Task in failed state"). All are the server's own
settings, as an operator would set them."""


class WorkerProcess:
    """`python worker.py --agent ...` with its own environment and log."""

    def __init__(self, address: str, agents: list[str], task_queue: str, log: Path, **env: str):
        self.args = [sys.executable, "worker.py", "--task-queue", task_queue]
        for agent in agents:
            self.args += ["--agent", agent]
        self.env = {k: v for k, v in os.environ.items() if k not in ("REIN_TASK_QUEUE", "TEMPORAL_NAMESPACE")}
        self.env.update(TEMPORAL_ADDRESS=address, **env)
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> WorkerProcess:
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.args, cwd=str(ROOT), env=self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        wait_for_text(self.log, "serving:", self.process, timeout, offset)
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown, no goodbye to the server."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        stop_process(self.process, 15)


def wait_for_text(log: Path, text: str, process: subprocess.Popen, timeout: float, offset: int = 0) -> None:
    """Until `text` is in `log` (after byte `offset`); fails at once if the process exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_bytes()[offset:].decode(errors="replace") if log.exists() else ""
        if text in content:
            return
        if process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode} before {text!r}:\n{content[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {log} within {timeout:g}s:\n{log.read_text(errors='replace')[-3000:]}")


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60, log: Path | None = None) -> None:
    """Until something listens on 127.0.0.1:`port`; fails at once if the process exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output: Any = log.read_text(errors="replace") if log is not None and log.exists() else ""
            if not output and process.stdout is not None:
                output = process.stdout.read()
                output = output.decode(errors="replace") if isinstance(output, bytes) else output
            output = output[-3000:]
            raise AssertionError(f"{process.args[0]} exited with {process.returncode} before listening on {port}:\n"
                                 f"{output}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listened on {port} within {timeout:g}s")


def stop_process(process: subprocess.Popen | None, timeout: float = 10,
                 sig: int = signal.SIGTERM) -> tuple[Any, Any]:
    """Send `sig` (default SIGTERM), then SIGKILL if it has not exited within `timeout`.

    Returns what `communicate()` read from the process's pipes (stdout, stderr), if it has any.
    """
    if process is None:
        return None, None
    if process.poll() is None:
        process.send_signal(sig)
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate(timeout=5)

"""Real processes for the fault tests: `worker.py` workers and dev servers, started, killed, restarted.

Everything is bounded in time and uses loopback, free ports and a temporary REIN_HOME.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.protobuf.message import Message as ProtoMessage
from temporalio.api.common.v1 import Payload

ROOT = Path(__file__).resolve().parent.parent


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
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for_text(log: Path, text: str, process: subprocess.Popen, timeout: float, offset: int = 0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_bytes()[offset:].decode(errors="replace") if log.exists() else ""
        if text in content:
            return
        if process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode} before {text!r}:\n{content[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {log} within {timeout:g}s:\n{log.read_text(errors='replace')[-3000:]}")


def payloads_in(message: Any, skip: tuple[str, ...] = ("search_attributes",)) -> Iterator[Payload]:
    """Every Payload inside a history (temporalio's WorkflowHistory) or protobuf message, recursively.

    Search attributes are skipped: they are indexed by the server, so never encrypted by design.
    """
    if not isinstance(message, ProtoMessage):  # a WorkflowHistory
        for event in message.events:
            marker = event.marker_recorded_event_attributes
            if marker.marker_name:
                # SDK bookkeeping (patch ids, a local activity's seq/attempt/type) is written by
                # the SDK in plain JSON; only a local activity's `result` is user data.
                if "result" in marker.details:
                    yield from payloads_in(marker.details["result"], skip)
                continue
            yield from payloads_in(event, skip)
        return
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.name in skip or field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items: Any = value.values()
        elif field.is_repeated:
            items = value
        else:
            items = [value]
        for item in items:
            if isinstance(item, ProtoMessage):
                yield from payloads_in(item, skip)


async def decoded_history_text(history: Any, data_converter: Any) -> str:
    """Every payload of a history, decoded with the converter's codec (if any), as one text."""
    payloads = list(payloads_in(history))
    if data_converter.payload_codec is not None:
        payloads = await data_converter.payload_codec.decode(payloads)
    return "\n".join(p.data.decode("utf-8", "replace") for p in payloads)

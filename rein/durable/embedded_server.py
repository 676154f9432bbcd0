"""The embedded Temporal server every rein process on the machine shares when no address is
configured: a dev server (rein.temporal.dev_server) under a small supervisor, its state in REIN_HOME.
"""


import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from rein.temporal.dev_server import (  # noqa: F401  (public here too: tests and docs name them here)
    LINUX,
    TUNED_DYNAMIC_CONFIG,
    DevServer,
    free_port,
    healthy,
    installed_binary,
    listening,
    rein_server_flags,
    start_dev_server,
    temporal_binary,
)

# Without a configured address every rein process on the machine shares ONE dev server whose
# state is a SQLite file in REIN_HOME, so runs outlive the process that started them.
#
#   REIN_HOME/temporal.db    the server's state (every run, its history and search attributes)
#   REIN_HOME/server.json    address and pids of the running server (written once it is healthy)
#   REIN_HOME/server.log     the supervisor's and the server's output
#   REIN_HOME/server.lock    flock held while a process starts, checks or stops the server
#   REIN_HOME/clients.lock   every process using the server holds a shared flock on it
#
# A small supervisor process (`python -m rein.durable.embedded_server supervise HOME`) owns the `temporal`
# process: it waits until the server answers real RPCs, records it in server.json, and stops it
# when no process has held clients.lock for REIN_SERVER_IDLE_S seconds (default 0: as soon as
# the last user is gone). The kernel drops a flock when its process dies, even by SIGKILL, so a
# crashed user never keeps the server alive. The `temporal` process dies with its supervisor.

_STATE, _LOCK, _CLIENTS, _DB, _LOG = "server.json", "server.lock", "clients.lock", "temporal.db", "server.log"
_lease: tuple[Path, int] | None = None
"""(REIN_HOME, fd) of this process's shared flock on clients.lock."""
_started: dict[int, subprocess.Popen] = {}
"""Supervisors this process started (reaped when they exit)."""


def rein_home() -> Path:
    """Where rein keeps its embedded state: REIN_HOME, default ~/.rein."""
    from rein import settings  # here: the supervisor imports this module and no pydantic (its start waits on it)

    return settings.current().home


def ensure_embedded(home: Path | None = None, *, timeout_s: float | None = None) -> str:
    """The address of the shared embedded server, started (healthy) if it is not running.

    This process becomes one of its users until it exits (or `release_embedded()`).
    Raises RuntimeError, leaving no process behind, when the server cannot be started.
    """
    home = _home(home)
    from rein import settings

    now = settings.current()
    timeout_s = now.server_start_timeout_s if timeout_s is None else timeout_s
    with _locked(home, timeout_s + 30):
        state = _running_state(home)
        if state is None:
            state = _start_supervisor(home, timeout_s, Supervised(now.server_idle_s, now.server_port, now.ui_port))
        _take_lease(home)
        return state["address"]


def embedded_status(home: Path | None = None) -> dict | None:
    """The running shared server (address, pids, files, users) or None; starts nothing."""
    home = _home(home)
    state = _running_state(home)
    if state is None:
        return None
    return {**state, "home": str(home), "in_use": _in_use(home)}


def stop_embedded(home: Path | None = None) -> bool:
    """Stop the shared server now (its runs stay in REIN_HOME). False when none was running."""
    home = _home(home)
    from rein import settings

    with _locked(home, settings.current().server_start_timeout_s + 30):
        return _stop(home)


def release_embedded() -> None:
    """Stop using the shared server; the last user stops it (unless REIN_SERVER_IDLE_S keeps it)."""
    global _lease
    if _lease is None:
        return
    home, fd = _lease
    try:
        with _locked(home, 30):
            _lease = None
            os.close(fd)
            state = _running_state(home)
            if state is not None and not state.get("idle_s") and not _in_use(home):
                _stop(home)
    except (OSError, RuntimeError):
        pass


def _home(home: Path | None) -> Path:
    home = Path(home) if home is not None else rein_home()
    home.mkdir(parents=True, exist_ok=True)
    return home


class _locked:
    """An exclusive lock on REIN_HOME/server.lock (filelock's flock), waited for at most `timeout_s`."""

    def __init__(self, home: Path, timeout_s: float):
        from filelock import FileLock

        self.path, self.timeout_s = home / _LOCK, timeout_s
        self.lock = FileLock(self.path, timeout=timeout_s, mode=0o600)

    def __enter__(self) -> None:
        from filelock import Timeout

        try:
            self.lock.acquire(poll_interval=0.02)
        except Timeout:
            raise RuntimeError(f"another process holds {self.path} for more than {self.timeout_s:g}s") from None

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def _take_lease(home: Path) -> None:
    global _lease
    import atexit
    import fcntl

    if _lease is not None and _lease[0] == home:
        return
    if _lease is not None:
        release_embedded()
    fd = os.open(home / _CLIENTS, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    atexit.unregister(release_embedded)
    atexit.register(release_embedded)  # once, however often the lease is taken
    _lease = (home, fd)


def _in_use(home: Path) -> bool:
    """Whether any process (this one included) holds a lease on the server."""
    import fcntl

    fd = os.open(home / _CLIENTS, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Whether `pid` is a live rein supervisor: not a zombie, not a recycled pid running something else."""
    proc = _started.get(pid)
    if proc is not None:
        if proc.poll() is None:
            return True
        del _started[pid]
        return False
    seen = _process(pid)
    if seen is None:
        return False
    zombie, cmdline = seen
    return not zombie and (cmdline is None or "rein.durable.embedded_server" in cmdline)


def _process(pid: int) -> tuple[bool, str | None] | None:
    """(is a zombie, command line or None when not ours to read) of a pid, or None when there is none."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return True, ""
        return False, " ".join(process.cmdline())
    except psutil.ZombieProcess:
        return True, ""
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:
        return False, None


def _kill_orphan_server(home: Path, server_pid: int | None) -> None:
    """A `temporal` server whose supervisor died without taking it along (no PR_SET_PDEATHSIG off Linux)."""
    import signal

    if not server_pid:
        return
    seen = _process(server_pid)
    if seen is not None and not seen[0] and str(home) in (seen[1] or ""):  # never kill a recycled pid
        try:
            os.kill(server_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _read_state(home: Path) -> dict | None:
    import json

    try:
        return json.loads((home / _STATE).read_text())
    except (OSError, ValueError):
        return None


def _running_state(home: Path) -> dict | None:
    state = _read_state(home)
    if state is not None and state.get("ready") and _alive(state["pid"]):
        return state
    return None


class Supervised(NamedTuple):
    """What a supervisor is told by the process that starts it (its settings: the supervisor reads none)."""

    idle_s: float
    port: int
    ui_port: int


def _start_supervisor(home: Path, timeout_s: float, told: Supervised) -> dict:
    """Start a supervisor and wait until it reports a healthy server; on failure kill it all."""
    leftover = _read_state(home)
    if leftover is not None:  # a supervisor that never became ready, or a stale file
        if leftover.get("pid") and _alive(leftover["pid"]):
            _kill_group(leftover["pid"])
        _kill_orphan_server(home, leftover.get("server_pid"))
        (home / _STATE).unlink(missing_ok=True)
    open(home / _LOG, "wb").close()
    log = open(home / _LOG, "ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "rein.durable.embedded_server", "supervise", str(home), str(timeout_s), *map(str, told)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        cwd=str(home),
    )
    log.close()
    _started[process.pid] = process
    deadline = time.monotonic() + timeout_s + 5
    while time.monotonic() < deadline:
        state = _read_state(home)
        if state is not None and state.get("pid") == process.pid and state.get("ready"):
            return state
        if process.poll() is not None:
            break
        time.sleep(0.02)  # a small file read: the caller waits on it
    _kill_group(process.pid)
    (home / _STATE).unlink(missing_ok=True)
    tail = (home / _LOG).read_text(errors="replace")[-2000:].strip()
    raise RuntimeError(
        f"the embedded Temporal server did not become healthy within {timeout_s:g}s "
        f"(REIN_HOME={home}; log {home / _LOG}):\n{tail}"
    )


def _kill_group(pid: int | None) -> None:
    """SIGKILL a supervisor's process group (it and its `temporal` child) and reap what is ours."""
    import signal

    if not pid:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc = _started.pop(pid, None)
    if proc is not None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _stop(home: Path) -> bool:
    """Stop the running supervisor (and its server); the caller holds the lock."""
    import signal

    state = _read_state(home)
    if state is None:
        return False
    pid: int = state.get("pid") or 0  # 0: none recorded
    was_running = bool(pid) and _alive(pid)
    if was_running:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 20
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    if pid and (_alive(pid) or pid in _started):
        _kill_group(pid)  # it did not stop in time: it and its server, at once
    _kill_orphan_server(home, state.get("server_pid"))  # normally gone with its supervisor
    (home / _STATE).unlink(missing_ok=True)
    return was_running


# --------------------------------------------------------------------------- the supervisor process


def _die_with_parent() -> None:
    """In the `temporal` child (Linux only): get SIGKILL when the supervisor dies, so it is never
    orphaned. Elsewhere the server stays in the supervisor's process group, which `_kill_group`
    kills, and the next start sweeps away a server whose supervisor was killed (`_kill_orphan_server`)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class _StopSignal:
    """SIGTERM or SIGINT asks the supervisor to stop. The signal also writes to a pipe
    (signal.set_wakeup_fd) that `wait` selects on, so the stop begins at once, not at the next poll."""

    def __init__(self) -> None:
        import signal

        self.received = False
        self._read, write = os.pipe()
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write)
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, *_: object) -> None:
        self.received = True

    def wait(self, timeout_s: float) -> None:
        import select

        select.select([self._read], [], [], timeout_s)


def _supervise(home: Path, timeout_s: float, told: Supervised) -> int:
    """Start the server (retrying on new ports), report it once healthy, stop it when idle."""
    import fcntl
    import json

    stop = _StopSignal()
    idle_s = told.idle_s
    deadline = time.monotonic() + timeout_s
    server: DevServer | None = None
    for attempt in range(1, 4):
        server = _launch(home, deadline, told)
        if server is not None:
            break
        print(f"rein: embedded server attempt {attempt} failed", file=sys.stderr, flush=True)
        if stop.received or time.monotonic() > deadline:
            return 1
    if server is None:
        return 1
    state = {
        "pid": os.getpid(), "server_pid": server.process.pid, "address": server.address, "ui": server.ui_url,
        "db": str(home / _DB), "log": str(home / _LOG), "idle_s": idle_s, "ready": True,
        "started_at": time.time(),
    }
    tmp = home / f"{_STATE}.{os.getpid()}"
    tmp.write_text(json.dumps(state))
    tmp.replace(home / _STATE)

    lock_fd = os.open(home / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    clients_fd = os.open(home / _CLIENTS, os.O_RDWR | os.O_CREAT, 0o600)
    idle_since: float | None = None
    while not stop.received and server.process.poll() is None:
        stop.wait(0.25)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # someone is starting, checking or stopping: look again later
        try:
            try:
                fcntl.flock(clients_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(clients_fd, fcntl.LOCK_UN)
                idle_since = idle_since or time.monotonic()
            except BlockingIOError:
                idle_since = None
            if idle_since is not None and time.monotonic() - idle_since >= idle_s:
                _retire(home, server)  # under the lock, so no process starts using it meanwhile
                return 0
        finally:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
    _retire(home, server)
    return 0


def _launch(home: Path, deadline: float, told: Supervised) -> DevServer | None:
    """One start-dev on a free port, healthy before `deadline` (else stopped: None)."""
    try:
        # With the web UI (same process, little cost): `rein server` prints its URL. REIN_SERVER_PORT
        # and REIN_UI_PORT (set by `rein server --port/--ui-port`) fix the ports; default: free ones.
        server = start_dev_server(
            port=told.port or None, ui=True, ui_port=told.ui_port or None,
            db_filename=str(home / _DB), wait_s=max(deadline - time.monotonic(), 0.01),
            log_path=home / _LOG, preexec_fn=_die_with_parent if LINUX else None, own_session=False,
        )
    except RuntimeError as exc:
        print(f"rein: {exc}", file=sys.stderr, flush=True)
        return None
    return server


def _retire(home: Path, server: DevServer) -> None:
    server.stop()
    state = _read_state(home)
    if state is not None and state.get("pid") == os.getpid():
        (home / _STATE).unlink(missing_ok=True)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "supervise":
        code = _supervise(Path(sys.argv[2]), float(sys.argv[3]),
                          Supervised(float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # its server is stopped and its files written: skip ~0.2 s of interpreter teardown
    sys.exit("usage: python -m rein.durable.embedded_server supervise REIN_HOME TIMEOUT_S IDLE_S PORT UI_PORT")

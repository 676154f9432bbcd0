"""The embedded server without Linux-only calls (as on macOS): no prctl(PR_SET_PDEATHSIG).

Every Python process here (the script, the supervisor it starts) imports a sitecustomize that hides
it: `ctypes` has no `prctl`. The server still starts, serves a run, and a `temporal` server orphaned by
a killed supervisor (nothing ties its life to the supervisor's there) is swept away by the next start.
Processes are read through psutil on every platform, so there is no /proc-only path left to hide.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.waiting import wait_until
from tests.test_embedded import RUN, _script, home, out  # noqa: F401  (fixtures)

HIDE_LINUX_APIS = '''
import ctypes

_lookup = ctypes.CDLL.__getattr__

def _no_prctl(self, name):
    if name == "prctl":
        raise AttributeError("prctl: absent (as on macOS)")
    return _lookup(self, name)

ctypes.CDLL.__getattr__ = _no_prctl

'''

STATE = """
import json
from rein.durable.embedded_server import LINUX, embedded_status, ensure_embedded
address = ensure_embedded()
print(json.dumps({"linux": LINUX, "address": address, **embedded_status()}), flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_embedded_server_works_without_prctl_and_proc(home: Path, out: Path, tmp_path: Path) -> None:  # noqa: F811
    site = tmp_path / "no-linux-apis"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE_LINUX_APIS)
    hidden = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
              "REIN_SERVER_IDLE_S": "600", "COLUMNS": "80"}  # as some CI shells set it

    result = _script(home, RUN, str(out / "session.json"), **hidden)
    assert result["status"] == "interrupted"  # a real run, on the embedded server, waits for approval
    first = _script(home, STATE, **hidden)
    assert first["linux"] is False  # the portable code path ran
    assert _alive(first["pid"]) and _alive(first["server_pid"])

    os.kill(first["pid"], signal.SIGKILL)  # the supervisor dies; without PR_SET_PDEATHSIG its server lives on
    wait_until(lambda: not _alive(first["pid"]), "the supervisor to die", 30)
    assert _alive(first["server_pid"])

    second = _script(home, STATE, **hidden)  # the next start sweeps the orphan away and starts afresh
    assert second["pid"] != first["pid"] and second["server_pid"] != first["server_pid"]
    wait_until(lambda: not _alive(first["server_pid"]), "the orphaned server to be killed", 30)
    assert _alive(second["server_pid"])

"""Ctrl-C during the README demo (`python examples/calculator.py`): one line and exit 130, no traceback
(during its imports, in a terminal: tests/test_ctrl_c.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.test_readme import ROOT, _env
from tests.vendor_server import Reply, Slow, VendorServer


def test_ctrl_c_while_the_demo_waits_for_its_model_is_one_line_and_exit_130() -> None:
    with VendorServer() as vendor:
        vendor.script([Slow(seconds=120, then=Reply(text="late"))])  # the demo waits on its model meanwhile
        proc = subprocess.Popen([sys.executable, "examples/calculator.py"], cwd=str(ROOT), text=True,
                                env=_env(REIN_MODEL="openai/gpt-4o", OPENAI_API_KEY="sk-interrupt-test",
                                         OPENAI_BASE_URL=vendor.base_url + "/v1", LITELLM_LOCAL_MODEL_COST_MAP="True"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 240
            while not vendor.requests and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert vendor.requests, "the demo never called its model"
            proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted; the run stays on the server: `rein list --agent calculator` shows it", err
    assert "Traceback" not in out + err

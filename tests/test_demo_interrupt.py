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


def _page(address: str, port: int) -> subprocess.Popen:
    """`python examples/agui/serve.py`: the example page's server, with its worker, on the test's server."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("REIN_TASK_QUEUE", "REIN_DEBUG")}
    env["TEMPORAL_ADDRESS"] = address
    return subprocess.Popen([sys.executable, "examples/agui/serve.py", "--port", str(port)], cwd=str(ROOT), env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


PAGE_LINE = "rein: interrupted: the page stopped; its threads stay in Temporal (`rein threads` lists them)"


def test_ctrl_c_on_the_example_page_with_a_page_connected_is_one_line_and_exit_130(dev) -> None:  # noqa: ANN001
    """The AG-UI example server stopped while a page reads a turn from it (it printed a 30-line traceback)."""
    import threading
    import uuid

    import httpx

    from rein.durable.embedded_server import free_port

    port = free_port()
    proc = _page(dev.client.service_client.config.target_host, port)
    reading = threading.Event()

    def read_a_turn() -> None:  # a page's POST: its stream stays open while the turn waits for an approval
        body = {"threadId": f"sigint-{uuid.uuid4().hex[:8]}", "runId": "r1",
                "messages": [{"id": "m1", "role": "user", "content": "What is 2 + 3?"}]}
        try:
            with httpx.stream("POST", f"http://127.0.0.1:{port}/agui/calculator", json=body, timeout=60) as response:
                for _ in response.iter_lines():
                    reading.set()
        except httpx.HTTPError:
            pass  # the server went away: what this test does

    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"the calculator page on http://127.0.0.1:{port}/")
        page = threading.Thread(target=read_a_turn, daemon=True)
        page.start()
        assert reading.wait(60), "the page never got an event"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, err) == (130, PAGE_LINE + "\n"), err


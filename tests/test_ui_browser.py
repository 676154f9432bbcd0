"""The Temporal UI, looked at in a real browser: headless Chromium (Debian's `chromium`,
installed by .ci/run) driven over the DevTools protocol against `rein server`'s UI.

The UI polls the server, so every check waits in real time for the text to appear
(bounded); `--virtual-time-budget` would never finish. Screenshots of each page go
to tests/artifacts/ (ignored by git) for a person to look at.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import websockets
from temporalio.client import WorkflowFailureError

import rein
from rein import Agent, LoopConfig
from rein.cli import main
from rein.client import ReinClient, connect
from rein.durable.embedded_server import free_port
from tests.support.processes import stop_process
from tests.support.providers import OpsModel, restart
from tests.support.waiting import poll, rein_status_is

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_FLAGS = [  # the machine's closed network: no background connections, no sandbox as root
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1400,1000",
]
PAGE_WAIT_S = 90
TEXT_JS = """(() => {
  if (!document.body) return '';
  const frames = [...document.querySelectorAll('iframe')].map(f => {
    try { if (f.contentDocument && f.contentDocument.body) return f.contentDocument.body.innerText; } catch (e) {}
    const doc = new DOMParser().parseFromString(f.srcdoc || '', 'text/html');
    return doc.body ? doc.body.textContent : '';
  });
  return [document.body.innerText, ...frames].join('\\n');
})()"""


AGENT = Agent(provider=OpsModel(), tools=[restart], config=LoopConfig(permission="ask"), name="ui-ops")


# --------------------------------------------------------------------------- a small DevTools client


class Page:
    """One Chromium tab over the DevTools protocol (flattened target session)."""

    def __init__(self, ws: Any, session: str):
        self.ws, self.session, self.ids = ws, session, itertools.count(1)

    @classmethod
    async def open(cls, ws_url: str) -> Page:
        ws = await websockets.connect(ws_url, max_size=64 * 1024 * 1024)
        browser = cls(ws, "")
        target = await browser.send("Target.createTarget", url="about:blank")
        attached = await browser.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        page = cls(ws, attached["sessionId"])
        page.ids = browser.ids
        await page.send("Page.enable")
        return page

    async def send(self, method: str, **params: Any) -> dict:
        message_id = next(self.ids)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        await self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def text(self) -> str:
        """What the page shows, including Markdown the UI renders in sandboxed iframes (summaries, details)."""
        result = await self.send("Runtime.evaluate", expression=TEXT_JS, returnByValue=True)
        return result["result"].get("value") or ""

    async def wait_for(self, *needles: str, timeout: float = PAGE_WAIT_S) -> str:
        """The page's text once it shows every needle (the UI loads and polls asynchronously)."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = await self.text()
            if all(n in text for n in needles):
                return text
            await asyncio.sleep(0.1)  # a check is one DevTools round trip; the UI itself takes seconds to load
        missing = [n for n in needles if n not in text]
        raise AssertionError(f"the page never showed {missing}; it shows:\n{text[:4000]}")

    async def url(self) -> str:
        return (await self.send("Runtime.evaluate", expression="location.href", returnByValue=True))["result"]["value"]

    async def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        data = (await self.send("Page.captureScreenshot", format="png"))["data"]
        path = ARTIFACTS / f"{name}.png"
        path.write_bytes(base64.b64decode(data))
        return path


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def rein_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`rein server` as a user runs it, with its own REIN_HOME; its address and UI URL."""
    home = tmp_path_factory.mktemp("ui-home")
    env = {k: v for k, v in os.environ.items() if k != "TEMPORAL_ADDRESS"}
    env.update(REIN_HOME=str(home), PYTHONUNBUFFERED="1")
    ui_port = free_port()
    process = subprocess.Popen([REIN_BIN, "server", "--ui-port", str(ui_port)], env=env, cwd=str(ROOT),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("Ctrl-C" in line for line in lines):
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
        out = "".join(lines)
        assert "Temporal UI:" in out, out
        links = {what: out.split(f"  {what}: ", 1)[1].split()[0]  # a label, a space, its link
                 for what in ("waiting for a person", "stuck", "failed today", "scheduled runs that failed")}
        yield {"address": out.split("Temporal dev server:", 1)[1].split()[0],
               "ui": out.split("Temporal UI:", 1)[1].split()[0], **links}
    finally:
        stop_process(process, 30)
        subprocess.run([REIN_BIN, "server", "stop"], env=env, capture_output=True, timeout=60)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def page(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    """One Chromium tab per module: every test starts with its own `goto`."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "Debian's chromium is needed (apt-get install -y chromium; .ci/run installs it)"
    process = subprocess.Popen([binary, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
                                "--remote-debugging-port=0", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ws_url = None
        deadline = time.monotonic() + 60
        while ws_url is None and time.monotonic() < deadline:
            line = await asyncio.to_thread(process.stderr.readline)
            if not line and process.poll() is not None:
                break
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            ws_url = found.group(1) if found else None
        assert ws_url, "chromium did not start its DevTools endpoint"
        tab = await Page.open(ws_url)
        yield tab
        await tab.ws.close()
    finally:
        stop_process(process, 20)


STARTED_WORKER_GRACE_S = "30"
"""`rein start` looks for the worker these tests have just started for 3 s by default; under CI load its
first poll once came later and the start was refused ("no worker serves agent")."""


def cli(address: str, *argv: str) -> None:
    assert main([*argv, "--address", address]) == 0, argv


# --------------------------------------------------------------------------- the test


async def test_the_ui_shows_summaries_waiting_text_and_activity_summaries(rein_server: dict, page: Page,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    address, ui = rein_server["address"], rein_server["ui"]
    monkeypatch.setenv("REIN_WORKER_GRACE_S", STARTED_WORKER_GRACE_S)
    client = await connect(address)
    async with rein.create_worker(client, agents=[AGENT], task_queue="rein"):
        await asyncio.to_thread(cli, address, "start", "ui-ops", "billing restart, please", "--id", "ui-waiting")
        await asyncio.to_thread(cli, address, "start", "ui-ops", "search restart, please", "--id", "ui-finished")
        handle = ReinClient(client)
        for run_id in ("ui-waiting", "ui-finished"):
            await poll(lambda r=run_id: rein_status_is(handle, r, "waiting_approval"), f"{run_id} waiting_approval",
                       PAGE_WAIT_S, interval=0.2)
        await asyncio.to_thread(cli, address, "approve", "ui-finished", "--approver", "alice")
        assert (await handle.result("ui-finished")).output == "Report: search restarted"

        # The list page: both runs, their states.
        await page.goto(f"{ui}/namespaces/default/workflows")
        listing = await page.wait_for("ui-waiting", "ui-finished", "AgentWorkflow")
        assert "RUNNING" in listing and "COMPLETED" in listing
        await page.screenshot("ui-list")

        # A waiting run: the summary rein start set, what it waits for (the current details)
        # with the tool's arguments and the command to answer, and the model call's summary.
        await page.goto(f"{ui}/namespaces/default/workflows/ui-waiting")
        await page.wait_for("rein.call_model", "ui-waiting")
        run_url = (await page.url()).rsplit("/", 1)[0]
        await page.goto(f"{run_url}/user-metadata")
        details = await page.wait_for("ui-ops: billing restart, please", "Waiting for approval",
                                      'tool restart(service="billing")', "--name approve")
        assert "waiting_approval" in details
        await page.screenshot("ui-waiting-user-metadata")
        await page.goto(f"{run_url}/history")
        history = await page.wait_for("model of agent ui-ops · iteration 1")  # scheduled before the model was known
        assert "rein.call_model" in history
        await page.screenshot("ui-waiting-history")

        # A finished run: its summary, the stop reason and output, and every activity's summary.
        await page.goto(f"{ui}/namespaces/default/workflows/ui-finished")
        await page.wait_for("rein.run_tool", "ui-finished")
        run_url = (await page.url()).rsplit("/", 1)[0]
        await page.goto(f"{run_url}/history")
        history = await page.wait_for('tool restart(service="search")', "model of agent ui-ops · iteration 1",
                                      "model OpsModel · iteration 2", "rein.approve")
        assert "Report: search restarted" in history
        await page.screenshot("ui-finished-history")
        await page.goto(f"{run_url}/user-metadata")
        await page.wait_for("ui-ops: search restart, please", "Stop reason", "Report: search restarted")
        await page.screenshot("ui-finished-user-metadata")


async def test_the_ui_says_who_waits(rein_server: dict, page: Page, monkeypatch: pytest.MonkeyPatch) -> None:
    """A waiting run says for what, since when and how to answer at the top of its page (the timeline's
    timer); a cancelled run is CANCELED in the list; `rein server`'s links list the runs that wait for
    a person, the stuck ones and today's failures."""
    address, ui = rein_server["address"], rein_server["ui"]
    monkeypatch.setenv("REIN_WORKER_GRACE_S", STARTED_WORKER_GRACE_S)
    client = await connect(address)
    ops = ReinClient(client)
    async with rein.create_worker(client, agents=[AGENT], task_queue="rein"):
        for run_id, prompt in (("who-waits", "mail restart, please"), ("who-cancelled", "dns restart, please")):
            await asyncio.to_thread(cli, address, "start", "ui-ops", prompt, "--id", run_id)
            await poll(lambda r=run_id: rein_status_is(ops, r, "waiting_approval"), f"{run_id} waiting",
                       PAGE_WAIT_S, interval=0.2)
        await asyncio.to_thread(cli, address, "cancel", "who-cancelled", "--reason", "not today")
        failed = await client.start_workflow("AgentWorkflow", {"agent": "nobody-serves-this", "prompt": "hi"},
                                             id="who-failed", task_queue="rein")
        with pytest.raises(WorkflowFailureError):  # no worker serves that agent: the run fails
            await failed.result()
        assert (await ops.result("who-cancelled")).stop_reason == "cancelled"

        # The run's own page, as it opens (the timeline): waiting for what, since when, the commands.
        await page.goto(f"{ui}/namespaces/default/workflows/who-waits")
        top = await page.wait_for("Waiting for approval since", 'restart(service="mail")',
                                  "rein approve who-waits", "rein deny who-waits")
        assert "RUNNING" in top
        await page.screenshot("ui-waiting-top")

        await page.goto(f"{ui}/namespaces/default/workflows")
        listing = await page.wait_for("who-cancelled", "who-waits", "who-failed")
        assert "CANCELED" in listing and "FAILED" in listing
        await page.screenshot("ui-list-canceled")

        await page.goto(rein_server["waiting for a person"])
        waiting = await page.wait_for("who-waits")
        assert "who-cancelled" not in waiting and "who-failed" not in waiting
        await page.screenshot("ui-link-waiting")

        await page.goto(rein_server["failed today"])
        failures = await page.wait_for("who-failed")
        assert "who-waits" not in failures and "who-cancelled" not in failures
        await page.screenshot("ui-link-failed-today")

        await page.goto(rein_server["stuck"])
        stuck = await page.wait_for("TemporalReportedProblems", "No Workflows Found")  # the query, accepted
        assert "who-waits" not in stuck and "who-failed" not in stuck
        await page.screenshot("ui-link-stuck")
        await asyncio.to_thread(cli, address, "cancel", "who-waits")

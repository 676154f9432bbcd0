"""An outage of the current build changes nothing and is told as it is (issues 43 and 53).

Build a, then build b with an explicit build id (`rein worker`s of one deployment); b becomes current. Runs that
wait for approval were started every way a run starts: the plain client on the worker's queue (while a was current:
its next task goes to b, but it last ran on a) and on the agent's own queue, `rein start` (while a was current),
`rein run` (its process served it as its own build, then let go of it as it exited) and a script's `Agent.run`. Each
says which build it waits for (`rein status`). b's only worker is killed while a keeps running. Until the server's
list of b's pollers is 70 s old, `rein deployment status` says "last poll N s ago"; then it and `rein list --stuck`
name b, since when it has had no worker, the 5 runs that wait on it and the command that would move them, and
`rein list --stuck` lists those runs. For longer than any timeout rein ever had, nothing moves: b stays current and
its runs stay on it. b's worker returns: every run finishes on b, and a new run goes to b.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from rein.client import ReinClient, connect
from rein.ops.run_build import run_build
from rein.temporal.deployment import current_build_id, describe
from rein.temporal.history import describe_queue
from tests.support.deploy_runs import all_waiting, start
from tests.support.processes import ROOT, WorkerProcess
from tests.support.waiting import poll

AGENTS = ["tests.agents.deploys:pay_agent", "tests.agents.deploys:pay_ask"]
OUTAGE_S = 190
"""Longer than any liveness timeout rein ever used (70 s) and than the server keeps a lost worker's poller."""
SCRIPT = "from tests.agents.deploys import pay_ask\nresult = pay_ask.run({!r})\nprint(result.status, result.session.run_id)"


class Shell:
    """The CLI and scripts as a person runs them, against `address`, in deployment `deployment`."""

    def __init__(self, address: str, deployment: str, root: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if k not in ("REIN_BUILD_ID", "TEMPORAL_NAMESPACE", "REIN_TASK_QUEUE")}
        self.env.update(TEMPORAL_ADDRESS=address, REIN_DEPLOYMENT=deployment, DEPLOY_DIR=str(root))

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(argv, cwd=str(ROOT), env=self.env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)

    def rein(self, *argv: str) -> subprocess.CompletedProcess:
        return self.run(str(Path(sys.executable).parent / "rein"), *argv)


async def _build_of_run(client: ReinClient, run_id: str) -> tuple[str, str, bool]:
    """(its last version, its behaviour, whether an override pins it)."""
    info = (await client.client.get_workflow_handle(run_id).describe()).raw_description.workflow_execution_info
    pinned = info.versioning_info.versioning_override.HasField("pinned")
    return info.versioning_info.deployment_version.build_id, str(info.versioning_info.behavior), pinned


async def test_an_outage_of_the_current_build_is_told_and_never_a_rollback(private_server, tmp_path):
    server, deployment = private_server, f"outage-{uuid.uuid4().hex[:6]}"
    queue, own = deployment, "rein.deploy-pay-ask"
    shell = Shell(server.address, deployment, tmp_path)
    env = {"DEPLOY_DIR": str(tmp_path), "REIN_DEPLOYMENT": deployment}
    a = WorkerProcess(server.address, AGENTS, queue, tmp_path / "a.log", REIN_BUILD_ID="a", **env).start()
    b = WorkerProcess(server.address, AGENTS, queue, tmp_path / "b.log", DEPLOY_BUILD="b", **env)
    b.args += ["--build-id", "b"]  # an explicit build id (DEPLOY_BUILD: the name its tool answers with)
    client = await connect(server.address)

    async def current() -> str | None:
        return current_build_id(await describe(client.client, deployment))

    try:
        await poll(lambda: _is(current, "a"), "build a to be current", timeout=60)
        runs = {await start(client, "deploy-pay-ask", queue, 1, "plain-shared"): 1}
        started = shell.rein("start", "deploy-pay-ask", "rein-start 2")
        assert started.returncode == 0, started.stderr
        runs[started.stdout.strip()] = 2
        await poll(lambda: all_waiting(client, list(runs)), "a's runs to wait for approval", timeout=120)
        b.start()
        await poll(lambda: _is(current, "b"), "build b to be current", timeout=60)
        runs[await start(client, "deploy-pay-ask", own, 3, "plain-own")] = 3
        ran, script = await asyncio.gather(asyncio.to_thread(shell.rein, "run", "tests.agents.deploys:pay_ask", "rein-run 4"),
                                           asyncio.to_thread(shell.run, sys.executable, "-c", SCRIPT.format("script 5")))
        assert ran.returncode == 7, ran.stderr  # no terminal: it stops at the approval, the run waits
        runs[re.search(r"run (\S+) waits for a person", ran.stderr).group(1)] = 4  # type: ignore[union-attr]
        assert script.returncode == 0 and script.stdout.startswith("interrupted "), script.stderr
        runs[script.stdout.split()[1]] = 5
        await poll(lambda: all_waiting(client, list(runs)), "every run to wait for approval", timeout=120)
        for run_id in runs:  # the script's and `rein run`'s were let go of as their process ended: all follow b
            assert (await _build_of_run(client, run_id))[2] is False, run_id
            description = await client.client.get_workflow_handle(run_id).describe()
            said = await run_build(client.client, description, await describe_queue(client.client, description.task_queue))
            assert said is not None and (said.build, said.deployment, said.polling) == ("b", deployment, True), said
        status = json.loads(shell.rein("deployment", "status", "--json").stdout)
        assert (status["current"], status["open_runs"], status["outages"]) == ("b", 5, []), status

        b.kill()
        killed = time.time()
        early = shell.rein("deployment", "status")
        assert early.returncode == 0, early.stderr
        row = next(line for line in early.stdout.splitlines() if line.startswith("  b  current"))
        ago = int(re.fullmatch(r"  b  current  auto-upgrade  last poll (\d+) s ago · 5 runs wait on it", row).group(1))  # type: ignore[union-attr]
        assert ago < 70 and "no worker since" not in early.stdout  # a killed worker is "last poll N s ago" for 70 s
        told = await poll(lambda: _outage(shell), "status to tell the outage", timeout=120, interval=2)
        last_poll = datetime.fromisoformat(next(v for v in told["versions"] if v["build_id"] == "b")["last_poll"])
        assert last_poll.timestamp() <= killed  # since its last poll, before the kill
        line = (f"deployment {deployment}: the current build b has had no worker since {last_poll:%Y-%m-%d %H:%M:%S} UTC: "
                "its 5 open runs wait (nothing changes by itself); start its workers again, or `rein deployment "
                "rollback` moves them to a")
        assert told["outages"] == [line] and told["open_runs"] == 5
        text = shell.rein("deployment", "status")
        assert line in text.stdout.replace("\n", "") and text.returncode == 0, text.stdout
        stuck = shell.rein("list", "--stuck", "--json")
        assert stuck.returncode == 0 and stuck.stderr.replace("\n", "") == line, stuck.stderr
        rows = {row["run_id"]: row for row in json.loads(stuck.stdout)}
        assert set(rows) == set(runs), rows
        assert {row["error"] for row in rows.values()} == {
            f"waits for build b of deployment {deployment}: no worker since {last_poll:%Y-%m-%d %H:%M:%S} UTC"}
        shown = shell.rein("status", next(iter(runs)))
        assert (f"b of deployment {deployment} (the current build: the run follows it at its next task); no worker of it "
                f"has polled since {last_poll:%Y-%m-%d %H:%M:%S} UTC") in " ".join(shown.stdout.split()), shown.stdout
        while time.time() - killed < OUTAGE_S:  # the outage: a lives, b is gone, nothing moves
            assert await current() == "b"
            assert {(await _build_of_run(client, r))[2] for r in runs} == {False}
            await asyncio.sleep(10)
        assert a.log.read_text().count(" is current") == 1  # its own first promotion; never again

        b.start()  # the current build's worker returns: everything carries on there
        await asyncio.gather(*(client.approve(run_id, wait=True) for run_id in runs))
        new = f"outage-new-{uuid.uuid4().hex[:6]}"
        await client.client.start_workflow("AgentWorkflow", {"agent": "deploy-pay", "prompt": f"{new} 9"}, id=new,
                                           task_queue=queue)
        for run_id, amount in {**runs, new: 9}.items():
            outcome = await asyncio.wait_for(client.outcome(client.handle(run_id)), 120)
            assert (outcome.status, outcome.output) == ("done", f"Paid {amount} on b"), run_id
        assert await current() == "b"
    finally:
        b.kill()
        a.stop()


async def _outage(shell: Shell) -> dict | None:
    proc = await asyncio.to_thread(shell.rein, "deployment", "status", "--json")
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    return status if status["outages"] else None


async def _is(read, value) -> bool:  # noqa: ANN001
    return await read() == value


pytestmark = pytest.mark.timeout(480)

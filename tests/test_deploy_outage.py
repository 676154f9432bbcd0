"""An outage of the current build changes nothing: its runs wait for it, and carry on when it returns (issue 43).

Build a, then build b (`rein worker` each, REIN_BUILD_ID); b becomes current and three runs wait for approval on
it. b's only worker is killed (a crash, a drained node) while a keeps running to drain its own runs. For longer
than any timeout rein ever had (3 minutes and more), nothing moves: b stays current, its runs stay on b, and
`rein deployment status` and `rein list --stuck` say that the current build has had no worker since then, with
the command that would move them. b's worker comes back: the runs finish on b, and a new run goes to b.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rein.client import ReinClient, connect
from rein.temporal.deployment import current_build_id, describe
from tests.support.deploy_runs import all_waiting, start
from tests.support.processes import ROOT, WorkerProcess
from tests.support.waiting import poll

AGENTS = ["tests.agents.deploys:pay_agent", "tests.agents.deploys:pay_ask"]
OUTAGE_S = 190
"""Longer than any liveness timeout rein ever used (70 s) and than the server keeps a lost worker's poller."""


def _cli(address: str, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REIN_DEPLOYMENT", "TEMPORAL_NAMESPACE")}
    env["TEMPORAL_ADDRESS"] = address
    return subprocess.run([str(Path(sys.executable).parent / "rein"), *argv], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


async def _build_of_run(client: ReinClient, run_id: str) -> tuple[str, bool]:
    """(the version the run is on, whether an override pins it)."""
    info = (await client.client.get_workflow_handle(run_id).describe()).raw_description.workflow_execution_info
    return info.versioning_info.deployment_version.build_id, info.versioning_info.HasField("versioning_override")


async def test_an_outage_of_the_current_build_is_never_a_rollback(private_server, tmp_path):
    server = private_server
    queue = f"outage-{uuid.uuid4().hex[:6]}"
    deployment = queue
    env = {"DEPLOY_DIR": str(tmp_path), "REIN_DEPLOYMENT": deployment}
    a = WorkerProcess(server.address, AGENTS, queue, tmp_path / "a.log", REIN_BUILD_ID="a", **env).start()
    b = WorkerProcess(server.address, AGENTS, queue, tmp_path / "b.log", REIN_BUILD_ID="b", **env)
    client = await connect(server.address)

    async def current() -> str | None:
        return current_build_id(await describe(client.client, deployment))

    try:
        await poll(lambda: _is(current, "a"), "build a to be current", timeout=60)
        b.start()
        await poll(lambda: _is(current, "b"), "build b to be current", timeout=60)
        runs = {await start(client, "deploy-pay-ask", queue, amount, f"outage-{amount}"): amount for amount in (1, 2, 3)}
        await poll(lambda: all_waiting(client, list(runs)), "b's runs to wait for approval", timeout=120)
        assert {await _build_of_run(client, r) for r in runs} == {("b", False)}

        b.kill()
        killed = time.monotonic()
        while time.monotonic() - killed < OUTAGE_S:  # the outage: a lives, b is gone
            assert await current() == "b"
            assert {await _build_of_run(client, r) for r in runs} == {("b", False)}
            await asyncio.sleep(10)
        assert a.log.read_text().count(" is current") == 1  # its own first promotion; never again
        status = _cli(server.address, "deployment", "status", "--deployment", deployment, "--json")
        assert status.returncode == 0, status.stderr
        outage = json.loads(status.stdout)["outage"]
        assert outage.startswith(f"deployment {deployment}: the current build b has had no worker "), outage
        assert "its 3 open runs wait (nothing changes by itself)" in outage and "`rein deployment rollback` moves them to a" in outage
        stuck = _cli(server.address, "list", "--stuck", "--json")
        assert stuck.returncode == 0 and json.loads(stuck.stdout) == [], stuck.stderr
        assert outage in stuck.stderr.replace("\n", " ") or outage.replace("`", "") in stuck.stderr.replace("\n", " ")

        b.start()  # the current build's worker returns: everything carries on there
        await asyncio.gather(*(client.approve(run_id, wait=True) for run_id in runs))
        new = f"outage-new-{uuid.uuid4().hex[:6]}"
        await client.client.start_workflow("AgentWorkflow", {"agent": "deploy-pay", "prompt": f"{new} 9"}, id=new,
                                           task_queue=queue)
        for run_id, amount in {**runs, new: 9}.items():
            outcome = await asyncio.wait_for(client.outcome(client.handle(run_id)), 120)
            assert (outcome.status, outcome.output) == ("done", f"Paid {amount} on b"), run_id
            assert [line.split()[0] for line in (tmp_path / f"{run_id}.effects").read_text().splitlines()] == ["b"]
        assert await current() == "b"
    finally:
        b.kill()
        a.stop()


async def _is(read, value) -> bool:  # noqa: ANN001
    return await read() == value


pytestmark = pytest.mark.timeout(420)

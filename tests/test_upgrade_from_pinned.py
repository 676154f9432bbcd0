"""An upgrade from the last landed build, whose `rein worker` pinned every run to its build (issue 43).

81ba243's default worker was versioned with runs PINNED, and wrote no rein metadata on its version. Its
runs wait for approval; its worker is stopped (it then hands its queue back: no current version) or
killed (its build stays current); this build's `rein worker` starts on the same queue. Its promotion
replays those runs, makes itself current, and moves them to AUTO_UPGRADE: approved, each finishes on
this build, its tool run once, with nobody running update-options.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from rein.client import ReinClient, connect
from rein.temporal.deployment import current_build_id, default_build_id, describe
from tests.support.deploy_runs import all_waiting, start
from tests.support.old_build import OldWorkerProcess, unpack_old_build
from tests.support.processes import WorkerProcess
from tests.support.waiting import poll

PINNED_BUILD = "81ba243"
"""The landed build whose workers pinned every run (the last one before AUTO_UPGRADE)."""
AGENTS = ["tests.agents.deploys:pay_agent", "tests.agents.deploys:pay_ask"]


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory: pytest.TempPathFactory):
    return unpack_old_build(tmp_path_factory.mktemp("pinned") / "old", PINNED_BUILD)


@pytest.mark.parametrize("ending", ["stop", "kill"])
async def test_runs_an_earlier_rein_pinned_carry_on_on_the_new_build(private_server, old_tree, tmp_path, ending):
    server = private_server
    queue = f"pinned-{ending}-{uuid.uuid4().hex[:6]}"
    deployment = queue  # 81ba243 named the deployment after the queue
    env = {"DEPLOY_DIR": str(tmp_path)}
    old = OldWorkerProcess(old_tree, server.address, AGENTS, queue, tmp_path / "old.log", DEPLOY_BUILD="old", **env)
    new = WorkerProcess(server.address, AGENTS, queue, tmp_path / "new.log", REIN_DEPLOYMENT=deployment,
                        DEPLOY_BUILD="new", **env)
    client = await connect(server.address)
    try:
        old.start()
        await poll(lambda: _current(client, deployment), "the old build to be current", timeout=60)
        old_build = await _current(client, deployment)
        runs = {await start(client, "deploy-pay-ask", queue, amount, f"pinned-{amount}"): amount for amount in (1, 2, 3)}
        await poll(lambda: all_waiting(client, list(runs)), "the old build's runs to wait for approval", timeout=120)
        for run_id in runs:
            info = (await client.client.get_workflow_handle(run_id).describe()).raw_description.workflow_execution_info
            assert info.versioning_info.deployment_version.build_id == old_build
        getattr(old, ending)()

        new.start()
        await poll(lambda: _is_current(client, deployment, default_build_id()), "this build to be current", timeout=90)
        lines = [f"run {run_id} follows the current build now (an earlier rein had pinned it)" for run_id in runs]
        await poll(lambda: all(line in new.log.read_text() for line in lines), "each run moved, a line each", timeout=30)
        await asyncio.gather(*(client.approve(run_id, wait=True) for run_id in runs))
        for run_id, amount in runs.items():
            outcome = await asyncio.wait_for(client.outcome(client.handle(run_id)), 120)
            assert (outcome.status, outcome.output) == ("done", f"Paid {amount} on new"), run_id
            assert [line.split()[0] for line in (tmp_path / f"{run_id}.effects").read_text().splitlines()] == ["new"]
    finally:
        new.stop()
        old.kill()


async def _current(client: ReinClient, deployment: str) -> str | None:
    return current_build_id(await describe(client.client, deployment))


async def _is_current(client: ReinClient, deployment: str, build: str) -> bool:
    return await _current(client, deployment) == build



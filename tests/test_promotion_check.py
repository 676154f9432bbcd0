"""A promotion checks every run that would move, not a sample, spread over the new build's workers (issue 55).

Build a (a change behind a new patch, and a bug in applying a decision) is current with 1,000 open threads that
just wait for a message, and one run that cannot go on: it recorded a's patch, and its approval keeps failing its
workflow task (stuck). Build b lacks a's change, so b cannot replay that run, and neither can a carry it on. Two
replicas of b start together: one check (ReinReplayCheck) replays all 1,001 runs, its activities taken by both
replicas, and b becomes current: the run that cannot go on anywhere does not block it, and is named where people
look: b's start line, and `rein deployment status`, which exits 9 while that run is open.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rein.client import connect
from rein.durable.embedded_server import start_dev_server
from rein.temporal.deployment import current_build_id, describe
from tests.support.deploy_runs import start, status_is
from tests.support.processes import ROOT, STUCK_RUNS_RETRY_SOON, WorkerProcess
from tests.support.waiting import poll

AGENTS = ["tests.agents.deploys:pay_agent", "tests.agents.deploys:pay_ask"]
OPEN_THREADS = 1000


@pytest.fixture
def server(tmp_path: Path):
    server = start_dev_server(log_path=tmp_path / "server.log", dynamic_config=STUCK_RUNS_RETRY_SOON)
    try:
        yield server
    finally:
        server.stop()


async def test_a_promotion_checks_every_open_run_and_names_the_one_that_cannot_go_on(server, tmp_path):
    deployment = queue = f"check-{uuid.uuid4().hex[:6]}"
    env = {"DEPLOY_DIR": str(tmp_path), "REIN_DEPLOYMENT": deployment}
    a = WorkerProcess(server.address, AGENTS, queue, tmp_path / "a.log", REIN_BUILD_ID="a", DEPLOY_NEW_PATCH="1",
                      DEPLOY_BUG="decide", **env).start()
    b = [WorkerProcess(server.address, AGENTS, queue, tmp_path / f"b{i}.log", REIN_BUILD_ID="b", DEPLOY_BUILD="old",
                       REIN_PROMOTE_TIMEOUT_S="600", **env)  # the default 300 s: what a loaded 2-core CI machine came near
         for i in range(2)]
    client = await connect(server.address)
    try:
        await poll(lambda: _current(client, deployment, "a"), "build a to be current", timeout=60)
        stuck = await start(client, "deploy-pay-ask", queue, 7, "cannot-go-on")
        await poll(lambda: status_is(client, stuck, "waiting_approval"), "the run to wait for approval", timeout=120)
        await client.client.get_workflow_handle(stuck).signal("approve", {"approver": "ops"})  # a's bug: its task fails
        limit = asyncio.Semaphore(50)

        async def thread(i: int) -> None:
            async with limit:
                await client.client.start_workflow("AgentWorkflow", {"agent": "deploy-pay", "thread": True},
                                                   id=f"thread-{i}-{uuid.uuid4().hex[:6]}", task_queue=queue)

        await asyncio.gather(*map(thread, range(OPEN_THREADS)))
        following = f'TemporalWorkerDeployment = "{deployment}" AND TemporalWorkflowVersioningBehavior = "AutoUpgrade"'
        await poll(lambda: _count(client, f'{following} AND ExecutionStatus = "Running"', OPEN_THREADS + 1),
                   "every thread to wait on a", timeout=300, interval=1)
        await poll(lambda: _count(client, f'WorkflowId = "{stuck}" AND TemporalReportedProblems IS NOT NULL', 1),
                   "the run to be stuck", timeout=120, interval=1)

        await asyncio.gather(*(asyncio.to_thread(w.start) for w in b))
        await poll(lambda: _current(client, deployment, "b"), "build b to be current", timeout=600, interval=1)
        said = "".join(w.log.read_text() for w in b)
        assert said.count(f"rein deployment {deployment}: build b is current (was a; it replayed the {OPEN_THREADS + 1} "
                          f"runs that move to it; 1 runs it cannot replay are left as they are: run {stuck} "
                          "(nondeterminism: ") == 1, said[-3000:]
        assert "deploy-test-new-change" in said.split(f"run {stuck} (nondeterminism: ")[1].split("\n")[0]
        check = client.client.get_workflow_handle(f"rein-promotion-{deployment}-b")
        identities = {e.activity_task_started_event_attributes.identity async for e in check.fetch_history_events()
                      if e.HasField("activity_task_started_event_attributes")}
        assert len(identities) == 2, identities  # the chunks were spread over both replicas
        assert len(await check.result()) == 1  # the one run no build carries on; every other replayed

        status = _rein(server.address, "deployment", "status", "--deployment", deployment, "--json")
        assert status.returncode == 9, status.stderr
        [line] = json.loads(status.stdout)["refusals"]
        assert line.startswith(f"deployment {deployment}: build b is current since ") and \
            f"; 1 runs it cannot replay are left as they are: run {stuck} (nondeterminism: " in line, line
    finally:
        for w in [*b, a]:
            w.kill()


async def _current(client, deployment: str, build: str) -> bool:  # noqa: ANN001
    return current_build_id(await describe(client.client, deployment)) == build


async def _count(client, query: str, expected: int) -> bool:  # noqa: ANN001
    return (await client.client.count_workflows(query)).count == expected


def _rein(address: str, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REIN_DEPLOYMENT", "TEMPORAL_NAMESPACE")}
    return subprocess.run([str(Path(sys.executable).parent / "rein"), *argv], cwd=str(ROOT), env={**env, "TEMPORAL_ADDRESS": address},
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


pytestmark = pytest.mark.timeout(900)

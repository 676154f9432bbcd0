"""Which deployment a worker joins and who gets the runs, with real worker processes.

One deployment per application (`rein`, or REIN_DEPLOYMENT), whatever queues a worker polls: the shared queue,
its agents' own queues, a model queue. A script's in-process engine joins it as a build of its own, so a
script run after a stopped `rein worker` gets its run at once, and never takes the deployment's routing.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rein.cli import EXIT_USAGE
from rein.client import ReinClient, connect
from rein.core.contract import DEFAULT_TASK_QUEUE, agent_task_queue
from rein.temporal.deployment import current_build_id, default_build_id, describe, version_queues
from tests.support.processes import ROOT, WorkerProcess
from tests.support.waiting import poll


@pytest.fixture
def server(private_server):
    return private_server


async def _current(client: ReinClient, deployment: str) -> str | None:
    return current_build_id(await describe(client.client, deployment))


async def _answer(client: ReinClient, queue: str, agent: str = "calculator") -> str:
    handle = await client.client.start_workflow("AgentWorkflow", {"agent": agent, "prompt": "2+2"},
                                                id=f"calc-{uuid.uuid4().hex[:8]}", task_queue=queue)
    return (await handle.result())["status"]


SCRIPT = """
import sys
from tests.agents.queues import calculator
result = calculator.run("2+2")
print(result.status, result.session.run_id, flush=True)
"""


def _script(address: str, **env: str) -> subprocess.CompletedProcess:
    """A user's script: `Agent.run` in a process of its own (the in-process engine), on the server at `address`."""
    import os

    full = {k: v for k, v in os.environ.items() if k not in ("REIN_TASK_QUEUE", "REIN_DEPLOYMENT", "REIN_BUILD_ID")}
    full.update(TEMPORAL_ADDRESS=address, **env)
    return subprocess.run([sys.executable, "-c", SCRIPT], cwd=str(ROOT), env=full, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("worker_build", ["same", "other"])
async def test_a_script_after_a_stopped_rein_worker_gets_its_run_at_once(server, tmp_path, worker_build):
    """`rein worker` ran (and became current), then stopped; a script's Agent.run on the same queue gets its run.
    Of the same rein it is the same build; of another build the script pins its own runs to its build and leaves
    the deployment's routing alone (the worker's build stays current)."""
    env = {} if worker_build == "same" else {"REIN_BUILD_ID": "ops-7"}
    worker = WorkerProcess(server.address, ["tests.agents.queues:calculator"], DEFAULT_TASK_QUEUE,
                           tmp_path / "worker.log", **env)
    del worker.args[2:4]  # `rein worker --agent ...`: the default queues and deployment
    client = await connect(server.address)
    expected = env.get("REIN_BUILD_ID") or default_build_id()
    try:
        worker.start()
        assert f", version rein.{expected}," in worker.log.read_text()
        await poll(lambda: _is_current(client, expected), "the worker's build to be current", timeout=60)
        assert await _answer(client, agent_task_queue("calculator")) == "done"
    finally:
        worker.stop()
    ran = _script(server.address)
    assert ran.returncode == 0, ran.stderr
    status, run_id = ran.stdout.split()
    assert status == "done"
    assert await _current(client, "rein") == expected  # nothing changed the routing
    info = (await client.client.get_workflow_handle(run_id).describe()).raw_description.workflow_execution_info
    assert info.versioning_info.deployment_version.build_id == default_build_id()
    pinned = info.versioning_info.versioning_override.pinned.version.build_id
    assert pinned == ("" if worker_build == "same" else default_build_id())


async def _is_current(client: ReinClient, build: str) -> bool:
    return await _current(client, "rein") == build


async def test_a_model_queue_worker_joins_the_application(server, tmp_path):
    """docs/fleet.md's recipe: a worker on the model queue is the same version of the same deployment, not one of
    its own; both workers' queues are that version's."""
    main = WorkerProcess(server.address, ["tests.agents.queues:calculator"], DEFAULT_TASK_QUEUE, tmp_path / "main.log")
    model = WorkerProcess(server.address, ["tests.agents.queues:calculator"], "rein.model.openai",
                          tmp_path / "model.log", REIN_MODEL_QUEUES="openai")
    client = await connect(server.address)
    try:
        main.start()
        model.start()
        build = default_build_id()
        for proc in (main, model):
            assert f", version rein.{build}," in proc.log.read_text()
        await poll(lambda: _is_current(client, build), "the application's build to be current", timeout=60)
        expected = {DEFAULT_TASK_QUEUE, "rein.model.openai", agent_task_queue("calculator")}

        async def registered() -> bool:
            return expected <= set(await version_queues(client.client, "rein", build))

        await poll(registered, "both workers' queues to be the version's", timeout=60)
        assert await describe(client.client, "rein-model-openai") is None  # no second deployment
        assert await _answer(client, DEFAULT_TASK_QUEUE) == "done"
    finally:
        model.stop()
        main.stop()


async def test_workers_of_two_agents_of_one_application_never_block_a_new_build(server, tmp_path):
    """Agent calculator's worker stays on build one; agent mycalc's new build two becomes current at once (when the
    server counts calculator's queue as active, the promotion tells it that queue follows: the log says so); its
    worker of build two serves it when it starts."""
    first = WorkerProcess(server.address, ["tests.agents.queues:calculator"], DEFAULT_TASK_QUEUE,
                          tmp_path / "first.log", REIN_BUILD_ID="one")
    second = WorkerProcess(server.address, ["tests.agents.queues:mycalc"], DEFAULT_TASK_QUEUE,
                           tmp_path / "second.log", REIN_BUILD_ID="two")
    third = WorkerProcess(server.address, ["tests.agents.queues:calculator"], DEFAULT_TASK_QUEUE,
                          tmp_path / "third.log", REIN_BUILD_ID="two")
    client = await connect(server.address)
    try:
        first.start()
        await poll(lambda: _is_current(client, "one"), "the first build to be current", timeout=60)
        second.start()
        await poll(lambda: _is_current(client, "two"), "the new build to be current", timeout=60)
        own = ReinClient(client.client, agent_task_queue("mycalc"))
        assert (await own.result((await own.start("mycalc", "2+2")).id)).status == "done"
        third.start()  # the rest of build two's rollout
        assert await _answer(client, agent_task_queue("calculator")) == "done"
    finally:
        for proc in (third, second, first):
            proc.stop()


def test_on_a_server_without_worker_deployments_the_default_worker_is_unversioned(tmp_path):
    """Worker Versioning disabled on the namespace: the default worker serves unversioned and says why; one given
    a deployment name refuses in one line."""
    from rein.durable.embedded_server import start_dev_server

    server = start_dev_server(log_path=tmp_path / "server.log",
                              dynamic_config={"system.enableDeploymentVersions": "false"})
    default = WorkerProcess(server.address, ["tests.agents.queues:calculator"], DEFAULT_TASK_QUEUE,
                            tmp_path / "default.log")
    try:
        default.start()
        log = default.log.read_text()
        assert "Worker Deployment Versions are disabled on this namespace: this worker is unversioned" in log
        assert ", version unversioned," in log
        named = subprocess.run([*default.args, "--deployment", "pay"], cwd=str(ROOT), capture_output=True, text=True,
                               timeout=120, stdin=subprocess.DEVNULL, env=default.env)
        assert named.returncode == EXIT_USAGE, named.stderr
        assert named.stderr.startswith("rein: Worker Deployment Versions are disabled on this namespace"), named.stderr
        assert named.stderr.count("\n") == 1 and "--deployment none" in named.stderr
        ran = _script(server.address)  # the engine too: unversioned, served
        assert ran.returncode == 0 and ran.stdout.startswith("done "), ran.stderr
    finally:
        default.stop()
        server.stop()


@pytest.mark.parametrize("leave", ["exit 7", "ctrl-c"])
async def test_a_rein_run_beside_a_worker_of_another_build_never_waits_on_its_own(server, tmp_path, leave):
    """`rein worker` of build `other` is current; `rein run` of the same agent serves its run as its own build while
    it runs, then leaves at the approval (no terminal: exit 7; at the prompt: Ctrl-C). It lets go of the run as it
    leaves: the run follows the current build, so `rein approve` is applied by the worker there, not queued for
    the build that left."""
    from tests.support.terminal import Terminal

    env = {k: v for k, v in os.environ.items() if k not in ("REIN_TASK_QUEUE", "REIN_DEPLOYMENT", "REIN_BUILD_ID")}
    env.update(TEMPORAL_ADDRESS=server.address, DEPLOY_DIR=str(tmp_path), TERM="xterm")
    worker = WorkerProcess(server.address, ["tests.agents.deploys:pay_ask"], DEFAULT_TASK_QUEUE, tmp_path / "w.log",
                           REIN_BUILD_ID="other", DEPLOY_DIR=str(tmp_path))
    del worker.args[2:4]  # `rein worker --agent ...`: the default queues and deployment
    client = await connect(server.address)
    rein = [str(Path(sys.executable).parent / "rein")]
    try:
        worker.start()
        await poll(lambda: _is_current(client, "other"), "the worker's build to be current", timeout=60)
        argv = [*rein, "run", "tests.agents.deploys:pay_ask", "x 5"]
        if leave == "exit 7":
            ran = subprocess.run(argv, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120,
                                 stdin=subprocess.DEVNULL)
            assert ran.returncode == 7, ran.stderr
            said = ran.stderr
        else:
            term = Terminal(argv, env, ROOT)
            try:
                await asyncio.to_thread(term.expect, "Approve? [y/N]:")
                term.type(b"\x03")
                assert await asyncio.to_thread(term.wait) == 130, term.text
            finally:
                term.close()
            said = term.text
        run_id = re.search(r"run (pay-ask-\w+|deploy-pay-ask-\w+) waits", said).group(1)  # type: ignore[union-attr]
        info = (await client.client.get_workflow_handle(run_id).describe()).raw_description.workflow_execution_info
        assert info.versioning_info.versioning_override.auto_upgrade, info.versioning_info  # let go of
        approved = subprocess.run([*rein, "approve", run_id], cwd=str(ROOT), env=env, capture_output=True, text=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
        assert approved.returncode == 0, approved.stderr  # applied by the current build's worker, not queued
        outcome = await asyncio.wait_for(client.outcome(client.handle(run_id)), 120)
        assert (outcome.status, outcome.output) == ("done", "Paid 5 on other")
    finally:
        worker.stop()

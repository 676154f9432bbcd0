"""A versioned `rein worker` beside an unversioned one, with real worker processes (issue 34).

Once a deployment has a current version, every new run on a queue its workers poll goes to that
version. A versioned worker on the shared queue `rein` would so take every plain-client start there,
other agents' too (`Unknown agent 'calculator'. This worker serves: mycalc.`). By default it polls
only its agents' own queues; given the shared queue where an unversioned worker polls, it refuses.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid

import pytest

from rein.cli import EXIT_USAGE
from rein.client import ReinClient, connect
from rein.core.contract import DEFAULT_TASK_QUEUE, agent_task_queue
from rein.durable.temporal_worker import create_worker
from rein.temporal.deployment import current_build_id, describe
from tests.agents.queues import calculator
from tests.support.processes import ROOT, WorkerProcess
from tests.support.waiting import poll


@pytest.fixture
def server(private_server):
    return private_server


async def test_a_versioned_worker_leaves_the_shared_queue_to_other_agents(server, tmp_path):
    plain = WorkerProcess(server.address, ["tests.agents.queues:calculator"], DEFAULT_TASK_QUEUE, tmp_path / "plain.log",
                          REIN_DEPLOYMENT="none")  # an unversioned worker, as earlier rein builds ran
    versioned = WorkerProcess(server.address, ["tests.agents.queues:mycalc"], DEFAULT_TASK_QUEUE, tmp_path / "v2.log",
                              REIN_DEPLOYMENT="pay", REIN_BUILD_ID="v2")
    del versioned.args[2:4]  # `rein worker --agent mycalc` with no --task-queue: the default layout
    try:
        plain.start()
        versioned.start()
        client = await connect(server.address)

        async def v2_current() -> bool:
            return current_build_id(await describe(client.client, "pay")) == "v2"

        await poll(v2_current, "v2 current (the deployment's first version)")
        outputs = []
        for _ in range(6):  # plain-client starts of the other agent on the shared queue
            handle = await client.client.start_workflow(
                "AgentWorkflow", {"agent": "calculator", "prompt": "2+2"}, id=f"calc-{uuid.uuid4().hex[:8]}",
                task_queue=DEFAULT_TASK_QUEUE)
            outputs.append((await handle.result())["status"])
        assert outputs == ["done"] * 6
        own = ReinClient(client.client, agent_task_queue("mycalc"))  # the versioned agent on its own queue
        mine = await own.start("mycalc", "2+2")
        assert (await own.result(mine.id)).status == "done"
        log = (tmp_path / "v2.log").read_text()
        assert "queues rein.mycalc," in log and "not on the shared queue 'rein'" in log

        told = subprocess.run(  # told to share the queue the unversioned worker polls: refused, one line
            [*versioned.args, "--task-queue", DEFAULT_TASK_QUEUE], cwd=str(ROOT), capture_output=True, text=True,
            timeout=120, stdin=subprocess.DEVNULL, env={**versioned.env, "REIN_BUILD_ID": "v3"})
    finally:
        versioned.stop()
        plain.stop()
    assert told.returncode == EXIT_USAGE, told.stderr
    assert told.stderr.startswith("rein: queue 'rein' is polled by an unversioned worker"), told.stderr
    assert told.stderr.count("\n") == 1 and "own --task-queue" in told.stderr


async def test_a_default_worker_takes_its_queue_and_hands_it_back_when_it_stops(server, tmp_path, monkeypatch):
    """`rein worker` is versioned by default, as the deployment named after its queue: a plain client's runs there
    go to its build. Stopped, it hands the queue back, so a script's unversioned worker started next on it (an
    in-process `create_worker`, `Agent.run`'s engine) gets the new runs at once; killed, that worker hands the
    queue back itself once the versioned one is seen gone. Without the handback such runs wait forever."""
    monkeypatch.setenv("REIN_POLLER_FRESH_S", "3")  # this process's watch: a poller unseen for 3 s is gone
    monkeypatch.setenv("REIN_ADOPT_INTERVAL_S", "1")
    client = await connect(server.address)
    for ending in ("stop", "kill"):
        queue = f"handback-{ending}-{uuid.uuid4().hex[:6]}"
        worker = WorkerProcess(server.address, ["tests.agents.queues:calculator"], queue, tmp_path / f"{ending}.log")
        try:
            worker.start()
            assert f", version {queue}.rein-" in worker.log.read_text()
            await poll(lambda: _current(client, queue), "the default worker's build to be current", timeout=60)
            assert await _answer(client, queue) == "done"
        finally:
            getattr(worker, ending)()
        if ending == "stop":  # handed back as it stopped
            assert await _current(client, queue) is None
        async with create_worker(client.client, [calculator], task_queue=queue):
            assert await asyncio.wait_for(_answer(client, queue), 60) == "done"
        assert await _current(client, queue) is None


async def test_a_default_worker_beside_an_unversioned_one_stays_unversioned(server, tmp_path):
    """A rolling upgrade from an earlier (unversioned) rein: the default worker joins the queue as it is."""
    queue = f"mixed-{uuid.uuid4().hex[:6]}"
    plain = WorkerProcess(server.address, ["tests.agents.queues:calculator"], queue, tmp_path / "plain.log",
                          REIN_DEPLOYMENT="none")
    default = WorkerProcess(server.address, ["tests.agents.queues:calculator"], queue, tmp_path / "default.log")
    try:
        plain.start()
        default.start()
        log = default.log.read_text()
        assert f"queue {queue} is polled by an unversioned worker" in log and ", version unversioned," in log
        client = await connect(server.address)
        assert [await _answer(client, queue) for _ in range(3)] == ["done"] * 3
        assert await _current(client, queue) is None
    finally:
        default.stop()
        plain.stop()


async def _current(client: ReinClient, deployment: str) -> str | None:
    return current_build_id(await describe(client.client, deployment))


async def _answer(client: ReinClient, queue: str, agent: str = "calculator") -> str:
    handle = await client.client.start_workflow("AgentWorkflow", {"agent": agent, "prompt": "2+2"},
                                                id=f"calc-{uuid.uuid4().hex[:8]}", task_queue=queue)
    return (await handle.result())["status"]


async def test_a_new_build_of_another_application_on_the_same_queue_is_refused(server, tmp_path):
    """Two applications (agents calculator and mycalc) on the default queue `rein` are one deployment. A new build
    of the second, made current, would take the first one's runs on `rein.calculator` and serve none; left
    behind, its own runs would wait for the first one's build. So it refuses, in one line; given a queue of its
    own it serves, and the first application's runs go on."""
    first = WorkerProcess(server.address, ["tests.agents.queues:calculator"], DEFAULT_TASK_QUEUE,
                          tmp_path / "first.log", REIN_BUILD_ID="first")
    second = WorkerProcess(server.address, ["tests.agents.queues:mycalc"], DEFAULT_TASK_QUEUE,
                           tmp_path / "second.log", REIN_BUILD_ID="second")
    try:
        first.start()
        client = await connect(server.address)
        await poll(lambda: _current(client, DEFAULT_TASK_QUEUE), "the first application's build to be current")
        refused = subprocess.run(second.args, cwd=str(ROOT), capture_output=True, text=True, timeout=120,
                                 stdin=subprocess.DEVNULL, env=second.env)
        assert refused.returncode == EXIT_USAGE, refused.stderr
        assert refused.stderr.startswith("rein: deployment 'rein' is current at build first, whose live workers "
                                         "serve queues this build does not (rein.calculator)"), refused.stderr
        assert refused.stderr.count("\n") == 1
        second.args[second.args.index("--task-queue") + 1] = "second-app"
        second.start()
        assert ", version second-app.second," in second.log.read_text()
        assert await _current(client, DEFAULT_TASK_QUEUE) == "first"
        assert await _answer(client, agent_task_queue("calculator")) == "done"
        own = ReinClient(client.client, agent_task_queue("mycalc"))
        assert (await own.result((await own.start("mycalc", "2+2")).id)).status == "done"
    finally:
        second.stop()
        first.stop()


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
    finally:
        default.stop()
        server.stop()

"""Deploys with real worker processes: a bug shipped then fixed, new builds, PINNED on request, rollbacks.

One dev server per module (a stuck run's workflow task tried again within seconds:
STUCK_RUNS_RETRY_SOON); `python worker.py` processes play successive builds of one
application (tests/agents/deploys.py), each test its own deployment (REIN_DEPLOYMENT). Each run's
prompt is `<run id> <amount>`, its answer `Paid <amount> on <build>`, and every real execution of
its tool is a line in `<dir>/<run id>.effects`: so a test sees lost runs, wrong answers, the build a
run ran on and tools run twice. The CLI is run as the user runs it (the `rein` console script).
Nobody runs set-current, retry or update-options unless the test says so: routing changes only
when a new build starts or an operator decides (docs/deploys.md).
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
import pytest_asyncio
from temporalio.client import WorkflowExecutionStatus

from rein.cli import EXIT_NO_WORKER
from rein.client import NoWorker, ReinClient, connect
from rein.core.contract import RunOutcome
from rein.durable.embedded_server import DevServer, start_dev_server
from rein.temporal.history import pinned_build
from tests.support.deploy_runs import all_waiting, start, status_is
from tests.support.processes import ROOT, STUCK_RUNS_RETRY_SOON, WorkerProcess
from tests.support.waiting import poll

AGENTS = ["tests.agents.deploys:pay_agent", "tests.agents.deploys:pay_ask"]


class Stack:
    """A dev server, the workers (builds) started on it, and the runs' side-effect files."""

    def __init__(self, root: Path):
        self.root = root
        self.server: DevServer = start_dev_server(log_path=root / "server.log", dynamic_config={
            **STUCK_RUNS_RETRY_SOON, "matching.longPollExpirationInterval": '"5s"'})  # live pollers seen every 5 s
        self.workers: list[WorkerProcess] = []

    def worker(self, task_queue: str, **env: str) -> WorkerProcess:
        """A `python worker.py` of the deployment named after `task_queue` (each test its own application)."""
        log = self.root / f"worker-{len(self.workers)}.log"
        env.setdefault("REIN_DEPLOYMENT", deployment_of(task_queue))
        proc = WorkerProcess(self.server.address, AGENTS, task_queue, log, DEPLOY_DIR=str(self.root), **env)
        self.workers.append(proc)
        return proc.start()

    def effects(self, run_id: str) -> list[str]:
        path = self.root / f"{run_id}.effects"
        return path.read_text().splitlines() if path.exists() else []

    def cli(self, *argv: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("REIN_DEPLOYMENT", "TEMPORAL_NAMESPACE")}
        env["TEMPORAL_ADDRESS"] = self.server.address
        return subprocess.run([str(Path(sys.executable).parent / "rein"), *argv], cwd=str(ROOT), env=env,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    def cli_json(self, *argv: str) -> list[dict]:
        proc = self.cli(*argv, "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)


def deployment_of(queue: str) -> str:
    return queue.replace(".", "-")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    s = Stack(tmp_path_factory.mktemp("deploys"))
    try:
        yield s
    finally:
        for w in s.workers:
            w.kill()
        s.server.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def client(stack: Stack) -> ReinClient:
    return ReinClient(await connect(stack.server.address))


async def outcome(client: ReinClient, run_id: str) -> RunOutcome:
    """The run's result once it closes: its status and output (client.result would also replay each
    closed run on a worker for its session and steps, which no test here reads)."""
    return await asyncio.wait_for(client.outcome(client.handle(run_id)), 120)


async def start_all(client: ReinClient, queue: str, amounts: range, build: str) -> dict[str, tuple[int, str]]:
    """A deploy-pay run of each amount and a deploy-pay-ask run of amount + 100, started at once:
    run id -> (amount, the build it is expected to run on)."""
    jobs = [(agent, amount + extra) for amount in amounts for agent, extra in (("deploy-pay", 0), ("deploy-pay-ask", 100))]
    run_ids = await asyncio.gather(*(start(client, agent, queue, amount) for agent, amount in jobs))
    return {run_id: (amount, build) for run_id, (_, amount) in zip(run_ids, jobs, strict=True)}


async def approve_when_waiting(client: ReinClient, run_id: str) -> None:
    await poll(lambda: status_is(client, run_id, "waiting_approval"), f"{run_id} to wait for approval", timeout=120)
    await client.approve(run_id, wait=True)



async def says(worker: WorkerProcess, line: str, what: str, timeout: float) -> None:
    """Until `worker`'s log has `line`; a timeout shows the log's end (what the build said instead)."""
    try:
        await poll(lambda: line in worker.log.read_text(), what, timeout=timeout)
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{worker.log.read_text(errors='replace')[-4000:]}") from None


async def test_a_deployed_bug_leaves_runs_open_and_the_fix_finishes_them(stack: Stack, client: ReinClient):
    queue = f"bug-{uuid.uuid4().hex[:6]}"
    buggy = stack.worker(queue, DEPLOY_BUG="machine", DEPLOY_BUILD="buggy")
    runs = {await start(client, "deploy-pay", queue, amount): amount for amount in (11, 12, 13, 14)}
    asked = {await start(client, "deploy-pay-ask", queue, amount): amount for amount in (21, 22)}
    await asyncio.gather(*(approve_when_waiting(client, run_id) for run_id in asked))
    runs.update(asked)

    def listed() -> dict[str, dict]:
        rows = {row["run_id"]: row for row in stack.cli_json("list", "--stuck")}
        return rows if set(runs) <= set(rows) else {}

    stuck = await poll(listed, "every run listed by `rein list --stuck`", timeout=120, interval=0.5)
    for run_id in runs:
        assert "deployed bug: next_action cannot read tool results" in stuck[run_id]["error"]
        assert stuck[run_id]["attempt"] >= 2 and stuck[run_id]["status"] == "stuck"
        assert stuck[run_id]["last_status"] == "running"
        description = await client.client.get_workflow_handle(run_id).describe()
        assert description.status == WorkflowExecutionStatus.RUNNING  # open: nothing lost
        assert len(stack.effects(run_id)) == 1
    plain = {row["run_id"]: row["status"] for row in stack.cli_json("list", "--limit", "200")}
    assert {plain[run_id] for run_id in runs} == {"stuck"}

    buggy.kill()
    stack.worker(queue, DEPLOY_BUILD="fixed")  # the fix: the same application without the bug
    results = await asyncio.gather(*(outcome(client, run_id) for run_id in runs))
    for (run_id, amount), result in zip(runs.items(), results, strict=True):
        assert (result.status, result.output) == ("done", f"Paid {amount} on buggy")
        assert [line.split()[0] for line in stack.effects(run_id)] == ["buggy"]  # the tool ran once
    assert not [row for row in stack.cli_json("list", "--stuck") if row["run_id"] in runs]


BUG_KINDS = ("decide", "model", "model-answer", "tool", "tool-after")
"""A bug in each part of rein (tests/agents/deploys.py): applying a decision, the model activity's own code,
the tool activity's own code before the tool runs, and after it ran."""


async def test_a_bug_in_each_part_of_rein_waits_for_the_fix_with_nobody_acting(stack: Stack, client: ReinClient):
    """Each bug holds its runs open and says so (`rein list --stuck`, the run's status); the fixed build
    carries every run on with nobody sending `retry`; every tool runs exactly once; no decision is lost."""
    queues = {kind: f"bug-{kind}-{uuid.uuid4().hex[:6]}" for kind in BUG_KINDS}
    buggy = [stack.worker(queue, DEPLOY_BUG=kind, DEPLOY_BUILD="buggy") for kind, queue in queues.items()]
    runs: dict[str, tuple[str, int]] = {}
    for i, (kind, queue) in enumerate(queues.items()):
        runs[await start(client, "deploy-pay", queue, 40 + i)] = (kind, 40 + i)
        runs[await start(client, "deploy-pay-ask", queue, 50 + i)] = (kind, 50 + i)
    by_kind = {kind: [r for r, (k, _) in runs.items() if k == kind] for kind in BUG_KINDS}
    asked = [r for r in runs if r.startswith("deploy-pay-ask")]

    # A decision whose application hits the bug: sent as a signal by a stock client, it stays in history.
    decide_ask = next(r for r in by_kind["decide"] if r in asked)
    await poll(lambda: status_is(client, decide_ask, "waiting_approval"), "the run to wait for approval", timeout=120)
    await client.client.get_workflow_handle(decide_ask).signal("approve", {"approver": "ops"})
    # The other builds' runs that ask are approved wherever they come to wait (after the fix, for `model`).
    approvals = [asyncio.ensure_future(approve_when_waiting(client, r)) for r in asked if r != decide_ask]

    expect_stuck = {decide_ask, *by_kind["model"], *by_kind["model-answer"], *by_kind["tool"]}

    def listed() -> dict[str, dict]:
        rows = {row["run_id"]: row for row in stack.cli_json("list", "--stuck")}
        return rows if expect_stuck <= set(rows) else {}

    stuck = await poll(listed, "the buggy runs listed by `rein list --stuck`", timeout=120, interval=0.5)
    for run_id in expect_stuck:
        assert "deployed bug" in stuck[run_id]["error"], stuck[run_id]
        description = await client.client.get_workflow_handle(run_id).describe()
        assert description.status == WorkflowExecutionStatus.RUNNING  # open: nothing lost
    for run_id in by_kind["model"] + by_kind["model-answer"]:  # held up in an activity: the run itself says so
        view = await client.status(run_id)
        assert view.status == "stuck" and "deployed bug" in view.stuck, view
        assert stack.effects(run_id) == []
    for run_id in by_kind["tool"]:
        assert stack.effects(run_id) == []  # the bug struck before the tool ran

    for worker in buggy:
        worker.kill()
    for queue in queues.values():
        stack.worker(queue, DEPLOY_BUILD="fixed")
    await asyncio.gather(*approvals)
    results = await asyncio.gather(*(outcome(client, run_id) for run_id in runs))
    for (run_id, (kind, amount)), result in zip(runs.items(), results, strict=True):
        effects = [line.split()[0] for line in stack.effects(run_id)]
        assert len(effects) == 1, (run_id, effects)  # each tool ran exactly once
        assert (result.status, result.output) == ("done", f"Paid {amount} on {effects[0]}"), (run_id, kind)
        if kind in ("model", "model-answer", "tool") or run_id == decide_ask:
            assert effects == ["fixed"], (run_id, kind)  # only the fixed build got past the bug
    assert stack.effects(next(r for r in by_kind["tool-after"]))[0].startswith("buggy")  # ran once, kept
    assert not [row for row in stack.cli_json("list", "--stuck") if row["run_id"] in runs]


def _current(stack: Stack, deployment: str) -> str | None:
    proc = stack.cli("deployment", "status", "--deployment", deployment, "--json")
    return json.loads(proc.stdout)["current"] if proc.returncode in (0, 9) else None  # 9: a build kept out (said)


async def _pinned(client: ReinClient, run_id: str) -> tuple[str, str] | None:
    return pinned_build(await client.client.get_workflow_handle(run_id).describe())


async def test_a_fixed_build_carries_on_every_run_the_buggy_one_stopped(stack: Stack, client: ReinClient):
    """A buggy build (a build id of its own) is current; its runs get stuck on the bug or wait for a person. A fixed
    build starts beside it: it replays their histories, makes itself current, and every run moves to it at its next
    task (AUTO_UPGRADE): the stuck ones by themselves, the waiting ones when the person answers, although the buggy
    build still runs. Nobody runs set-current, retry or update-options. Each tool runs once."""
    queue = f"fix-{uuid.uuid4().hex[:6]}"
    deployment = deployment_of(queue)
    stack.worker(queue, DEPLOY_BUG="machine", REIN_BUILD_ID="buggy")
    await poll(lambda: _current(stack, deployment) == "buggy", "the first build to make itself current", timeout=60)
    stuck = {await start(client, "deploy-pay", queue, amount): amount for amount in (61, 62)}
    waiting = {await start(client, "deploy-pay-ask", queue, amount): amount for amount in (71, 72)}
    await poll(lambda: all_waiting(client, list(waiting)), "the asking runs to wait for approval", timeout=120)
    await poll(lambda: set(stuck) <= {row["run_id"] for row in stack.cli_json("list", "--stuck")},
               "the buggy build's runs to be stuck", timeout=120, interval=0.5)

    fixed = stack.worker(queue, REIN_BUILD_ID="fixed")
    await poll(lambda: _current(stack, deployment) == "fixed", "the fixed build to make itself current", timeout=60)
    # The routing changes before the build logs that it did: the line may come a moment after the status says so.
    await says(fixed, "build fixed is current (was buggy; it replayed the 4 runs that move to it)",
               "the fixed build to say it is current", timeout=60)
    results = await asyncio.gather(*(outcome(client, run_id) for run_id in stuck))
    for (run_id, amount), result in zip(stuck.items(), results, strict=True):
        assert (result.status, result.output) == ("done", f"Paid {amount} on buggy")  # the tool's own answer
        assert [line.split()[0] for line in stack.effects(run_id)] == ["buggy"]  # ran once, before the bug struck
        assert await _pinned(client, run_id) is None  # moved by Temporal's routing, not by an override
    await asyncio.gather(*(client.approve(run_id, wait=True) for run_id in waiting))
    for run_id, amount in waiting.items():
        assert (await outcome(client, run_id)).output == f"Paid {amount} on fixed"
        assert [line.split()[0] for line in stack.effects(run_id)] == ["fixed"]
    assert (await outcome(client, await start(client, "deploy-pay", queue, 81))).output == "Paid 81 on fixed"


async def test_pinned_on_request_each_run_finishes_on_its_build(stack: Stack, client: ReinClient):
    """REIN_VERSIONING=pinned: a rolling deploy leaves each run on the build it started on; the old build drains."""
    queue = f"roll-{uuid.uuid4().hex[:6]}"
    deployment = deployment_of(queue)
    old = stack.worker(queue, REIN_BUILD_ID="build-a", REIN_VERSIONING="pinned")
    await poll(lambda: _current(stack, deployment) == "build-a", "the first build to make itself current", timeout=60)
    started = await start_all(client, queue, range(6), "build-a")
    waiting_on_old = [r for r in started if r.startswith("deploy-pay-ask")]
    await poll(lambda: all_waiting(client, waiting_on_old), "the old build's runs to wait for approval", timeout=120)

    stack.worker(queue, REIN_BUILD_ID="build-b", REIN_VERSIONING="pinned")  # a new build: current by itself
    await poll(lambda: _current(stack, deployment) == "build-b", "the new build to become current", timeout=60)
    started.update(await start_all(client, queue, range(200, 206), "build-b"))
    await asyncio.gather(*(approve_when_waiting(client, r) for r in started if r.startswith("deploy-pay-ask")))
    results = await asyncio.gather(*(outcome(client, run_id) for run_id in started))
    for (run_id, (amount, build)), result in zip(started.items(), results, strict=True):
        assert (result.status, result.output) == ("done", f"Paid {amount} on {build}"), run_id
        assert [line.split()[0] for line in stack.effects(run_id)] == [build], run_id
    status = json.loads(stack.cli("deployment", "status", "--deployment", deployment, "--json").stdout)
    assert {v["build_id"]: v["behavior"] for v in status["versions"]} == {"build-a": "pinned", "build-b": "pinned"}
    assert not [e async for e in client.client.list_workflows(
        f'TemporalWorkerDeploymentVersion="{deployment}:build-a" AND ExecutionStatus="Running"')]
    old.stop()


async def test_a_decision_for_a_run_whose_build_stopped_is_not_sent(stack: Stack, client: ReinClient, monkeypatch):
    """A run pinned to a build whose workers stopped waits for that build; a newer build polling the same
    queue does not serve it. The decision is refused (nothing sent, as with no worker at all), not left
    waiting on the server; the old build back, the same decision goes through on it."""
    monkeypatch.setenv("REIN_WORKER_GRACE_S", "0")
    monkeypatch.setenv("REIN_POLLER_FRESH_S", "8")  # the module's server re-polls every 5 s: unseen for 8 s is gone
    queue = f"gone-{uuid.uuid4().hex[:6]}"
    deployment = deployment_of(queue)
    old = stack.worker(queue, REIN_BUILD_ID="build-a", REIN_VERSIONING="pinned")
    await poll(lambda: _current(stack, deployment) == "build-a", "the first build to make itself current", timeout=60)
    run_id = await start(client, "deploy-pay-ask", queue, 31)
    await poll(lambda: status_is(client, run_id, "waiting_approval"), f"{run_id} to wait for approval", timeout=120)

    stack.worker(queue, REIN_BUILD_ID="build-b", REIN_VERSIONING="pinned")
    await poll(lambda: _current(stack, deployment) == "build-b", "the new build to become current", timeout=60)
    old.stop()
    # The server lists a stopped worker's poller after its last poll, until it is older than REIN_POLLER_FRESH_S.
    await poll(lambda: _not_served(client, run_id), f"{run_id}'s build to be seen gone", timeout=150, interval=1)
    with pytest.raises(NoWorker, match="was not sent") as refused:
        await asyncio.wait_for(client.approve(run_id), 30)
    assert f"pinned to build build-a of deployment {deployment}" in str(refused.value)
    assert f"REIN_DEPLOYMENT={deployment} REIN_BUILD_ID=build-a" in str(refused.value)
    proc = await asyncio.to_thread(stack.cli, "approve", run_id)
    assert proc.returncode == EXIT_NO_WORKER and proc.stderr.startswith("rein: no worker serves run"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "build-a" in proc.stderr and "--wait" in proc.stderr
    assert (await client.status(run_id)).status == "waiting_approval"  # from its history
    shown = " ".join((await asyncio.to_thread(stack.cli, "status", run_id)).stdout.split())
    assert (f"build build-a of deployment {deployment} (pinned to it: its workers run their runs PINNED); no worker of it "
            "has polled since ") in shown, shown
    assert ("(workers of build build-b poll its queue: they do not serve it); what moves it: `temporal workflow "
            f"update-options --workflow-id {run_id} --versioning-override-behavior auto_upgrade`") in shown, shown

    stack.worker(queue, REIN_BUILD_ID="build-a", REIN_VERSIONING="pinned")
    await poll(lambda: client.worker_serves(run_id), f"{run_id}'s build to serve it again", timeout=60)
    await client.approve(run_id, wait=True)
    result = await outcome(client, run_id)
    assert (result.status, result.output) == ("done", "Paid 31 on build-a")
    assert [line.split()[0] for line in stack.effects(run_id)] == ["build-a"]


async def _not_served(client: ReinClient, run_id: str) -> bool:
    return not await client.worker_serves(run_id)


async def test_a_rollback_by_command_moves_what_the_old_build_replays_and_pins_the_rest(stack: Stack,
                                                                                      client: ReinClient):
    """Build a, then b (current by itself). b's runs: some started before b's change (a replays them), some after
    it (a new patch a cannot replay). `rein deployment rollback` asks a's workers to replay them first: those a
    replays move to a, the others stay pinned to b (a line each) and finish there; new runs go to a."""
    queue = f"rollback-{uuid.uuid4().hex[:6]}"
    deployment = deployment_of(queue)
    stack.worker(queue, REIN_BUILD_ID="a", DEPLOY_BUILD="old")  # a cannot replay b's new patch
    await poll(lambda: _current(stack, deployment) == "a", "the first build to make itself current", timeout=60)
    plain = {await start(client, "deploy-pay-ask", queue, amount): amount for amount in (91, 92)}
    await poll(lambda: all_waiting(client, list(plain)), "a's runs to wait for approval", timeout=120)
    b = stack.worker(queue, REIN_BUILD_ID="b", DEPLOY_NEW_PATCH="1")
    await poll(lambda: _current(stack, deployment) == "b", "the new build to make itself current", timeout=60)
    patched = {await start(client, "deploy-pay-ask", queue, amount): amount for amount in (95, 96)}
    await poll(lambda: all_waiting(client, list(patched)), "b's runs to wait for approval", timeout=120)

    proc = await asyncio.to_thread(stack.cli, "deployment", "rollback", "--deployment", deployment)
    assert proc.returncode == 0, proc.stderr
    assert _current(stack, deployment) == "a"
    lines = proc.stdout.strip().splitlines()
    assert sorted(line.split()[1] for line in lines[:-1]) == sorted(patched), proc.stdout  # one line each
    # a meets b's marker where it asks none, or asks another (the inbox's) first: either says b's change
    assert all("(nondeterminism: " in line and "change deploy-test-new-change" in line.replace("Change id", "change")
               and line.endswith("stays pinned to b: a cannot replay it") for line in lines[:-1]), proc.stdout
    assert lines[-1].startswith(f"deployment {deployment} current: a (was b); "), proc.stdout
    for run_id in patched:
        assert await _pinned(client, run_id) == (deployment, "b")
    await asyncio.gather(*(client.approve(run_id, wait=True) for run_id in [*plain, *patched]))
    new = await start(client, "deploy-pay", queue, 97)
    for run_id, amount in {**plain, **patched}.items():
        where = "b" if run_id in patched else "a"
        assert (await outcome(client, run_id)).output == f"Paid {amount} on {where}"
        assert [line.split()[0] for line in stack.effects(run_id)] == [where]
    assert (await outcome(client, new)).output == "Paid 97 on a"
    b.stop()


async def test_replicas_of_a_new_build_promote_it_once(stack: Stack, client: ReinClient):
    """Three workers of a new build start together: one set-current (the conflict token turns the others away),
    after one replay proof each; no worker scans again afterwards."""
    queue = f"replicas-{uuid.uuid4().hex[:6]}"
    deployment = deployment_of(queue)
    stack.worker(queue, REIN_BUILD_ID="a")
    await poll(lambda: _current(stack, deployment) == "a", "the first build to make itself current", timeout=60)
    replicas = [WorkerProcess(stack.server.address, AGENTS, queue, stack.root / f"replica-{i}-{queue}.log",
                              DEPLOY_DIR=str(stack.root), REIN_DEPLOYMENT=deployment, REIN_BUILD_ID="b")
                for i in range(3)]
    stack.workers.extend(replicas)
    await asyncio.gather(*(asyncio.to_thread(r.start) for r in replicas))
    await poll(lambda: _current(stack, deployment) == "b", "the new build to be current", timeout=60)
    logs = [r.log.read_text() for r in replicas]
    assert sum("build b is current" in log for log in logs) == 1, logs


async def test_a_new_build_that_cannot_replay_an_open_run_stays_out_of_the_routing(stack: Stack, client: ReinClient):
    """Build b (a change behind a new patch) is current and a run waits on it. Build c lacks b's change: its
    promotion replays b's open runs first, fails on that one, says so in one line (the run, the mismatch, the
    command that shows it) and leaves the routing alone; the run finishes on b."""
    queue = f"proof-{uuid.uuid4().hex[:6]}"
    deployment = deployment_of(queue)
    stack.worker(queue, REIN_BUILD_ID="b", DEPLOY_NEW_PATCH="1")
    await poll(lambda: _current(stack, deployment) == "b", "the first build to make itself current", timeout=60)
    run_id = await start(client, "deploy-pay-ask", queue, 41)
    await poll(lambda: status_is(client, run_id, "waiting_approval"), f"{run_id} to wait for approval", timeout=120)

    c = stack.worker(queue, REIN_BUILD_ID="c", DEPLOY_BUILD="old")
    line = (f"rein deployment {deployment}: build c is not current: it cannot replay 1 of the 1 runs that would move to "
            f"it: run {run_id} (nondeterminism: ")
    await says(c, line, "the new build to refuse its promotion", timeout=60)
    said = next(entry for entry in c.log.read_text().splitlines() if line in entry)
    assert f"see it with `rein replay --query 'WorkflowId=\"{run_id}\"'`; it serves only runs pinned to it" in said
    assert _current(stack, deployment) == "b"
    status = await asyncio.to_thread(stack.cli, "deployment", "status", "--deployment", deployment)
    assert status.returncode == 9, status.stdout  # a build that cannot take the runs: said where people look
    assert (f"deployment {deployment}: build c is not current: it cannot replay 1 of the 1 runs that would move to it: "
            f"run {run_id} (nondeterminism: ") in status.stdout.replace("\n", ""), status.stdout
    await client.approve(run_id, wait=True)
    assert (await outcome(client, run_id)).output == "Paid 41 on b"
    c.stop()


async def test_a_check_that_runs_out_of_time_keeps_the_build_out(stack: Stack, client: ReinClient):
    """REIN_PROMOTE_TIMEOUT_S bounds a new build's check: one that has not replayed every run by then is not
    current, and says how far it got, in its log and in `rein deployment status` (exit 9)."""
    queue = f"slow-{uuid.uuid4().hex[:6]}"
    deployment = deployment_of(queue)
    stack.worker(queue, REIN_BUILD_ID="a")
    await poll(lambda: _current(stack, deployment) == "a", "the first build to make itself current", timeout=60)
    runs = [await start(client, "deploy-pay-ask", queue, amount) for amount in (1, 2)]
    await poll(lambda: all_waiting(client, runs), "a's runs to wait for approval", timeout=120)
    b = stack.worker(queue, REIN_BUILD_ID="b", REIN_PROMOTE_TIMEOUT_S="0.05")
    line = f"rein deployment {deployment}: build b is not current: it replayed 0 of the 2 runs that would move to it within 0.05 s"
    await says(b, line, "the new build to say it ran out of time", timeout=180)
    status = await asyncio.to_thread(stack.cli, "deployment", "status", "--deployment", deployment)
    assert status.returncode == 9 and _current(stack, deployment) == "a", status.stdout
    assert "build b is not current: it replayed 0 of the 2 runs that would move to it within 0.05 s" in status.stdout
    b.stop()

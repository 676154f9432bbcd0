"""This build beside the previous landed one (tests/support/old_build.py), versioning off, eager activities off.

One dev server with `system.enableActivityEagerExecution=false`, so every activity goes through
the task queue and a worker of either build may take it. Worker processes of each build serve the
same application (tests/agents/deploys.py): each run's prompt is `<run id> <amount>`, its answer
`Paid <amount> on <build>` names the build its tool ran on, and every real execution of the tool
is a line in `<dir>/<run id>.effects`. Every scenario checks 0 stuck, 0 wrong results, each tool
run exactly once; then every history it recorded replays on both builds' AgentWorkflow.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from rein.client import ReinClient, connect
from rein.server import TUNED_DYNAMIC_CONFIG, DevServer, start_dev_server
from rein.temporal import ReinPlugin
from rein.workflows import AgentWorkflow
from tests.support.old_build import OLD_BUILD, OldWorkerProcess, rein_file, replay_with_old_build, unpack_old_build
from tests.support.processes import ROOT, WorkerProcess
from tests.support.waiting import poll

AGENTS = ["tests.agents.deploys:pay_agent", "tests.agents.deploys:pay_ask"]
NO_EAGER_ACTIVITIES = {**TUNED_DYNAMIC_CONFIG, "system.enableActivityEagerExecution": "false"}


class Builds:
    """A dev server, the old build unpacked from git, and workers of either build."""

    def __init__(self, root: Path):
        self.root = root
        self.old_tree = unpack_old_build(root / "old")
        self.server: DevServer = start_dev_server(log_path=root / "server.log", dynamic_config=NO_EAGER_ACTIVITIES)
        self.workers: list[WorkerProcess] = []
        self.histories: dict[str, dict] = {}

    def worker(self, build: str, queue: str) -> WorkerProcess:
        log = self.root / f"worker-{len(self.workers)}-{build}.log"
        env = {"DEPLOY_DIR": str(self.root), "DEPLOY_BUILD": build}
        if build == "old":
            proc: WorkerProcess = OldWorkerProcess(self.old_tree, self.server.address, AGENTS, queue, log, **env)
        else:
            proc = WorkerProcess(self.server.address, AGENTS, queue, log, **env)
        self.workers.append(proc)
        return proc.start()

    def effects(self, run_id: str) -> list[str]:
        path = self.root / f"{run_id}.effects"
        return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory):
    b = Builds(tmp_path_factory.mktemp("compat"))
    try:
        yield b
    finally:
        for w in b.workers:
            w.kill()
        b.server.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def client(builds: Builds) -> ReinClient:
    return ReinClient(await connect(builds.server.address))


def test_the_old_build_is_the_one_its_workers_import(builds: Builds):
    assert rein_file(builds.old_tree).startswith(str(builds.old_tree / "rein" / "workflows"))
    assert rein_file(None).startswith(str(ROOT / "workflows"))


async def start_runs(client: ReinClient, queue: str, pay: int, ask: int) -> dict[str, int]:
    """`pay` runs that need no approval and `ask` runs whose tool waits for one: run id -> amount."""
    runs: dict[str, int] = {}
    for n in range(pay + ask):
        agent = "deploy-pay" if n < pay else "deploy-pay-ask"
        run_id = f"{agent}-{uuid.uuid4().hex[:8]}"
        amount = 1000 + n
        await client.client.start_workflow("AgentWorkflow", {"agent": agent, "prompt": f"{run_id} {amount}"},
                                           id=run_id, task_queue=queue)
        runs[run_id] = amount
    return runs


def asking(runs: dict[str, int]) -> list[str]:
    return [run_id for run_id in runs if run_id.startswith("deploy-pay-ask")]


async def wait_for_approval(client: ReinClient, run_ids: list[str]) -> None:
    async def all_waiting() -> bool:
        views = await asyncio.gather(*(client.status(r) for r in run_ids))
        return all(v.status == "waiting_approval" for v in views)

    try:
        await poll(all_waiting, f"{len(run_ids)} runs to wait for approval", timeout=120, interval=0.2)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{await explain(client, run_ids)}") from None


async def explain(client: ReinClient, run_ids: list[str]) -> str:
    """Each run's last failed workflow task or activity attempt: why a run is stuck or answers wrongly."""
    lines = []
    for run_id in run_ids:
        history = await client.client.get_workflow_handle(run_id).fetch_history()
        failures = [f"{kind}: {attrs['failure'].get('message', '')[:300]}"
                    for event in history.to_json_dict()["events"] for kind, attrs in event.items()
                    if kind in ("workflowTaskFailedEventAttributes", "activityTaskFailedEventAttributes")
                    and "failure" in attrs]
        lines.append(f"{run_id}: {failures[-1] if failures else 'no failure recorded'}")
    return "\n".join(lines)


async def check_finished(builds: Builds, client: ReinClient, runs: dict[str, int], tool_builds: set[str]) -> None:
    """Each run done with the answer its own tool gave, the tool run once, on one of `tool_builds`."""
    for run_id, amount in runs.items():
        try:
            result = await asyncio.wait_for(client.result(run_id), 120)
        except TimeoutError:
            raise AssertionError(f"{run_id} did not finish:\n{await explain(client, [run_id])}") from None
        effects = builds.effects(run_id)
        assert len(effects) == 1, (run_id, effects)
        assert effects[0] in tool_builds, (run_id, effects)
        assert (result.status, result.output) == ("done", f"Paid {amount} on {effects[0]}"), run_id
        history = await client.client.get_workflow_handle(run_id).fetch_history()
        builds.histories[run_id] = history.to_json_dict()


async def test_upgrade_in_place(builds: Builds, client: ReinClient):
    """The old build takes runs, some wait for approval; it stops; this build carries them on."""
    queue = f"upgrade-{uuid.uuid4().hex[:6]}"
    old = builds.worker("old", queue)
    runs = await start_runs(client, queue, pay=6, ask=8)
    await wait_for_approval(client, asking(runs))
    for run_id in asking(runs)[:3]:
        await client.approve(run_id)  # some approved while the old build still serves them
    old.stop()
    builds.worker("new", queue)
    for run_id in asking(runs)[3:]:
        await client.approve(run_id)
    await check_finished(builds, client, runs, {"old", "new"})
    assert {builds.effects(r)[0] for r in asking(runs)[3:]} == {"new"}


async def test_rollback_then_forward_again(builds: Builds, client: ReinClient):
    """This build starts runs; it stops; the old build carries them on; then this build again."""
    queue = f"rollback-{uuid.uuid4().hex[:6]}"
    new = builds.worker("new", queue)
    runs = await start_runs(client, queue, pay=4, ask=10)
    await wait_for_approval(client, asking(runs))
    new.stop()
    old = builds.worker("old", queue)  # the rollback
    for run_id in asking(runs)[:5]:
        await client.approve(run_id)
    await check_finished(builds, client, {r: runs[r] for r in asking(runs)[:5]}, {"old"})
    old.stop()
    builds.worker("new", queue)  # forward again
    for run_id in asking(runs)[5:]:
        await client.approve(run_id)
    await check_finished(builds, client, runs, {"old", "new"})
    assert {builds.effects(r)[0] for r in asking(runs)[5:]} == {"new"}


async def test_mixed_builds_on_one_queue(builds: Builds, client: ReinClient):
    """Both builds poll one queue while runs go through: activities of one build's runs run on the other."""
    queue = f"mixed-{uuid.uuid4().hex[:6]}"
    workers = [builds.worker("old", queue), builds.worker("new", queue)]
    runs = await start_runs(client, queue, pay=8, ask=8)
    await wait_for_approval(client, asking(runs))
    for run_id in asking(runs):
        await client.approve(run_id)
    await check_finished(builds, client, runs, {"old", "new"})
    crossed = [r for r in runs if crossing_activities(builds.histories[r])]
    assert crossed, "no activity ran on another worker than its workflow task's: the builds did not mix"
    identities = {f"{w.process.pid}@" for w in workers}
    assert all(any(i.startswith(tuple(identities)) for i in crossing_activities(builds.histories[r]))
               for r in crossed)


def crossing_activities(history: dict) -> list[str]:
    """Identities of workers that started an activity scheduled by another worker's workflow task."""
    task_identity: dict[str, str] = {}
    scheduled_by: dict[str, str] = {}
    crossing = []
    for event in history["events"]:
        attrs = {k: v for k, v in event.items() if k.endswith("EventAttributes")}
        for kind, a in attrs.items():
            if kind == "workflowTaskCompletedEventAttributes":
                task_identity[event["eventId"]] = a.get("identity", "")
            elif kind == "activityTaskScheduledEventAttributes":
                scheduled_by[event["eventId"]] = task_identity.get(a["workflowTaskCompletedEventId"], "")
            elif kind == "activityTaskStartedEventAttributes":
                if a.get("identity") != scheduled_by.get(a["scheduledEventId"]):
                    crossing.append(a.get("identity", ""))
    return crossing


async def test_every_history_replays_on_both_builds(builds: Builds, client: ReinClient):
    """Histories touched by both builds: the same command sequence, whichever build replays them."""
    assert len(builds.histories) >= 40, "run the scenarios first (this module, in order)"
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[ReinPlugin(agents=[])])
    for run_id, data in builds.histories.items():
        result = await replayer.replay_workflow(WorkflowHistory.from_json(run_id, data), raise_on_replay_failure=False)
        assert result.replay_failure is None, (run_id, result.replay_failure)
    failures = replay_with_old_build(builds.old_tree, builds.histories)
    assert failures == {run_id: None for run_id in builds.histories}, f"{OLD_BUILD} cannot replay these"

"""This build beside the previous landed one (tests/support/old_build.py), versioning off, eager activities off.

One dev server with `system.enableActivityEagerExecution=false`, so every activity goes through
the task queue and a worker of either build may take it, and with a stuck run's workflow task tried
again within seconds (STUCK_RUNS_RETRY_SOON). Worker processes of each build serve the
same application (tests/agents/deploys.py): each run's prompt is `<run id> <amount>`, its answer
`Paid <amount> on <build>` names the build its tool ran on, and every real execution of the tool
is a line in `<dir>/<run id>.effects`. Every scenario checks 0 stuck, 0 wrong results, each tool
run exactly once; then every history it recorded replays on both builds' AgentWorkflow.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio import workflow
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from rein import Agent, LoopConfig, MockProvider, ToolCall, create_worker
from rein.client import DecisionRejected, ReinClient, connect
from rein.durable.embedded_server import DevServer, start_dev_server
from rein.temporal.history import NONDETERMINISM
from rein.workflows import AgentWorkflow
from tests.support.old_build import (
    OLD_BUILD,
    OLDER_BUILD,
    OldWorkerProcess,
    rein_file,
    replay_in_build,
    unpack_old_build,
)
from tests.support.processes import ROOT, STUCK_RUNS_RETRY_SOON, WorkerProcess
from tests.support.tools import add
from tests.support.waiting import poll

AGENTS = ["tests.agents.deploys:pay_agent", "tests.agents.deploys:pay_ask"]
VARIANTS = {"new+patch": {"DEPLOY_NEW_PATCH": "1"}}
"""This build with a change the old one cannot replay: each wait asks a new patch (tests/agents/deploys.py).
(Without it the old build cannot replay this build's runs either: docs/deploys.md, "One way to version".)"""
THIS_BUILD = ("tests.agents.deploys",)
"""What a process of this build imports to replay that change (this one does in the `builds` fixture)."""
NO_EAGER_ACTIVITIES = {**STUCK_RUNS_RETRY_SOON, "system.enableActivityEagerExecution": "false"}


class Builds:
    """A dev server, the old build unpacked from git, and workers of either build on one task queue.

    `deploy(build)` leaves exactly one worker, of that build, polling (a running one is kept, so
    scenarios run in order share worker processes); `add(build)` starts one more beside them.
    """

    queue = f"compat-{uuid.uuid4().hex[:6]}"

    def __init__(self, root: Path):
        self.root = root
        self.old_tree = unpack_old_build(root / "old")
        self.older_tree = unpack_old_build(root / "older", OLDER_BUILD)
        self.server: DevServer = start_dev_server(log_path=root / "server.log", dynamic_config=NO_EAGER_ACTIVITIES)
        self.workers: list[WorkerProcess] = []
        self.polling: dict[str, WorkerProcess] = {}
        self.builds: dict[str, str] = {}
        self.histories: dict[str, dict] = {}

    def deploy(self, build: str) -> None:
        for other in [b for b in self.polling if b != build]:
            self.polling.pop(other).stop()
        if build not in self.polling:
            self.add(build)

    def add(self, build: str) -> WorkerProcess:
        self.polling[build] = self.worker(build, self.queue)
        return self.polling[build]

    def worker(self, build: str, queue: str) -> WorkerProcess:
        log = self.root / f"worker-{len(self.workers)}-{build}.log"
        env = {"DEPLOY_DIR": str(self.root), "DEPLOY_BUILD": build.split("+")[0], **VARIANTS.get(build, {})}
        if build in ("old", "older"):
            tree = self.old_tree if build == "old" else self.older_tree
            proc: WorkerProcess = OldWorkerProcess(tree, self.server.address, AGENTS, queue, log, **env)
        else:  # unversioned, as the old build is: this module deploys without Worker Versioning
            proc = WorkerProcess(self.server.address, AGENTS, queue, log, REIN_DEPLOYMENT="none", **env)
        self.workers.append(proc)
        proc.start()
        self.builds[f"{proc.process.pid}@"] = build
        return proc

    def build_of(self, identity: str) -> str:
        """Which build a worker identity (temporalio's default: `<pid>@<host>`) belongs to."""
        return next(build for prefix, build in self.builds.items() if identity.startswith(prefix))

    def effects(self, run_id: str) -> list[str]:
        path = self.root / f"{run_id}.effects"
        return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory):
    # This build's patched wait: a query the old build's worker cannot answer is replayed in this process.
    import tests.agents.deploys  # noqa: F401

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


async def approve(client: ReinClient, run_id: str) -> None:
    try:
        await client.approve(run_id, wait=True)  # a busy worker under load may take it after the 2 s grace
    except DecisionRejected as err:
        raise AssertionError(f"{err}\n{await explain(client, [run_id])}") from None


async def approved(client: ReinClient, run_id: str) -> bool:
    """Approves once the run's workflow task no longer fails (a stuck run refuses decisions meanwhile; `wait`:
    the server's answer, not DecisionQueued after the 2 s grace)."""
    try:
        await client.approve(run_id, wait=True)
    except DecisionRejected as err:
        if "Workflow Task in failed state" in str(err):
            return False
        raise
    return True


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

    async def check(run_id: str, amount: int) -> None:
        try:  # the run's outcome: client.result would also replay it on a worker for its session and steps
            result = await asyncio.wait_for(client.outcome(client.handle(run_id)), 120)
        except TimeoutError:
            raise AssertionError(f"{run_id} did not finish:\n{await explain(client, [run_id])}") from None
        effects = builds.effects(run_id)
        assert len(effects) == 1, (run_id, effects)
        assert effects[0] in tool_builds, (run_id, effects)
        assert (result.status, result.output) == ("done", f"Paid {amount} on {effects[0]}"), run_id
        history = await client.client.get_workflow_handle(run_id).fetch_history()
        builds.histories[run_id] = history.to_json_dict()

    await asyncio.gather(*(check(run_id, amount) for run_id, amount in runs.items()))


async def test_upgrade_in_place(builds: Builds, client: ReinClient):
    """The old build takes runs, some wait for approval; it stops; this build carries them on."""
    builds.deploy("old")
    runs = await start_runs(client, builds.queue, pay=6, ask=8)
    await wait_for_approval(client, asking(runs))
    for run_id in asking(runs)[:3]:
        await approve(client, run_id)  # some approved while the old build still serves them
    builds.deploy("new")
    for run_id in asking(runs)[3:]:
        await approve(client, run_id)
    await check_finished(builds, client, runs, {"old", "new"})
    assert {builds.effects(r)[0] for r in asking(runs)[3:]} == {"new"}


@pytest.mark.parametrize("new", ["new", "new+patch"])
async def test_rollback_then_forward_again(builds: Builds, client: ReinClient, new: str):
    """This build starts runs; it stops; the old build carries on every run whose history it can replay
    and starts runs of its own; the others wait, stuck but open and untouched (docs/deploys.md): exactly
    those its replayer cannot replay. Then this build carries all on. Every run this build started is
    stuck on the old build (a lean start without the old build's logic flag, the waiting timer's patch):
    the drain docs/deploys.md describes ("One way to version"); with the patched wait on, the same."""
    builds.deploy(new)
    runs = await start_runs(client, builds.queue, pay=2, ask=6)
    await wait_for_approval(client, asking(runs))
    builds.deploy("old")  # the rollback
    waiting = {r: (await client.client.get_workflow_handle(r).fetch_history()).to_json_dict() for r in asking(runs)}
    unreadable = {r for r, failure in replay_in_build(builds.old_tree, waiting).items() if failure}
    assert unreadable == set(waiting)

    later = await start_runs(client, builds.queue, pay=2, ask=2)
    await wait_for_approval(client, asking(later))
    stuck = set()

    async def decide(run_id: str) -> None:
        try:
            await client.approve(run_id, wait=True)
        except DecisionRejected as err:  # answered only once the run's failing task fails again
            assert "Workflow Task in failed state" in str(err), err
            stuck.add(run_id)

    await asyncio.gather(*(decide(r) for r in asking(runs)[:3] + asking(later)[:1]))
    assert stuck == unreadable & set(asking(runs)[:3])
    for run_id in stuck:
        description = await client.client.get_workflow_handle(run_id).describe()
        assert description.status == WorkflowExecutionStatus.RUNNING and not builds.effects(run_id)
    carried = [r for r in asking(runs)[:3] if r not in stuck] + asking(later)[:1] + list(later)[:2]
    await check_finished(builds, client, {r: {**runs, **later}[r] for r in carried}, {"old"})
    # A RunResult read through the old build's worker (no `rein.record` query there): the three queries.
    result = await client.result(carried[-1])
    assert [s.kind for s in result.steps] == ["model", "tool", "model"], result.steps
    assert result.session.messages[-1].content == result.output

    builds.deploy(new)  # forward again: the stuck runs' next task attempt goes to this build
    await asyncio.gather(*(poll(lambda r=r: approved(client, r), f"{r} to take a decision again", timeout=120,
                                interval=0.5) for r in stuck))
    for run_id in asking(runs)[3:] + asking(later)[1:]:
        await approve(client, run_id)
    await check_finished(builds, client, {**runs, **later}, {"old", "new"})
    assert {builds.effects(r)[0] for r in [*stuck, *asking(runs)[3:], *asking(later)[1:]]} == {"new"}


@pytest.mark.parametrize("old", ["old", "older"], ids=[f"beside-{OLD_BUILD}", f"beside-{OLDER_BUILD}"])
async def test_mixed_builds_on_one_queue(builds: Builds, client: ReinClient, old: str):
    """Both builds poll one queue while runs go through: each build runs activities the other scheduled.
    Neither build replays every run the other started (docs/deploys.md, "One way to version"): a task that
    lands on the wrong build fails and is retried until the right one takes it. Both builds answer a lean
    first call with the agent's description, so no run asks describe_agent."""
    builds.deploy("new")
    builds.add(old)
    runs: dict[str, int] = {}
    for _batch in range(4):  # which worker takes a task is the server's choice: a batch may not mix both ways
        batch = await start_runs(client, builds.queue, pay=8, ask=8)
        await wait_for_approval(client, asking(batch))
        # A run's next task may go to a build that cannot replay it (fails, retried): it takes decisions again.
        await asyncio.gather(*(poll(lambda r=r: approved(client, r), f"{r} to take its decision", timeout=120,
                                    interval=0.5) for r in asking(batch)))
        await check_finished(builds, client, batch, {old, "new"})
        runs.update(batch)
        crossed = {(builds.build_of(by), builds.build_of(ran))
                   for r in runs for by, ran in crossing_activities(builds.histories[r])}
        lean = [r for r in runs if builds.build_of(first_task_identity(builds.histories[r])) == "new"]
        old_first_calls = [r for r in lean if builds.build_of(first_call_identity(builds.histories[r])) == old]
        if crossed == {(old, "new"), ("new", old)} and old_first_calls:
            break
    assert crossed == {(old, "new"), ("new", old)}, "the builds did not mix (eager activities on?)"
    assert old_first_calls, f"no lean run's first call reached the {old} build"
    described = {r for r in lean if any(e.get("markerRecordedEventAttributes", {}).get("markerName") == "core_local_activity"
                                        for e in builds.histories[r]["events"])}
    assert described == set(), (described, old_first_calls)


def first_call_identity(history: dict) -> str:
    """The worker that took the run's first model call."""
    first = next(e["eventId"] for e in history["events"] if "activityTaskScheduledEventAttributes" in e
                 and e["activityTaskScheduledEventAttributes"]["activityType"]["name"] == "rein.call_model")
    return next(e["activityTaskStartedEventAttributes"]["identity"] for e in history["events"]
                if e.get("activityTaskStartedEventAttributes", {}).get("scheduledEventId") == first)


@workflow.defn(name="AgentWorkflow")
class ChangedWorkflow(AgentWorkflow):
    """AgentWorkflow as a build that changed its command sequence without a patch would run it."""

    @workflow.run
    async def run(self, *args: Any) -> dict[str, Any]:
        await workflow.sleep(0.001)
        return await super().run(*args)


async def test_a_worker_that_cannot_replay_a_run_does_not_fail_its_queries(builds: Builds, client: ReinClient):
    """The query falls back to replaying the run in the client (as with no worker), with the client's code."""
    queue = f"query-{uuid.uuid4().hex[:6]}"
    agent = Agent(provider=MockProvider([[ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})], "3"]),
                  tools=[add], name="compat-query", config=LoopConfig(permission="ask"))
    async with create_worker(client.client, [agent], task_queue=queue):
        await client.client.start_workflow("AgentWorkflow", {"agent": "compat-query", "prompt": "1 + 2?"},
                                           id=queue, task_queue=queue)
        await wait_for_approval(client, [queue])
    changed = Worker(client.client, task_queue=queue, workflows=[ChangedWorkflow],
                     workflow_runner=UnsandboxedWorkflowRunner(), max_cached_workflows=0)
    async with changed:
        with pytest.raises(WorkflowQueryFailedError, match="Nondeterminism"):
            await client.client.get_workflow_handle(queue).query("status")
        view = await client.status(queue)
        assert (view.status, [c.name for c in view.pending_tool_calls]) == ("waiting_approval", ["add"])
        assert [m.role for m in (await client.session(queue)).messages] == ["user", "assistant"]


def crossing_activities(history: dict) -> list[tuple[str, str]]:
    """(scheduled by, started by) worker identities of activities that ran on another worker."""
    task_identity: dict[str, str] = {}
    scheduled_by: dict[str, str] = {}
    crossing = []
    for event in history["events"]:
        if a := event.get("workflowTaskCompletedEventAttributes"):
            task_identity[event["eventId"]] = a["identity"]
        elif a := event.get("activityTaskScheduledEventAttributes"):
            scheduled_by[event["eventId"]] = task_identity[a["workflowTaskCompletedEventId"]]
        elif (a := event.get("activityTaskStartedEventAttributes")) and a["identity"] != (
                by := scheduled_by[a["scheduledEventId"]]):
            crossing.append((by, a["identity"]))
    return crossing


async def test_every_history_replays_on_both_builds(builds: Builds):
    """Histories touched by both builds replay on this one, but for runs the older build started (they asked
    their agent first with no marker: they drain on their own build); on the old build every run it started
    does (the same command sequence, whatever this build did later); a run this build started does not (a lean
    start without the old build's flag, this build's patches): a nondeterminism error each."""
    assert len(builds.histories) >= 40, "run the scenarios first (this module, in order)"
    started_by = {r: builds.build_of(first_task_identity(h)) for r, h in builds.histories.items()}
    here = replay_in_build(None, builds.histories, THIS_BUILD)
    unreplayable, drained = {r for r, f in here.items() if f}, {r for r, b in started_by.items() if b == "older"}
    assert unreplayable == drained, {r: (started_by[r], (here[r] or "")[:300]) for r in unreplayable ^ drained}
    assert all(NONDETERMINISM in f for f in here.values() if f)
    failures = {r: f for r, f in replay_in_build(builds.old_tree, builds.histories).items() if f}
    started_old = {r for r, b in started_by.items() if b == "old"}
    assert len(started_old) >= 15 and len(builds.histories) - len(started_old) >= 15
    assert not started_old & set(failures), {r: failures[r] for r in started_old & set(failures)}
    assert all(NONDETERMINISM in f for f in failures.values()), failures
    print(f"{len(builds.histories)} histories ({len(started_old)} started on {OLD_BUILD}): "
          f"{len(failures)} do not replay on {OLD_BUILD}")


def first_task_identity(history: dict) -> str:
    return next(e["workflowTaskCompletedEventAttributes"]["identity"] for e in history["events"]
                if "workflowTaskCompletedEventAttributes" in e)

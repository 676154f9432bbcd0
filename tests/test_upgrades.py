"""In-place upgrades from every build in the support window, with real worker processes (docs/deploys.md).

One dev server; for each build in the window (f732bd2, 27084f6, 81ba243) its tree unpacked from git and its
own `python worker.py`, unversioned, on a queue of its own, serving tests/agents/upgrades.py. Each build gets
four runs: one finished on it, one waiting for approval, one in its final model call, one that continued as
new and waits (tests/support/build_scenarios.py). Then its worker stops, this build's starts on the same
queue (unversioned), the waits are approved and the model call released: every run ends with the answer its
own tool gave, each tool ran once, and every run answers the `status` and `steps` queries from this build's
worker (the finished ones by replaying what the old build recorded). The builds upgrade side by side.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

import rein.workflows.loop as loop
import rein.workflows.window as window
from rein import Agent, LoopConfig, MockProvider, ToolCall
from rein.client import ReinClient, connect
from rein.durable.embedded_server import DevServer, start_dev_server
from rein.temporal import ReinPlugin
from tests.support.build_scenarios import AGENTS, bring_to_the_upgrade_point, start_scenarios
from tests.support.old_build import OldWorkerProcess, unpack_old_build, unversioned
from tests.support.processes import STUCK_RUNS_RETRY_SOON, WorkerProcess
from tests.support.waiting import poll, wait_status

WINDOW = ("f732bd2", "27084f6", "81ba243")


@dataclass
class Upgrade:
    """One build's upgrade: its runs (scenario -> run id, amount) and what came of them."""

    build: str
    root: Path
    runs: dict[str, tuple[str, int]] = field(default_factory=dict)
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    effects: dict[str, list[str]] = field(default_factory=dict)
    status: dict[str, dict[str, Any]] = field(default_factory=dict)
    steps: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    closed: dict[str, WorkflowExecutionStatus | None] = field(default_factory=dict)
    predecessor: WorkflowExecutionStatus | None = None
    """How the run `continued` continued from closed."""


async def upgrade(server: DevServer, client: Client, build: str, root: Path) -> Upgrade:
    root.mkdir()
    queue = f"upgrade-{build}"
    tree = await asyncio.to_thread(unpack_old_build, root / "old", build)
    old = OldWorkerProcess(tree, server.address, AGENTS, queue, root / "old.log", DEPLOY_BUILD=build,
                           DEPLOY_DIR=str(root), **unversioned(build))
    await asyncio.to_thread(old.start)
    done = Upgrade(build, root)
    try:
        scenarios = await start_scenarios(client, queue)
        finished = f"finished-{build}"
        await client.start_workflow("AgentWorkflow", {"agent": "upgrade-ask", "prompt": f"{finished} 99"},
                                    id=finished, task_queue=queue)
        first = await bring_to_the_upgrade_point(client, scenarios, root)
        done.predecessor = (await client.get_workflow_handle(scenarios["continued"], run_id=first).describe()).status
        await client.get_workflow_handle(finished).signal("approve", {})
        await asyncio.wait_for(client.get_workflow_handle(finished).result(), 120)
    finally:
        await asyncio.to_thread(old.stop)
    done.runs = {**{s: (r, 100 + n) for n, (s, r) in enumerate(scenarios.items())}, "finished": (finished, 99)}
    new = WorkerProcess(server.address, AGENTS, queue, root / "new.log", DEPLOY_BUILD="current", DEPLOY_DIR=str(root),
                        REIN_DEPLOYMENT="none")
    await asyncio.to_thread(new.start)
    try:
        reins = ReinClient(client, queue)
        (root / f"{scenarios['in_model_call']}.release").touch()
        for scenario in ("waited", "continued"):
            await reins.approve(scenarios[scenario], wait=True)
        for scenario, (run_id, _) in done.runs.items():
            handle = client.get_workflow_handle(run_id)
            done.outcomes[scenario] = await asyncio.wait_for(handle.result(), 120)
            done.closed[scenario] = (await handle.describe()).status
            done.status[scenario], done.steps[scenario] = await status_and_steps(client, run_id)
            path = root / f"{run_id}.effects"
            done.effects[scenario] = [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []
    finally:
        await asyncio.to_thread(new.stop)
    return done


async def status_and_steps(client: Client, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's `status` and the `steps` of every run of its continue-as-new chain, each a query this build's
    worker answers (by replaying that run's history, whichever build recorded it)."""
    status = await client.get_workflow_handle(run_id).query("status")
    steps: list[dict[str, Any]] = []
    run: str | None = None
    while True:
        handle = client.get_workflow_handle(run_id, run_id=run)
        steps = await handle.query("steps") + steps
        run = (await handle.query("status"))["continued_from"]
        if run is None:
            return status, steps


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    server = start_dev_server(log_path=tmp_path_factory.mktemp("upgrades") / "server.log",
                              dynamic_config=STUCK_RUNS_RETRY_SOON)
    try:
        yield server
    finally:
        server.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def upgrades(server: DevServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Upgrade]:
    client = await connect(server.address)
    root = tmp_path_factory.mktemp("builds")
    done = await asyncio.gather(*(upgrade(server, client, build, root / build) for build in WINDOW))
    return {u.build: u for u in done}


@pytest.mark.parametrize("build", WINDOW)
async def test_an_upgrade_in_place_carries_every_run_to_its_end(upgrades: dict[str, Upgrade], build: str):
    """The runs that waited for approval run their tool on this build; the one in a model call ran its tool on
    the old build and its last call on this one; the finished one was the old build's throughout."""
    done = upgrades[build]
    ran_on = {"waited": "current", "continued": "current", "in_model_call": build, "finished": build}
    for scenario, (run_id, amount) in done.runs.items():
        assert done.effects[scenario] == [ran_on[scenario]], (scenario, run_id, done.effects[scenario])
        assert done.outcomes[scenario]["output"] == f"Paid {amount} on {ran_on[scenario]}", (scenario, run_id)
        assert done.outcomes[scenario]["status"] == "done" and done.closed[scenario] == WorkflowExecutionStatus.COMPLETED


@pytest.mark.parametrize("build", WINDOW)
async def test_every_run_of_an_earlier_build_answers_status_and_steps(upgrades: dict[str, Upgrade], build: str):
    """Each query replays what both builds recorded on this build's worker (a history it could not replay
    would fail the query with a nondeterminism error)."""
    done = upgrades[build]
    for scenario in done.runs:
        assert done.status[scenario]["status"] == "done", scenario
        kinds = [s["kind"] for s in done.steps[scenario]]
        assert kinds[-3:] == ["model", "tool", "model"], (scenario, kinds)


@pytest.mark.parametrize("build", WINDOW)
async def test_the_continued_run_continued_as_new_on_the_old_build(upgrades: dict[str, Upgrade], build: str):
    done = upgrades[build]
    assert done.predecessor == WorkflowExecutionStatus.CONTINUED_AS_NEW
    assert done.status["continued"]["first_step"] > 0  # its successor counts on from the steps before


OLD_MD5 = "0123456789abcdef0123456789abcdef"
"""A build id of temporalio's default shape (a build before rein reported its own), as f732bd2 and older ones have."""


async def test_a_run_older_than_the_window_fails_its_task_with_one_line(server: DevServer, monkeypatch):
    """A run waits on a build of temporalio's default build id; then the window closes over it (played by
    moving its opening past the run's start): the next worker to take the run fails its workflow task at the
    first activation with the window's one line naming that build, no nondeterminism error, and the run stays
    open, untouched (no tool ran); a status query says the same line."""
    ran: list[int] = []

    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append(a + b)
        return a + b

    def agent() -> Agent:
        return Agent(provider=MockProvider([[ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})], "3"]),
                     tools=[add], name="windowed", config=LoopConfig(permission="ask"))

    client = await connect(server.address)
    queue = "outside-window"
    with monkeypatch.context() as earlier:  # a build from before runs recorded how they started (no marker)
        earlier.setattr(loop, "first_start", lambda: window.start_of(OLD_MD5, workflow.info().start_time))
        async with Worker(client, task_queue=queue, plugins=[ReinPlugin(agents=[agent()])], build_id=OLD_MD5):
            handle = await client.start_workflow("AgentWorkflow", {"agent": "windowed", "prompt": "1 + 2?"}, id=queue,
                                                 task_queue=queue)
            await wait_status(handle, "waiting_approval")
    monkeypatch.setattr(window, "OLDEST_BUILD_AT", datetime.now(UTC) + timedelta(days=1))
    async with Worker(client, task_queue=queue, plugins=[ReinPlugin(agents=[agent()])], max_cached_workflows=0):
        await handle.signal("approve", {})

        async def task_failures() -> list[str]:
            return [e.workflow_task_failed_event_attributes.failure.message
                    async for e in handle.fetch_history_events()
                    if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]

        [failure] = await poll(task_failures, "the run's workflow task to fail")
        with pytest.raises(window.OutsideWindow) as status:  # no worker answers: rein's client replays it, as rein status does
            await ReinClient(client, queue).status(queue)
    assert failure.startswith(f"this run was started on {datetime.now(UTC):%Y-%m-%d}") and f"by rein build {OLD_MD5}" in failure
    assert "older than this build's support window of 30 days" in failure and "\n" not in failure
    assert "Nondeterminism" not in failure and str(status.value) == failure
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING and ran == []

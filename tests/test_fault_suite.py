"""Faults with real processes: workers SIGKILLed mid-step, the Temporal server killed and restarted.

One dev server per module (SQLite file, so it can be killed and restarted with its state) and
`python worker.py` subprocesses serving tests/agents/faults.py. Every case asserts the run's
end state and how many times the side effect ran: a tool's side effect runs once per attempt
that reached it (always with the same idempotency key), a model call once per attempt.
Vendor faults (429 + Retry-After, 5xx, timeouts, 401, no key) are in test_model_faults.py;
poison input in test_bad_input.py.
"""

from __future__ import annotations

import asyncio
import uuid
from functools import partial
from pathlib import Path

import pytest
import pytest_asyncio

from rein.client import ReinClient, connect
from rein.durable.embedded_server import DevServer, free_port, start_dev_server
from tests.support.history import assert_no_task_failures, history_events, tool_attempts
from tests.support.processes import WorkerProcess
from tests.support.runs import forget_sticky_worker
from tests.support.waiting import poll, rein_status_is

AGENTS = ["tests.agents.faults:effects", "tests.agents.faults:approved_effects"]
until = partial(poll, timeout=90, interval=0.1, ignore=(Exception,))  # the server may be restarting


class Stack:
    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.db = str(root / "temporal.db")
        self.server: DevServer | None = None
        self.tq = f"faults-{uuid.uuid4().hex[:6]}"
        self.workers: list[WorkerProcess] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_server(self) -> None:
        self.server = start_dev_server(port=self.port, db_filename=self.db, log_path=self.root / "server.log")

    def kill_server(self) -> None:
        assert self.server is not None
        self.server.process.kill()
        self.server.process.wait(timeout=10)

    def live_worker(self) -> WorkerProcess:
        """The running worker, or a new one (starting a worker costs seconds: tests share them)."""
        alive = [w for w in self.workers if w.process is not None and w.process.poll() is None]
        return alive[-1] if alive else self.worker()

    def worker(self) -> WorkerProcess:
        log = self.root / f"worker-{len(self.workers)}.log"
        proc = WorkerProcess(self.address, AGENTS, self.tq, log, FAULTS_DIR=str(self.root)).start()
        self.workers.append(proc)
        return proc

    def effects(self, run_id: str) -> list[str]:
        path = self.root / f"{run_id}.effects"
        return path.read_text().splitlines() if path.exists() else []

    def model_calls(self, run_id: str) -> int:
        path = self.root / f"{run_id}.model"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def hold(self, name: str) -> Path:
        path = self.root / name
        path.touch()
        return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    s = Stack(tmp_path_factory.mktemp("faults"))
    s.start_server()
    try:
        yield s
    finally:
        for w in s.workers:
            w.kill()
        if s.server is not None:
            s.server.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def client(stack: Stack) -> ReinClient:
    return ReinClient(await connect(stack.address), stack.tq)


async def start(client: ReinClient, agent: str) -> str:
    run_id = f"{agent}-{uuid.uuid4().hex[:8]}"
    await client.client.start_workflow(
        "AgentWorkflow", {"agent": agent, "prompt": run_id}, id=run_id, task_queue=client.task_queue
    )
    return run_id


async def started_tool_attempts(client: ReinClient, run_id: str) -> int:
    """How many attempts of the tool activity the server started (the last started event says)."""
    return max(tool_attempts(await history_events(client.client.get_workflow_handle(run_id))))


async def test_sigkill_while_a_tool_runs(stack: Stack, client: ReinClient):
    worker = stack.live_worker()
    run_id = f"effects-{uuid.uuid4().hex[:8]}"
    hold = stack.hold(f"{run_id}.hold")
    await client.client.start_workflow(
        "AgentWorkflow", {"agent": "effects", "prompt": run_id}, id=run_id, task_queue=client.task_queue
    )
    await until(lambda: stack.effects(run_id), "the tool to start")
    worker.kill()  # after the side effect, before the result reached the server
    await forget_sticky_worker(client.client, run_id)
    stack.worker()
    hold.unlink()
    result = await asyncio.wait_for(client.result(run_id), 120)
    assert result.output == "Report: charged 5"
    effects = stack.effects(run_id)
    # Re-run once by Temporal on the new worker, with the same idempotency key: the tool can dedupe.
    assert len(effects) == 2 == await started_tool_attempts(client, run_id)
    assert len({line.split()[0] for line in effects}) == 1
    assert [line.split()[1] for line in effects] == ["attempt=1", "attempt=2"]
    assert stack.model_calls(run_id) == 2  # one per iteration: the model call was not repeated
    assert_no_task_failures(await client.client.get_workflow_handle(run_id).fetch_history())


async def test_sigkill_during_a_model_call(stack: Stack, client: ReinClient):
    worker = stack.live_worker()
    run_id = f"effects-{uuid.uuid4().hex[:8]}"
    hold = stack.hold(f"{run_id}.model-hold")
    await client.client.start_workflow(
        "AgentWorkflow", {"agent": "effects", "prompt": run_id}, id=run_id, task_queue=client.task_queue
    )
    await until(lambda: stack.model_calls(run_id), "the model call to start")
    worker.kill()
    await forget_sticky_worker(client.client, run_id)
    hold.unlink()
    stack.worker()  # the lost call is retried once its heartbeat times out (the agent's heartbeat_timeout_s)
    result = await asyncio.wait_for(client.result(run_id), 120)
    assert result.output == "Report: charged 5"
    assert stack.model_calls(run_id) == 3  # iteration 1 twice (killed, retried), iteration 2 once
    assert len(stack.effects(run_id)) == 1


async def test_sigkill_while_waiting_for_approval(stack: Stack, client: ReinClient):
    worker = stack.live_worker()
    run_id = await start(client, "approved-effects")
    await until(lambda: rein_status_is(client, run_id, "waiting_approval"), "the approval wait")
    worker.kill()
    await forget_sticky_worker(client.client, run_id)
    stack.worker()
    assert await client.approve(run_id, approver="ops", wait=True) == ["call-1"]
    result = await asyncio.wait_for(client.result(run_id), 120)
    assert result.output == "Report: charged 7"
    assert len(stack.effects(run_id)) == 1
    assert stack.model_calls(run_id) == 2


async def test_server_killed_and_restarted_while_waiting(stack: Stack, client: ReinClient):
    stack.live_worker()
    run_id = await start(client, "approved-effects")
    await until(lambda: rein_status_is(client, run_id, "waiting_approval"), "the approval wait")
    stack.kill_server()
    stack.start_server()
    await until(lambda: rein_status_is(client, run_id, "waiting_approval"), "the run to be back after the restart")
    assert await client.approve(run_id, approver="ops", wait=True) == ["call-1"]
    result = await asyncio.wait_for(client.result(run_id), 120)
    assert result.output == "Report: charged 7"
    assert len(stack.effects(run_id)) == 1
    assert stack.model_calls(run_id) == 2


async def test_server_killed_and_restarted_while_a_tool_runs(stack: Stack, client: ReinClient):
    stack.live_worker()
    run_id = f"effects-{uuid.uuid4().hex[:8]}"
    hold = stack.hold(f"{run_id}.hold")
    await client.client.start_workflow(
        "AgentWorkflow", {"agent": "effects", "prompt": run_id}, id=run_id, task_queue=client.task_queue
    )
    await until(lambda: stack.effects(run_id), "the tool to start")
    stack.kill_server()
    stack.start_server()
    hold.unlink()
    result = await asyncio.wait_for(client.result(run_id), 120)
    assert result.output == "Report: charged 5"
    effects = stack.effects(run_id)
    # Once, or (if the restart outlasted the tool's heartbeat timeout) once per started attempt;
    # either way every execution used the same idempotency key.
    assert len(effects) == await started_tool_attempts(client, run_id) >= 1
    assert len({line.split()[0] for line in effects}) == 1
    assert stack.model_calls(run_id) == 2

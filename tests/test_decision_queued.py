"""A decision never waits in silence (issue 34, item 3).

A worker stopped a moment ago is still listed as a poller for about a minute, so a decision is sent
and then waits on the server. Within 2 s the CLI says so ("no worker has taken it yet; ... sent, not
applied"); without --wait it exits 11 (queued), with --wait it waits with a spinner, and Ctrl-C says
where the decision stands, exit 130. What it says is what the run then does: a worker that comes
back applies the queued decision. Real processes: a `worker.py` killed by its PID, the `rein`
console script. Waits are bounded by process timeouts, never timed assertions.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rein.cli.decisions import EXIT_QUEUED
from rein.client import DecisionQueued, ReinClient
from tests.agents.ops import TOOL_CALL_ID, agent
from tests.support.processes import WorkerProcess
from tests.support.runs import forget_sticky_worker
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
AGENTS = ["tests.agents.ops:agent"]


def rein_process(*argv: str) -> subprocess.Popen:
    environ = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")}
    return subprocess.Popen([REIN_BIN, *argv], cwd=str(ROOT), env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def first_line(proc: subprocess.Popen, timeout: float = 60) -> str:
    """The process's first line on stderr (bounded: the process is killed after `timeout`)."""
    assert proc.stderr is not None
    import threading

    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        return proc.stderr.readline()
    finally:
        killer.cancel()


class Stack:
    def __init__(self, dev, tmp_path: Path):  # noqa: ANN001
        self.address = dev.client.service_client.config.target_host
        self.queue = f"queued-{uuid.uuid4().hex[:8]}"
        self.client = ReinClient(dev.client, task_queue=self.queue)
        self.worker = WorkerProcess(self.address, AGENTS, self.queue, tmp_path / "worker.log")

    async def waiting_run(self) -> str:
        """A run waiting for approval whose worker was just killed (still listed as a poller)."""
        await asyncio.to_thread(self.worker.start)
        run_id = (await self.client.start(agent.name, "restart billing please")).id
        await poll(lambda: self._status_is(run_id, "waiting_approval"), f"{run_id} waiting", 60, interval=0.1)
        self.worker.kill()
        await forget_sticky_worker(self.client.client, run_id)  # the next task goes to the queue, not the dead cache
        assert await self.client.worker_serves(run_id)  # the server still lists the killed worker
        return run_id

    async def _status_is(self, run_id: str, status: str) -> bool:
        return (await self.client.status(run_id)).status == status

    async def worker_returns_and_finishes(self, run_id: str) -> str:
        await asyncio.to_thread(self.worker.start)
        result = await asyncio.wait_for(self.client.result(run_id), 120)
        return result.output or ""


@pytest.fixture
def stack(dev, tmp_path: Path):  # noqa: ANN001
    made = Stack(dev, tmp_path)
    yield made
    made.worker.kill()


async def test_the_cli_says_queued_within_its_first_line_and_the_run_applies_it_later(stack: Stack) -> None:
    run_id = await stack.waiting_run()
    proc = rein_process("approve", run_id, "--address", stack.address)
    line = await asyncio.to_thread(first_line, proc)
    assert "no worker has taken it yet" in line and "sent, not applied" in line, line
    out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == EXIT_QUEUED, (proc.returncode, line, out, err)
    assert out == "" and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("rein: no worker has taken run"), err
    assert "queued on the server, not applied" in err and "applies it when a worker takes it" in err
    # Not applied: the run (replayed from its history) still waits and holds no decision.
    assert (await stack.client.status(run_id)).status == "waiting_approval"
    assert not (await stack.client.session(run_id)).decisions
    # The worker comes back: the queued approval is applied, as the CLI said.
    assert "restarted cleanly" in await stack.worker_returns_and_finishes(run_id)
    (decision,) = (await stack.client.session(run_id)).decisions
    assert (decision.tool_call_id, decision.approved) == (TOOL_CALL_ID, True)


async def test_wait_shows_what_it_waits_for_and_ends_when_a_worker_applies_it(stack: Stack) -> None:
    run_id = await stack.waiting_run()
    proc = rein_process("approve", run_id, "--wait", "--address", stack.address)
    line = await asyncio.to_thread(first_line, proc)
    assert "no worker has taken it yet" in line and "sent, not applied" in line, line
    assert proc.poll() is None  # still waiting for a worker
    assert "restarted cleanly" in await stack.worker_returns_and_finishes(run_id)
    out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 0, (out, err)
    assert out.strip().startswith(f'approved restart_service(service="billing") [{TOOL_CALL_ID}] in run {run_id} (wait 1-')


async def test_ctrl_c_says_the_decision_is_queued_and_it_is(stack: Stack) -> None:
    run_id = await stack.waiting_run()
    proc = rein_process("deny", run_id, "--wait", "--reason", "not now", "--address", stack.address)
    line = await asyncio.to_thread(first_line, proc)
    assert "no worker has taken it yet" in line, line
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "Traceback" not in err and "WorkflowUpdateRPCTimeoutOrCancelledError" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("rein: interrupted: the denial was sent and is queued on the server, not applied"), err
    # As it said: the worker comes back and applies the denial.
    output = await stack.worker_returns_and_finishes(run_id)
    (decision,) = (await stack.client.session(run_id)).decisions
    assert (decision.approved, decision.reason) == (False, "not now"), output


async def test_ctrl_c_before_anything_is_sent_says_so(dev, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """--wait with no worker polling at all: nothing is sent, and Ctrl-C says so."""
    address = dev.client.service_client.config.target_host
    client = ReinClient(dev.client, task_queue=f"nobody-{uuid.uuid4().hex[:8]}")
    run_id = (await client.start(agent.name, "restart billing please")).id
    proc = rein_process("approve", run_id, "--wait", "--address", address)
    line = await asyncio.to_thread(first_line, proc)
    assert "no worker polls its queue" in line and "nothing is sent" in line, line
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == "rein: interrupted: the approval was not sent", err
    assert await client.decision_stage(run_id, "approval-none") == "not sent"
    await client.handle(run_id).terminate("the test is done")


async def test_the_client_raises_decision_queued_and_can_wait_for_it(stack: Stack) -> None:
    run_id = await stack.waiting_run()
    with pytest.raises(DecisionQueued, match="not applied") as caught:
        await stack.client.approve(run_id)
    queued = caught.value
    assert await stack.client.decision_stage(run_id, queued.update_id) == "queued"
    await asyncio.to_thread(stack.worker.start)
    assert await asyncio.wait_for(stack.client.decision_result(run_id, queued.update_id), 120) == [TOOL_CALL_ID]
    assert await stack.client.decision_stage(run_id, queued.update_id) == "done"
    assert "restarted cleanly" in (await asyncio.wait_for(stack.client.result(run_id), 120)).output

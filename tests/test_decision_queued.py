"""A decision never waits in silence (issue 34, item 3).

A worker stopped a moment ago is still listed as a poller for about a minute, so a decision is sent
and then waits on the server. Within 2 s the CLI says so ("no worker has taken it yet; ... sent, not
applied"); without --wait it exits 11 (queued), with --wait it waits with a spinner, and Ctrl-C says
where the decision stands, exit 130. What it says is what the run then does: a worker that comes
back applies the queued decision. Real processes: a `worker.py` killed by its PID (once, with four runs
waiting, each decided another way), the `rein` console script. Waits are bounded by process timeouts, never
timed assertions.
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
    """One `worker.py` for several runs: started, killed by its PID once they all wait, started again."""

    def __init__(self, dev, tmp_path: Path):  # noqa: ANN001
        self.address = dev.client.service_client.config.target_host
        self.queue = f"queued-{uuid.uuid4().hex[:8]}"
        self.client = ReinClient(dev.client, task_queue=self.queue)
        self.worker = WorkerProcess(self.address, AGENTS, self.queue, tmp_path / "worker.log")

    async def waiting_runs(self, count: int) -> list[str]:
        """`count` runs waiting for approval whose worker was just killed (still listed as a poller)."""
        await asyncio.to_thread(self.worker.start)
        run_ids = [(await self.client.start(agent.name, "restart billing please")).id for _ in range(count)]
        for run_id in run_ids:
            await poll(lambda r=run_id: self._status_is(r, "waiting_approval"), f"{run_id} waiting", 60, interval=0.1)
        self.worker.kill()
        for run_id in run_ids:
            await forget_sticky_worker(self.client.client, run_id)  # the next task goes to the queue, not the dead cache
            assert await self.client.worker_serves(run_id)  # the server still lists the killed worker
        return run_ids

    async def _status_is(self, run_id: str, status: str) -> bool:
        return (await self.client.status(run_id)).status == status

    async def finished(self, run_id: str) -> str:
        result = await asyncio.wait_for(self.client.result(run_id), 120)
        return result.output or ""


@pytest.fixture
def stack(dev, tmp_path: Path):  # noqa: ANN001
    made = Stack(dev, tmp_path)
    yield made
    made.worker.kill()


async def test_decisions_sent_while_no_worker_takes_them_are_queued_and_applied_when_one_returns(stack: Stack) -> None:
    """Four runs share one killed worker, each a way of deciding: `rein approve` (exit 11), `rein approve --wait`,
    `rein deny --wait` then Ctrl-C, and the client's DecisionQueued. Then the worker returns once and applies
    every queued decision, as each said it would. (One worker start and kill for the four: `worker.py` costs
    ~1.3 s of CPU to start.)"""
    queued, waited, interrupted, client_side = await stack.waiting_runs(4)
    await the_cli_says_queued_within_its_first_line(stack, queued)
    waiting = await wait_shows_what_it_waits_for(stack, waited)
    await ctrl_c_says_the_decision_is_queued(stack, interrupted)
    update_id = await the_client_raises_decision_queued(stack, client_side)

    await asyncio.to_thread(stack.worker.start)  # the worker comes back
    # `rein approve` said the approval would be applied when a worker takes it: it is.
    assert "restarted cleanly" in await stack.finished(queued)
    (decision,) = (await stack.client.session(queued)).decisions
    assert (decision.tool_call_id, decision.approved) == (TOOL_CALL_ID, True)
    # `rein approve --wait` ends once the worker applies it.
    assert "restarted cleanly" in await stack.finished(waited)
    out, err = await asyncio.to_thread(waiting.communicate, timeout=60)
    assert waiting.returncode == 0, (out, err)
    assert out.strip().startswith(f'approved restart_service(service="billing") [{TOOL_CALL_ID}] in run {waited} (wait 1-')
    # Ctrl-C said the denial was queued: the worker applies it.
    output = await stack.finished(interrupted)
    (decision,) = (await stack.client.session(interrupted)).decisions
    assert (decision.approved, decision.reason) == (False, "not now"), output
    # The client waits for its queued decision.
    assert await asyncio.wait_for(stack.client.decision_result(client_side, update_id), 120) == [TOOL_CALL_ID]
    assert await stack.client.decision_stage(client_side, update_id) == "done"
    assert "restarted cleanly" in await stack.finished(client_side)


async def the_cli_says_queued_within_its_first_line(stack: Stack, run_id: str) -> None:
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


async def wait_shows_what_it_waits_for(stack: Stack, run_id: str) -> subprocess.Popen:
    """`rein approve --wait`, still waiting once it has said the decision is queued."""
    proc = rein_process("approve", run_id, "--wait", "--address", stack.address)
    line = await asyncio.to_thread(first_line, proc)
    assert "no worker has taken it yet" in line and "sent, not applied" in line, line
    assert proc.poll() is None  # still waiting for a worker
    return proc


async def ctrl_c_says_the_decision_is_queued(stack: Stack, run_id: str) -> None:
    proc = rein_process("deny", run_id, "--wait", "--reason", "not now", "--address", stack.address)
    line = await asyncio.to_thread(first_line, proc)
    assert "no worker has taken it yet" in line, line
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "Traceback" not in err and "WorkflowUpdateRPCTimeoutOrCancelledError" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("rein: interrupted: the denial was sent and is queued on the server, not applied"), err


async def the_client_raises_decision_queued(stack: Stack, run_id: str) -> str:
    with pytest.raises(DecisionQueued, match="not applied") as caught:
        await stack.client.approve(run_id)
    queued = caught.value
    assert await stack.client.decision_stage(run_id, queued.update_id) == "queued"
    return queued.update_id


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

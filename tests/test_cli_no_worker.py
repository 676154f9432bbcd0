"""Decisions when no worker serves the run: told at once, nothing sent, nothing applied later.

A decision is a Temporal Update a worker must accept; sent with no worker it would wait on the
server and be applied whenever a worker came back. So the client sends nothing and says so
(`NoWorker`; the CLI: one line, exit 8, here through rein.cli.main); a worker started afterwards finds the run
still waiting.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

import rein
from rein import Agent, LoopConfig
from rein.cli import EXIT_NO_WORKER
from rein.client import NoWorker, ReinClient
from tests.support.in_process import rein_inproc
from tests.support.providers import OpsModel, restart
from tests.support.waiting import poll

AGENT = Agent(provider=OpsModel(), tools=[restart], config=LoopConfig(permission="ask"), name="noworker-ops")


async def test_a_decision_without_a_worker_is_not_sent_and_never_applied(dev, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.setenv("REIN_WORKER_GRACE_S", "0")  # no worker is coming: refused at once, not after 3 s
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    client = ReinClient(dev.client)
    client.task_queue = queue
    run_id = (await client.start(AGENT.name, "billing please")).id
    address = dev.client.service_client.config.target_host

    with pytest.raises(NoWorker, match="was not sent"):
        await client.approve(run_id)
    proc = await asyncio.to_thread(rein_inproc, "approve", run_id, "--address", address)  # rein.cli.main
    assert proc.returncode == EXIT_NO_WORKER, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [proc.stderr.strip()], proc.stderr  # one line
    assert proc.stderr.startswith("rein: no worker serves run") and "was not sent" in proc.stderr
    assert "--wait" in proc.stderr

    # A worker comes: the run reaches its question and still waits; nobody approved anything.
    async with rein.create_worker(dev.client, agents=[AGENT], task_queue=queue):

        async def waiting() -> bool:
            return (await client.status(run_id)).status == "waiting_approval"

        await poll(waiting, f"{run_id} to wait for approval", 30, interval=0.1)
        session = await client.session(run_id)
        assert not session.decisions  # the refused approvals were never delivered
        assert (await client.status(run_id)).status == "waiting_approval"
        assert await client.approve(run_id, wait=True)  # with a worker the same decision is applied
        result = await client.result(run_id)
    assert result.output and "restarted" in result.output

"""How `rein status` reads a run when no worker answers: a replay that load cannot break, and no replay
at all where the run's description already says everything.

1. temporalio's workflow worker takes an activation slower than 2 s for a deadlock. In the Replayer
   that `rein status` runs when no worker answers, a loaded CLI process (CI, 2 cores, two calls at a
   time) crossed it: the replay stopped part-way, with a `_DeadlockError` on stderr and an exception
   raised asynchronously into the workflow thread, and the status read from it was the state part-way
   (`running` for a run that waits for approval). The replay now runs without the detector, and a
   replay that fails is never shown as the run's state.
2. A running run publishes `ReinStatus=running` (workflows/publishing.py): with no worker to answer, its
   status is read from the one describe `rein status` makes anyway, not from its downloaded, replayed
   history.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

import rein
from rein import Agent, LoopConfig
from rein.cli import main
from rein.client import ReinClient
from rein.ops.runs import describe_run
from rein.temporal import history
from tests.support.providers import OpsModel, restart
from tests.support.runs import left_waiting
from tests.support.waiting import poll
from tests.test_query_grace import count_calls

ROOT = Path(__file__).resolve().parent.parent
NAME = f"reads-{uuid.uuid4().hex[:6]}"
AGENT = Agent(provider=OpsModel(), tools=[restart], config=LoopConfig(permission="ask"), name=NAME)

SLOW_REPLAY = textwrap.dedent("""
    import asyncio, json, sys, time
    from temporalio.client import Client, WorkflowHistory
    from rein.temporal import history
    from rein.temporal.connection import free_core_at_exit
    from rein.temporal.converter import rein_data_converter

    free_core_at_exit()  # as rein's own connections do: else the core may abort this process at exit (sdk-python#300)

    def starved(instance):  # this process's CPU is starved: the replay's first activation takes 2.5 s
        time.sleep(2.5)

    async def main():
        client = await Client.connect(sys.argv[1], data_converter=rein_data_converter())
        fetched = WorkflowHistory.from_json(sys.argv[2], open(sys.argv[3]).read())
        try:
            replayed = await history.replay_history(client, sys.argv[2], fetched, prepare=starved)
        except RuntimeError as err:  # a replay that failed says so: never a state part-way
            print(json.dumps({"error": str(err)}))
            return
        print(json.dumps(replayed.query("status")))

    asyncio.run(main())
""")


async def test_a_starved_replay_shows_the_state_the_run_is_in(dev, tmp_path: Path) -> None:  # noqa: ANN001
    run_id = await left_waiting(dev.client, AGENT, f"reads-{uuid.uuid4().hex[:8]}", "billing please")
    fetched = await dev.client.get_workflow_handle(run_id).fetch_history()
    saved = tmp_path / "history.json"
    saved.write_text(fetched.to_json())
    script = tmp_path / "slow_replay.py"
    script.write_text(SLOW_REPLAY)
    # In a process of its own, bounded: a replay that never ends fails the test instead of holding it.
    proc = await asyncio.to_thread(
        subprocess.run, [sys.executable, str(script), dev.client.service_client.config.target_host, run_id, str(saved)],
        cwd=str(ROOT), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = json.loads(proc.stdout.strip().splitlines()[-1])
    assert status.get("status") == "waiting_approval", (status, proc.stderr[-3000:])
    assert status["pending_tool_calls"][0]["name"] == "restart"
    assert "deadlock" not in (proc.stdout + proc.stderr).lower()
    await dev.client.get_workflow_handle(run_id).terminate("the test is done")


def _no_replay(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail any replay in this process (and any history download for one); returns what was tried."""
    tried: list[str] = []

    async def refused(*args: Any, **kwargs: Any) -> Any:
        tried.append("replay")
        raise AssertionError("the run's history was replayed")

    monkeypatch.setattr(history, "replay_history", refused)
    monkeypatch.setattr(history, "replayed", refused)
    return tried


async def test_status_of_a_running_run_no_worker_serves_is_its_description(
    dev, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]  # noqa: ANN001
) -> None:
    queue = f"reads-nobody-{uuid.uuid4().hex[:8]}"  # no worker ever polls it
    run_id = (await ReinClient(dev.client, task_queue=queue).start(NAME, "billing please")).id
    tried = _no_replay(monkeypatch)
    calls = count_calls(dev.client, monkeypatch)
    detail = await describe_run(ReinClient(dev.client), run_id)
    assert (detail.status, detail.served, detail.source, detail.live) == ("running", False, "published", False)
    assert (detail.interrupt, detail.pending_tool_calls, detail.stop_reason) == (None, [], None)
    assert calls == {"describe_workflow_execution": 1, "describe_task_queue": 1}  # no query, no history
    assert tried == []

    address = dev.client.service_client.config.target_host
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["status", run_id, "--json", "--address", address]) == 0
    view = json.loads(capsys.readouterr().out)
    assert (view["status"], view["served"], view["source"], view["task_queue"]) == ("running", False, "published", queue)
    assert await asyncio.to_thread(main, ["status", run_id, "--address", address]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "none serves it" in text and "state as the run published it" in text and queue in text
    assert tried == []
    await dev.client.get_workflow_handle(run_id).terminate("the test is done")


class Stalls:
    """A model that never answers (its worker stops while the call is in flight)."""

    async def complete(self, messages: Any, tools: Any = None, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    async def stream(self, messages: Any, tools: Any = None, **kwargs: Any) -> Any:
        await asyncio.Event().wait()
        yield  # pragma: no cover


STALLS = Agent(provider=Stalls(), name=f"{NAME}-stalls")


async def test_status_of_a_running_run_whose_worker_just_stopped_is_its_description(
    dev, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    """Its worker is still listed as a poller for a minute: the query goes unanswered, and the status is
    the run's description (stage from the activity it scheduled), not its replayed history."""
    queue = f"reads-stopped-{uuid.uuid4().hex[:8]}"
    reins = ReinClient(dev.client, task_queue=queue)
    async with rein.create_worker(dev.client, agents=[STALLS], task_queue=queue):
        run_id = (await reins.start(STALLS.name, "say something")).id

        async def calling() -> bool:
            pending = (await dev.client.get_workflow_handle(run_id).describe()).raw_description.pending_activities
            return any(a.activity_type.name == "rein.call_model" for a in pending)

        await poll(calling, f"{run_id} to call its model", 60, interval=0.1)
    monkeypatch.setenv("REIN_QUERY_GRACE_S", "0")
    tried = _no_replay(monkeypatch)
    calls = count_calls(dev.client, monkeypatch)
    detail = await describe_run(ReinClient(dev.client), run_id)
    assert (detail.status, detail.stage, detail.served, detail.source) == ("running", "call_model", False, "published")
    assert calls.get("get_workflow_execution_history", 0) == 0 and tried == []
    assert calls["describe_workflow_execution"] == 1
    await dev.client.get_workflow_handle(run_id).terminate("the test is done")

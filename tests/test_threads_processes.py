"""Threads across processes: a worker process serves the thread; messages come from other processes
(`rein send`, the stock `temporal` CLI) while the model streams and while a tool runs; a worker killed
mid-turn is replaced and the turn finishes with every message taken once."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rein.client import ReinClient
from rein.durable.embedded_server import temporal_binary
from tests.agents.threads import release, release_model
from tests.support.processes import ROOT, WorkerProcess
from tests.support.waiting import poll

pytestmark = pytest.mark.timeout(180)


def _rein(address: str, *args: str) -> subprocess.CompletedProcess:
    """`rein ...` in a process of its own."""
    env = {**os.environ, "TEMPORAL_ADDRESS": address}
    env.pop("REIN_TASK_QUEUE", None)
    return subprocess.run([sys.executable, "-m", "rein.cli", *args], cwd=str(ROOT), env=env, capture_output=True,
                          text=True, timeout=60)


def _temporal(address: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([temporal_binary(), *args, "--address", address], capture_output=True, text=True, timeout=60)


async def _until(predicate, what: str, timeout: float = 30.0) -> None:
    async def poll():
        while not predicate():
            await asyncio.sleep(0.05)
    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"never happened: {what}") from None


def _said(process: subprocess.Popen) -> bool:
    """The process wrote a line to stderr (its stderr is a pipe: peek without blocking)."""
    import select

    return bool(select.select([process.stderr], [], [], 0)[0])


async def _waits(runs: ReinClient, thread_id: str) -> bool:
    """A message waits for the turn under way (queued, or to steer it)."""
    view = await runs.thread(thread_id)
    return bool(view.queued or view.steering)


def _events(folder: Path) -> list[str]:
    path = folder / "events"
    return path.read_text().split() if path.exists() else []


@pytest.fixture
def worker(dev, tmp_path):
    address = dev.client.service_client.config.target_host
    queue = f"threads-{uuid.uuid4().hex[:8]}"
    process = WorkerProcess(address, ["tests.agents.threads:talker"], queue, tmp_path / "worker.log",
                            REINTEST_DIR=str(tmp_path)).start()
    try:
        yield address, queue, process
    finally:
        process.stop()


async def test_other_processes_send_while_the_model_streams_and_while_a_tool_runs(dev, worker, tmp_path):
    address, queue, _ = worker
    runs = ReinClient(dev.client, queue)
    thread_id = f"support-{uuid.uuid4().hex[:8]}"
    first = await runs.send(thread_id, "slow:hold", agent="talker")  # it streams until release_model()
    texts: list[str] = []

    async def read() -> list[str]:
        async for chunk in runs.stream(thread_id):
            if chunk.type == "text":
                texts.append(chunk.text)
            if chunk.type == "event" and chunk.name == "turn_end" and (chunk.data or {}).get("turn") == 3:
                break
        return texts

    reader = asyncio.ensure_future(read())
    await _until(lambda: len(texts) >= 2, "text streamed live to a reader")
    # While the model streams: another process steers (rein send), the stock CLI queues the next turn.
    steered = await asyncio.to_thread(_rein, address, "send", thread_id, "please be brief", "--agent", "talker",
                                      "--mode", "steer", "--no-wait", "--queue", queue, "--json")
    assert steered.returncode == 0, steered.stderr
    assert json.loads(steered.stdout)["receipt"]["turn"] == 1
    queued = await asyncio.to_thread(_temporal, address, "workflow", "update", "execute", "--workflow-id", thread_id,
                                     "--name", "rein.send", "--input", json.dumps({"text": "tool:hold", "message_id": "stock-1"}),
                                     "--output", "json")
    assert queued.returncode == 0, queued.stderr + queued.stdout
    assert json.loads(queued.stdout)["result"]["turn"] == 2, queued.stdout
    release_model(tmp_path)
    answer = await asyncio.wait_for(runs.reply(first), 30)
    assert answer.output.endswith("heard: slow:hold | please be brief") or answer.output.endswith("heard: please be brief")
    # While the tool of turn 2 runs: an interrupt from another process waits for it (no model call to cut).
    await _until(lambda: "tool-started" in _events(tmp_path), "turn 2's tool started")
    cutting = asyncio.ensure_future(asyncio.to_thread(_rein, address, "send", thread_id, "actually, stop", "--agent",
                                                      "talker", "--mode", "interrupt", "--queue", queue))
    await poll(lambda: _waits(runs, thread_id), "the interrupt waits for the tool")
    release(tmp_path)
    cut = await cutting
    assert cut.returncode == 0, cut.stderr
    assert "heard: tool:hold | actually, stop" in cut.stdout
    assert _events(tmp_path).count("tool-finished") == 1  # the tool call under way finished first, once
    third = await runs.send(thread_id, "bye", agent="talker")
    assert (await runs.reply(third)).output == "heard: bye"
    await asyncio.wait_for(reader, 30)
    assert "".join(texts).count("thinking 0") == 1  # each piece once, live
    users = [m.content for m in (await runs.session(thread_id)).messages if m.role == "user"]
    assert users == ["slow:hold", "please be brief", "tool:hold", "actually, stop", "bye"]
    listed = await asyncio.to_thread(_rein, address, "threads", "--json")
    assert thread_id in [row["thread_id"] for row in json.loads(listed.stdout)], listed.stdout


async def test_a_worker_killed_mid_turn_is_replaced_and_the_turn_finishes(dev, worker, tmp_path):
    address, queue, process = worker
    runs = ReinClient(dev.client, queue)
    thread_id = f"support-{uuid.uuid4().hex[:8]}"
    first = await runs.send(thread_id, "slow:10", agent="talker", message_id="a")
    await _until(lambda: "model-started" in _events(tmp_path), "the model call started")
    process.kill()
    # While no worker serves the thread: a webhook retries its delivery and gets the first receipt at once
    # (the server knows the message); the next message waits on the server until a worker takes the thread.
    again = await asyncio.wait_for(runs.send(thread_id, "slow:10", agent="talker", message_id="a"), 10)
    assert again.model_dump(exclude={"duplicate"}) == first.model_dump(exclude={"duplicate"})
    env = {**os.environ, "TEMPORAL_ADDRESS": address}
    sender = subprocess.Popen(  # `rein send` says within 2 s that no worker has taken the thread yet
        [sys.executable, "-m", "rein.cli", "send", thread_id, "and then?", "--agent", "talker", "--id", "b",
         "--queue", queue, "--json"], cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    await _until(lambda: sender.poll() is not None or _said(sender), "rein send said it waits", timeout=20)
    process.start()
    out, err = await asyncio.to_thread(sender.communicate, timeout=90)
    assert sender.returncode == 0 and "no worker has taken thread" in err, err
    sent = json.loads(out)
    assert (sent["receipt"]["turn"], sent["result"]["output"]) == (2, "heard: and then?")
    answer = await asyncio.wait_for(runs.reply(first), 60)
    assert answer.output.endswith("heard: slow:10")
    users = [m.content for m in answer.session.messages if m.role == "user"]
    assert users[:1] == ["slow:10"] and users.count("slow:10") == 1
    view = await runs.thread(thread_id)
    assert (view.turns, view.status, view.queued) == (2, "idle", [])


async def test_the_command_line_one_line_errors_and_watching_a_thread(dev, worker, tmp_path):
    address, queue, _ = worker
    thread_id = f"cli-{uuid.uuid4().hex[:8]}"
    bad_mode = await asyncio.to_thread(_rein, address, "send", thread_id, "hi", "--agent", "talker", "--mode", "later")
    assert (bad_mode.returncode, bad_mode.stderr.count("\n")) == (2, 1), bad_mode.stderr
    assert "unknown --mode 'later'" in bad_mode.stderr
    nobody = await asyncio.to_thread(_rein, address, "send", thread_id, "hi", "--agent", "nobody-serves-this")
    assert nobody.returncode == 8 and nobody.stderr.count("\n") == 1, nobody.stderr
    busy = await asyncio.to_thread(_rein, address, "send", thread_id, "tool:hold", "--agent", "talker", "--queue",
                                   queue, "--no-wait")
    assert busy.returncode == 0, busy.stderr
    env = {**os.environ, "TEMPORAL_ADDRESS": address}
    watch = subprocess.Popen([sys.executable, "-m", "rein.cli", "watch", thread_id], cwd=str(ROOT), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        await _until(lambda: "tool-started" in _events(tmp_path), "the tool started")
        refused = await asyncio.to_thread(_rein, address, "send", thread_id, "now", "--agent", "talker", "--mode",
                                          "reject", "--queue", queue)
        assert refused.returncode == 5 and "busy" in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
        release(tmp_path)
        answered = await asyncio.to_thread(_rein, address, "send", thread_id, "next", "--agent", "talker", "--queue", queue)
        assert (answered.returncode, answered.stdout.strip()) == (0, "heard: next"), answered.stderr
        last = await asyncio.to_thread(_rein, address, "result", thread_id)  # a thread: its last turn's answer
        assert (last.returncode, last.stdout.strip()) == (0, "heard: next"), last.stderr
        cancelled = await asyncio.to_thread(_rein, address, "cancel", thread_id, "--wait")
        assert cancelled.returncode == 0, cancelled.stderr
        out, err = await asyncio.to_thread(watch.communicate, timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
    assert "turn 1" in out and "heard: tool:hold" in out and "turn 2" in out and "heard: next" in out, out + err
    assert watch.returncode == 10, err  # the thread was cancelled: watching ends with it


async def _idle(rows):
    found = await rows
    return found if found and found[0]["status"] == "idle" else None


async def test_a_thread_started_by_the_stock_cli_is_a_thread_to_rein(dev, worker, tmp_path):
    """`temporal workflow start-update-with-start` (no rein client, no memo) starts a thread: it marks itself,
    so `rein threads` lists it (once, also after it continued as new), and `rein result` reads its last turn."""
    address, queue, _ = worker
    thread_id = f"stock-{uuid.uuid4().hex[:8]}"
    started = await asyncio.to_thread(
        _temporal, address, "workflow", "start-update-with-start", "--workflow-id", thread_id, "--type", "AgentWorkflow",
        "--task-queue", queue, "--id-conflict-policy", "UseExisting", "--input", json.dumps({"agent": "talker", "thread": True}),
        "--update-name", "rein.send", "--update-input", json.dumps({"text": "hello from a shell"}),
        "--update-wait-for-stage", "accepted", "--output", "json")
    assert started.returncode == 0, started.stderr + started.stdout
    assert json.loads(started.stdout)["updateName"] == "rein.send", started.stdout
    runs = ReinClient(dev.client, queue)
    answer = await asyncio.wait_for(runs.turn_result(thread_id), 30)
    assert answer.output == "heard: hello from a shell"
    last = await asyncio.to_thread(_rein, address, "result", thread_id)
    assert (last.returncode, last.stdout.strip()) == (0, "heard: hello from a shell"), last.stderr

    async def listed() -> list[dict]:
        out = await asyncio.to_thread(_rein, address, "threads", "--json", "--limit", "500")
        assert out.returncode == 0, out.stderr
        return [row for row in json.loads(out.stdout) if row["thread_id"] == thread_id]

    rows = await poll(lambda: _idle(listed()), "rein threads listing the thread idle")  # visibility lags
    assert [(r["agent"], r["status"]) for r in rows] == [("talker", "idle")], rows
    assert rows[0]["age_s"] is not None and rows[0]["last_activity"]


@pytest.fixture(scope="module")
def calculator(dev, tmp_path_factory):
    """A worker process serving the example calculator (offline; every tool call waits for an approval)."""
    address = dev.client.service_client.config.target_host
    queue = f"calc-{uuid.uuid4().hex[:8]}"
    log = tmp_path_factory.mktemp("calculator") / "worker.log"
    process = WorkerProcess(address, ["rein.examples.calculator:agent"], queue, log).start()
    try:
        yield address, queue
    finally:
        process.stop()


def _waits_line(turn: int, thread_id: str, call: str) -> str:
    return (f"rein: turn {turn} of {thread_id} waits for a person (need_approval): {call}; answer it with "
            f"`rein approve {thread_id}` (or deny/answer)")


SECOND = {
    "queue": ("What is 4 + 4?", True, 7, "", ["second is turn 2 of {t}, after 1 turn",
                                              _waits_line(2, "{t}", "add(a=4.0, b=4.0)")]),
    "steer": ("What is 4?", True, 0, "The answer is 4.\n", [
        "second joins turn 1 of {t} (steer); the turn waits for a person (need_approval): the message is read once "
        "that is decided"]),
    "interrupt": ("What is 4?", False, 0, "The answer is 4.\n", [
        "second joins turn 1 of {t} (interrupt); the turn waited for a person (need_approval): the calls it waited "
        "for are denied"]),
    "reject": ("What is 4?", False, 5, "", ["rein: thread {t}: busy: turn 1 is under way (mode reject)"]),
}
"""The second sender in each mode: its question, whether turn 1 is approved while it waits, and what it says."""


@pytest.mark.parametrize("mode", list(SECOND))
async def test_two_senders_on_one_thread_each_hear_their_own_turn(dev, calculator, mode):
    """`rein send T 'What is 2 + 3?'` waits for approval (exit 7); a second `rein send` queues turn 2, steers or
    interrupts turn 1, or is refused; turn 1 is approved meanwhile (queue, steer). The second sender prints its own
    turn's outcome, never turn 1's "The answer is 5.": queued, that turn 2 waits for a person (its own call); a steer,
    turn 1's answer to it once the decision let the turn go on; an interrupt, the answer once it denied the call."""
    address, queue = calculator
    runs = ReinClient(dev.client, queue)
    thread_id = f"two-{mode}-{uuid.uuid4().hex[:6]}"
    first = await asyncio.to_thread(_rein, address, "send", thread_id, "What is 2 + 3?", "--agent", "calculator",
                                    "--queue", queue, "--id", "first")
    assert (first.returncode, first.stdout) == (7, ""), first.stderr
    assert first.stderr.splitlines() == [f"first is turn 1 of {thread_id}", _waits_line(1, thread_id, "add(a=2.0, b=3.0)")]
    question, approve, code, said, lines = SECOND[mode]
    env = {**os.environ, "TEMPORAL_ADDRESS": address}
    second = subprocess.Popen([sys.executable, "-m", "rein.cli", "send", thread_id, question, "--agent", "calculator",
                               "--mode", mode, "--id", "second"], cwd=str(ROOT), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        if approve:
            await poll(lambda: _waits(runs, thread_id), "the second message to be taken")
            approved = await asyncio.to_thread(_rein, address, "approve", thread_id)
            assert approved.returncode == 0, approved.stderr
        out, err = await asyncio.to_thread(second.communicate, timeout=60)
    finally:
        if second.poll() is None:
            second.kill()
    assert (second.returncode, out) == (code, said), err
    assert err.splitlines() == [line.format(t=thread_id) for line in lines]
    await runs.cancel(thread_id)

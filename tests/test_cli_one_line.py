"""What a person meets on the expected failure paths: one line and a documented exit code.

Each kind goes through the real entry point once (the `rein` console script, the demo script, `rein worker`,
`rein.client.connect()`), against the module's dev server; further commands of a kind run in-process
(`rein.cli.main`: the same exit code and stderr line). Workers are in-process unless the worker's own
log is what is checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError

import rein
from rein import Agent, LoopConfig
from rein.cli import (
    EXIT_CANCELLED,
    EXIT_NEEDS_PERSON,
    EXIT_NO_WORKER,
    EXIT_RUN_FAILED,
    EXIT_USAGE,
)
from rein.client import ReinClient, connect
from rein.core.contract import agent_task_queue
from tests.support.embedded import embedded_server  # noqa: F401  (a fixture)
from tests.support.in_process import rein_inproc
from tests.support.processes import stop_process, wait_for_text
from tests.support.providers import OpsModel, restart
from tests.support.runs import left_waiting
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")


NAME = f"oneline-{uuid.uuid4().hex[:6]}"
AGENT = Agent(provider=OpsModel(), tools=[restart], config=LoopConfig(permission="ask"), name=NAME)


DROPPED = ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS", "REIN_TASK_QUEUE", "REIN_CODEC_KEY", "REIN_MODEL",
           "OPENAI_API_KEY")
"""What neither the `rein` processes nor the in-process commands take from the test's environment."""


def _environ(**extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in DROPPED}
    environ.update(extra)
    return environ


def rein_cli(*argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([REIN_BIN, *argv], cwd=str(ROOT), env=_environ(**env), capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL, check=False)


def one_line(proc: subprocess.CompletedProcess) -> str:
    """The single `rein: ...` line on stderr (asserts there is exactly one and no traceback)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rein: "), proc.stderr
    return lines[0]


async def cli(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """The real `rein` process."""
    return await asyncio.to_thread(rein_cli, *argv, **env)


@pytest.fixture
def here(capsys: pytest.CaptureFixture[str]):  # noqa: ANN201
    """`rein ARGV` in this process (rein.cli.main): the same exit code, stdout and stderr as `cli`."""

    async def run(*argv: str, **env: str) -> subprocess.CompletedProcess:
        return await asyncio.to_thread(rein_inproc, *argv, drop=DROPPED, **env)

    return run


def address_of(dev) -> str:  # noqa: ANN001
    return dev.client.service_client.config.target_host


async def test_start_refuses_an_agent_no_worker_knows_and_uses_the_agents_queue(dev, here) -> None:  # noqa: ANN001
    address = address_of(dev)
    nosuch = f"nosuch-{uuid.uuid4().hex[:6]}"
    # Its own shared queue: the suite's other workers on `rein` (one that just stopped makes the check
    # wait for it) are not what this is about; nor is the wait for a worker starting meanwhile (0 s:
    # test_start_finds_a_worker_that_starts_while_it_looks is about that).
    shared = {"REIN_TASK_QUEUE": f"shared-{uuid.uuid4().hex[:6]}", "REIN_WORKER_GRACE_S": "0"}
    proc = await cli("start", nosuch, "hi", "--address", address, **shared)
    assert proc.returncode == EXIT_NO_WORKER, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    line = one_line(proc)
    assert "no worker serves agent" in line and "--no-check" in line and shared["REIN_TASK_QUEUE"] in line
    ids = [w.id async for w in dev.client.list_workflows(f'ReinAgent="{nosuch}"')]
    assert ids == []  # nothing was started
    debug = await here("start", nosuch, "hi", "--address", address, REIN_DEBUG="1", **shared)
    assert debug.returncode == EXIT_NO_WORKER and "Traceback" in debug.stderr  # REIN_DEBUG=1 keeps it

    # --no-check starts it anyway, on the agent's own queue, where a worker for it would look.
    lonely = f"lonely-{uuid.uuid4().hex[:6]}"
    proc = await here("start", lonely, "hi", "--no-check", "--address", address)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    assert (await dev.client.get_workflow_handle(run_id).describe()).task_queue == agent_task_queue(lonely)

    # With a worker for the agent (as a script or `rein worker` serves it), `rein start` sends the run there.
    async with rein.create_worker(dev.client, agents=[AGENT], task_queue=agent_task_queue(NAME)):
        # The private shared queue again: a worker of another test that stopped on `rein` must not end the wait
        # for this one's first poll (under load it comes after the command has looked).
        own_shared = {"REIN_TASK_QUEUE": shared["REIN_TASK_QUEUE"], "REIN_WORKER_GRACE_S": "30"}
        proc = await here("start", NAME, "billing now", "--address", address, **own_shared)
        assert proc.returncode == 0, proc.stderr
        run_id = proc.stdout.strip()
        client = ReinClient(dev.client)

        async def waiting() -> bool:
            return (await client.status(run_id)).status == "waiting_approval"

        await poll(waiting, f"{run_id} to wait for approval", 60, interval=0.1)
    assert (await dev.client.get_workflow_handle(run_id).describe()).task_queue == agent_task_queue(NAME)


async def test_status_of_a_run_nobody_serves_says_so(dev, here) -> None:  # noqa: ANN001
    queue = f"gone-{uuid.uuid4().hex[:8]}"
    run_id = await left_waiting(dev.client, AGENT, queue, "billing please")
    # The worker has just stopped: the server still lists it as a poller for a minute. The query it
    # never answers races the history at once (REIN_QUERY_GRACE_S=0) instead of after 3 s.
    unanswered = {"REIN_QUERY_GRACE_S": "0"}
    proc = await here("status", run_id, "--address", address_of(dev), "--json", **unanswered)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "waiting_approval" and data["served"] is False and data["task_queue"] == queue
    proc = await here("status", run_id, "--address", address_of(dev), **unanswered)
    assert "none serves it" in proc.stdout and queue in proc.stdout
    assert f"rein approve {run_id}" in proc.stdout and "--wait" in proc.stdout  # a decision now would not be sent


async def test_cancelled_run_result_and_watch(dev, here) -> None:  # noqa: ANN001
    queue = f"cancel-{uuid.uuid4().hex[:8]}"
    client = ReinClient(dev.client, task_queue=queue)
    address = address_of(dev)
    async with rein.create_worker(dev.client, agents=[AGENT], task_queue=queue):
        run_id = (await client.start(NAME, "billing please")).id

        async def waiting() -> bool:
            return (await client.status(run_id)).status == "waiting_approval"

        await poll(waiting, f"{run_id} to wait for approval", 60, interval=0.1)
        await client.cancel(run_id, reason="changed my mind", wait=True)
        with contextlib.suppress(WorkflowFailureError):  # closed as Temporal's CANCELED, or completed
            await client.handle(run_id).result()
        # The worker still serves the run: the CLI's queries are answered at once. A worker stopped a
        # moment ago would look alive, and each query would wait out its grace before replaying.
        proc = await here("result", run_id, "--address", address)
        watched = await cli("watch", run_id, "--address", address)  # the real process: its stdout is a pipe
    assert proc.returncode == EXIT_CANCELLED, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert one_line(proc) == f"rein: run {run_id} was cancelled: changed my mind"

    assert watched.returncode == EXIT_CANCELLED
    assert "model" in watched.stdout and "restart" in watched.stdout  # its steps, on stdout
    assert one_line(watched) == f"rein: run {run_id} was cancelled: changed my mind"


async def test_list_is_newest_first_even_with_an_old_open_run(dev, here) -> None:  # noqa: ANN001
    agent = f"order-{uuid.uuid4().hex[:6]}"
    address = address_of(dev)
    client = ReinClient(dev.client, task_queue=f"nobody-{uuid.uuid4().hex[:8]}")
    old = (await client.start(agent, "waits forever")).id  # open: nobody serves it
    queue = f"order-{uuid.uuid4().hex[:8]}"
    served = ReinClient(dev.client, task_queue=queue)
    named = Agent(provider=OpsModel(), tools=[restart], name=agent)
    async with rein.create_worker(dev.client, agents=[named], task_queue=queue):
        new = (await served.start(agent, "billing")).id
        await served.handle(new).result()

    async def listed() -> bool:
        return len([w async for w in dev.client.list_workflows(f'ReinAgent="{agent}"')]) == 2

    await poll(listed, "both runs in visibility", 30, interval=0.1)
    proc = await here("list", "--agent", agent, "--json", "--address", address)
    assert [row["run_id"] for row in json.loads(proc.stdout)] == [new, old]
    proc = await here("list", "--agent", agent, "--limit", "1", "--json", "--address", address)
    assert [row["run_id"] for row in json.loads(proc.stdout)] == [new]


async def test_encrypted_run_read_without_the_key(dev, here) -> None:  # noqa: ANN001
    from temporalio.client import Client

    from rein.temporal.codec import codec_from_keys
    from rein.temporal.converter import rein_data_converter

    key = "k1:" + __import__("base64").b64encode(b"\x07" * 32).decode()
    converter = rein_data_converter(dataclasses.replace(dev.client.data_converter, payload_codec=codec_from_keys(key)))
    secret = Client(**{**dev.client.config(), "data_converter": converter})
    queue = f"enc-{uuid.uuid4().hex[:8]}"
    named = Agent(provider=OpsModel(), tools=[restart], name=f"enc-{uuid.uuid4().hex[:6]}")
    async with rein.create_worker(secret, agents=[named], task_queue=queue):
        handle = await ReinClient(secret, task_queue=queue).start(named.name, "billing")
        await handle.result()
    for command, run in (("result", cli), ("show", here), ("watch", here)):  # the first as the real process
        proc = await run(command, handle.id, "--address", address_of(dev))
        assert proc.returncode != 0, (command, proc.stdout)
        line = one_line(proc)
        assert "encrypted" in line and "REIN_CODEC_KEY is not set" in line and "KeyError" not in line, line
    # Its worker has just stopped: the session and steps are replayed from history at once.
    ok = await here("result", handle.id, "--address", address_of(dev), REIN_CODEC_KEY=key, REIN_QUERY_GRACE_S="0")
    assert ok.returncode == 0 and "restarted" in ok.stdout, ok.stderr


async def test_connect_gives_a_client_that_streams_a_finished_run_with_no_worker(dev, monkeypatch) -> None:  # noqa: ANN001
    from temporalio.client import Client

    client = await connect(address_of(dev))
    assert isinstance(client, Client)  # a temporalio Client: workers and raw calls take it
    queue = f"conn-{uuid.uuid4().hex[:8]}"
    client.task_queue = queue
    async with rein.create_worker(client, agents=[Agent(provider=OpsModel(), tools=[restart], name=NAME + "-c")],
                                  task_queue=queue):
        handle = await client.start(NAME + "-c", "billing")
        await handle.result()
    # The worker is gone; the run has ended: its stream is read from history, whole (and its result's
    # session and steps replayed at once: the gone worker still looks alive to the server for a minute).
    monkeypatch.setenv("REIN_QUERY_GRACE_S", "0")
    chunks = [chunk async for chunk in client.stream(handle.id)]
    kinds = [c.type for c in chunks]
    assert kinds[-1] == "done" and "tool_calls" in kinds and kinds.count("step") >= 3, kinds
    text = "".join(c.text or "" for c in chunks if c.type == "text")
    assert text == "Report: billing restarted"
    assert (await client.result(handle.id)).output == "Report: billing restarted"


async def test_small_usage_mistakes(here) -> None:  # noqa: ANN001
    proc = await here("new", "")
    assert proc.returncode == EXIT_USAGE
    assert "name" in one_line(proc)
    proc = await here("--help")
    assert proc.returncode == 0 and "--debug" in proc.stdout and "REIN_DEBUG" in proc.stdout


@pytest.mark.usefixtures("embedded_server")
def test_run_with_a_rejected_key_or_an_outage_is_one_line_per_event() -> None:
    """`rein run` (its worker in-process): no `Completing activity as failed` traceback first."""
    proc = rein_cli("run", "tests.agents.failing:rejected", "hi")
    assert proc.returncode == EXIT_RUN_FAILED, (proc.returncode, proc.stdout, proc.stderr)
    line = one_line(proc)
    assert "HTTP 401" in line and "check the key in the worker's environment" in line, line

    proc = rein_cli("run", "tests.agents.failing:outage", "hi")  # no terminal: stops at the error interrupt
    assert proc.returncode == EXIT_NEEDS_PERSON, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    attempts = [line for line in proc.stderr.splitlines() if line.startswith("rein.call_model failed")]
    assert attempts == [f"rein.call_model failed (Unavailable, attempt {n}, retried while attempts remain): "
                        "Unavailable: the vendor is down" for n in (1, 2)], proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("rein: stopped: run failing-outage-")


@pytest.mark.usefixtures("embedded_server")
def test_demo_with_a_missing_key_is_one_line() -> None:
    proc = subprocess.run([sys.executable, "examples/calculator.py"], cwd=str(ROOT), timeout=180,
                          env=_environ(REIN_MODEL="openai/gpt-4o"), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stdout.splitlines() == ["> What is 12 + 30, times 2?"]
    line = one_line(proc)
    assert "No API key for openai/gpt-4o: set OPENAI_API_KEY" in line and "REIN_DEBUG=1" in line


@pytest.mark.usefixtures("embedded_server")
def test_demo_shows_the_whole_run_after_resumes() -> None:
    proc = subprocess.run([sys.executable, "examples/calculator.py"], cwd=str(ROOT), timeout=180,
                          env=_environ(), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    steps = [line.split(":", 1)[0].strip() for line in proc.stdout.splitlines() if line.strip().startswith("step ")]
    assert steps == [f"step {n}" for n in range(1, 6)], proc.stdout  # model, add, model, multiply, model


def test_worker_logs_one_line_for_an_unknown_agent(dev, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """`rein worker` on a shared queue: a run (or `rein start --queue`) naming an agent it lacks."""
    address = address_of(dev)
    queue = f"shared-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen([REIN_BIN, "worker", "--agent", "rein.examples.calculator:agent", "--task-queue", queue,
                                   "--address", address], cwd=str(ROOT), env=_environ(), stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_text(log, "serving:", worker, 120)
        proc = rein_inproc("start", "nosuchagent", "hi", "--queue", queue, "--address", address, drop=DROPPED)
        assert proc.returncode == EXIT_NO_WORKER, (proc.returncode, proc.stderr)
        assert repr(queue) in one_line(proc)
        wait_for_text(log, "UnknownAgent", worker, 60)
        proc = rein_inproc("start", "calculator", "what is 2 + 2?", "--queue", queue, "--address", address,
                         drop=DROPPED)
        assert proc.returncode == 0, proc.stderr  # a worker there knows it: started
    finally:
        stop_process(worker, 15)
    text = log.read_text()
    assert "Traceback" not in text, text
    failures = [line for line in text.splitlines() if "UnknownAgent" in line]
    assert len(failures) == 1 and "rein.describe_agent failed (UnknownAgent, not retried)" in failures[0], text
    assert "rein worker --agent" in failures[0]


async def test_the_docs_python_snippet_runs_as_written(dev) -> None:  # noqa: ANN001
    """docs/cli.md's `connect()` snippet, in another process, against a worker serving the calculator."""
    import re

    from rein.examples.calculator import agent as calculator

    (code,) = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "cli.md").read_text(encoding="utf-8"), re.DOTALL)
    script = code + "\nimport asyncio\nasyncio.run(main())\n"
    async with rein.create_worker(dev.client, agents=[calculator], task_queue="rein"):
        proc = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", script], cwd="/", env=_environ(TEMPORAL_ADDRESS=address_of(dev)),
            capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[-1] == "The answer is 42.", proc.stdout  # from / : rein.examples imports from anywhere
    assert "tool_calls " in lines and lines[-2].startswith("interrupt"), proc.stdout


async def test_start_finds_a_worker_that_starts_while_it_looks(dev, monkeypatch) -> None:  # noqa: ANN001
    """A worker started a moment before `rein start` (a script, a deploy) may not have polled yet: the
    check looks again for a while instead of refusing at once (this once failed test_fleet_cli)."""
    from rein import Agent, MockProvider, create_worker
    from rein.client import ReinClient
    from rein.ops.worker_lookup import queue_for

    monkeypatch.setenv("REIN_WORKER_GRACE_S", "60")  # the mechanism, not the value, under load
    agent = Agent(provider=MockProvider(["fine"]), name=f"late-{uuid.uuid4().hex[:6]}")
    tq = f"late-{uuid.uuid4().hex[:6]}"
    looking = asyncio.create_task(queue_for(ReinClient(dev.client, tq), agent.name, tq))
    await asyncio.sleep(0.5)
    assert not looking.done(), looking  # nothing polls `tq` yet: still looking, not refused
    async with create_worker(dev.client, agents=[agent], task_queue=tq):
        assert await looking == tq


def test_the_grace_settings_come_from_the_environment(monkeypatch) -> None:  # noqa: ANN001
    """REIN_WORKER_GRACE_S and REIN_QUERY_GRACE_S (docs/cli.md), read at each use (rein.settings)."""
    from rein import settings

    monkeypatch.delenv("REIN_WORKER_GRACE_S", raising=False)
    assert settings.current().worker_grace_s == 3.0
    monkeypatch.setenv("REIN_WORKER_GRACE_S", "0.5")
    assert settings.current().worker_grace_s == 0.5
    for bad in ("-1", "soon"):
        monkeypatch.setenv("REIN_WORKER_GRACE_S", bad)
        with pytest.raises(settings.SettingsError, match=f"REIN_WORKER_GRACE_S='{bad}'; expected a number of seconds"):
            settings.current()

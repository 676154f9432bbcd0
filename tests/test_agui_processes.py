"""The AG-UI endpoint across real processes: a worker killed while the model streams to the page, and a client
tool whose result comes after the page and the serving process (`rein serve`) are gone, from other processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from rein.client import ReinClient
from rein.durable.embedded_server import free_port
from rein.web.agui import app
from tests.agents.agui import answer_pieces
from tests.support.processes import ROOT, WorkerProcess, stop_process, wait_for_text
from tests.support.waiting import poll
from tests.test_agui import body, drive, serve, user

pytestmark = pytest.mark.timeout(240)


async def test_a_worker_killed_mid_turn_is_replaced_and_the_page_gets_the_whole_answer_once(dev, tmp_path: Path) -> None:
    address = dev.client.service_client.config.target_host
    queue = f"agui-slow-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(address, ["tests.agents.agui:slow"], queue, tmp_path / "worker.log").start()
    url, server, task = await serve(app(dev.client, agents=["slow"], task_queue=queue, open=True))  # loopback
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    texts: list[str] = []
    types: list[str] = []
    try:
        async with httpx.AsyncClient(timeout=120) as http:
            async with http.stream("POST", f"{url}/slow", json=body(thread_id, user("go"))) as response:
                async for line in response.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    types.append(event["type"])
                    if event["type"] == "TEXT_MESSAGE_CONTENT":
                        texts.append(event["delta"])
                        if len(texts) == 2:  # the model is answering: its worker dies, another takes the call
                            worker.kill()
                            worker = WorkerProcess(address, ["tests.agents.agui:slow"], queue, tmp_path / "worker2.log")
                            worker.start()
                    if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                        break
        assert types[-1] == "RUN_FINISHED" and "".join(texts) == "".join(answer_pieces())
        assert types.count("TEXT_MESSAGE_START") == 1
    finally:
        worker.stop()
        server.should_exit = True
        await task


def _rein(address: str, *args: str, **kwargs: object) -> subprocess.Popen | subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REIN_TASK_QUEUE",) and not k.startswith("REIN_CODEC")}
    env["TEMPORAL_ADDRESS"] = address
    command = [sys.executable, "-m", "rein.cli", *args]
    if "log" in kwargs:
        with open(kwargs["log"], "ab") as out:  # type: ignore[arg-type]
            return subprocess.Popen(command, cwd=str(ROOT), env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
    return subprocess.run(command, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=60)


def _serve(address: str, queue: str, log: Path, *agents: str) -> tuple[subprocess.Popen, str, str]:
    """`rein serve` (serving `agents`, or any agent a worker serves), its AG-UI URL for the asker, and the token of
    the sign-in link it printed (no sign-in configured: its own, kept in REIN_HOME)."""
    port = free_port()
    named = [arg for agent in agents for arg in ("--agent", agent)]
    process = _rein(address, "serve", *named, "--port", str(port), "--task-queue", queue, log=log)
    assert isinstance(process, subprocess.Popen)
    wait_for_text(log, "sign in: ", process, 60)
    token = log.read_text().split(f"sign in: http://127.0.0.1:{port}/inbox#token=", 1)[1].split()[0]
    return process, f"http://127.0.0.1:{port}/agui/asker", token


async def test_a_client_tool_waits_durably_and_another_process_answers_it_through_rein_serve(dev, tmp_path: Path) -> None:
    address = dev.client.service_client.config.target_host
    queue = f"agui-ask-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(address, ["tests.agents.agui:asker"], queue, tmp_path / "worker.log").start()
    thread_id = f"agui-{uuid.uuid4().hex[:8]}"
    first, url, token = _serve(address, queue, tmp_path / "serve1.log", "asker")
    second = None
    try:
        [refused] = await drive(url, thread_id, [{"do": "send", "text": "pick a colour"}])  # not signed in
        assert refused["outcome"] != "success" and "401" in json.dumps(refused), refused
        [asked] = await drive(url, thread_id, [{"do": "send", "text": "pick a colour"}], AGUI_TOKEN=token)
        assert asked["outcome"] == "success" and len(asked["pending"]) == 1
        stop_process(first)  # the page is gone (its driver exited) and so is the process that served it
        runs = ReinClient(dev.client, queue)
        listed = _rein(address, "threads")
        assert thread_id in listed.stdout and "waiting_input" in listed.stdout.split(thread_id)[1].splitlines()[0]
        await poll(lambda: _waiting(runs, thread_id), "the thread to list as waiting_input")
        second, url, again = _serve(address, queue, tmp_path / "serve2.log")  # no --agent: any agent a worker serves
        assert again == token  # the token is kept: yesterday's link still signs in
        async with httpx.AsyncClient(timeout=60) as http:
            missing = await http.post(url.replace("/asker", "/nobody"), json=body(thread_id, user("hi")),
                                      headers={"Authorization": f"Bearer {token}"})
            assert missing.status_code == 404 and "no worker serves" in missing.json()["error"]
        taken = url.split(":")[2].split("/")[0]  # the second `rein serve` listens there since its first line
        clash = _rein(address, "serve", "--port", taken)
        assert clash.returncode == 1 and clash.stderr.count("\n") == 1, clash.stderr
        assert f"cannot listen on 127.0.0.1:{taken}" in clash.stderr, clash.stderr
        [told] = await drive(url, thread_id, [{"do": "tool", "content": "teal", "call": asked["pending"][0]}],
                             AGUI_TOKEN=token)
        assert told["outcome"] == "success" and told["text"] == "the page said: teal"
        assert (await runs.thread(thread_id)).status == "idle"
    finally:
        stop_process(first)
        stop_process(second)
        worker.stop()


async def _waiting(runs: ReinClient, thread_id: str) -> bool:
    return thread_id in await runs.waiting("waiting_input")

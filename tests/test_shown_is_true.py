"""What the CLI shows is what is true (issue 45's smaller items), through `rein.cli.main` in this process (what a
command prints and its exit code; tests/support/in_process.py) against the session's dev server, with the agent
served by an in-process worker on its own queue; a refusal's one line and exit code, `rein watch`'s stream and
the benchmark through real processes:

a re-sent message id is said to be a repeat; a message for another agent's thread is refused; a hint names
only options of the command that printed it; `rein show THREAD` counts every turn's tokens; `rein threads
--help` names the columns it shows; a paused schedule has no next start; `rein watch` ends streamed text
before the next line; `bench/threads.py` times each send to its own turn.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest_asyncio

import rein
from rein import Agent, Completion, LoopConfig, Message, Usage
from rein.cli import EXIT_NO_WORKER, EXIT_USAGE
from rein.client import ReinClient
from rein.core.contract import agent_task_queue
from tests.support.in_process import rein_inproc
from tests.support.providers import StreamsItsCompletion
from tests.test_cli import assert_one_line_error, rein_cli
from tests.test_docs_commands import cli_tree, hint_problems

ROOT = Path(__file__).resolve().parent.parent


class Heard(StreamsItsCompletion):
    """Stateless: "heard: <the last message>", streamed; its usage grows with the conversation, so each turn's
    tokens differ from the last one's."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        last = next(m.content for m in reversed(messages) if m.role == "user")
        return Completion(message=Message(role="assistant", content=f"heard: {last}"), finish_reason="stop",
                          usage=Usage(input_tokens=10 * len(messages), output_tokens=3))


class Served:
    def __init__(self, dev: Any, agent: Agent) -> None:
        self.client = ReinClient(dev.client, agent_task_queue(agent.name))
        self.name = agent.name
        self.address = dev.client.service_client.config.target_host

    def rein(self, *argv: str, **env: str) -> subprocess.CompletedProcess:
        return rein_inproc(*argv, "--address", self.address, **env)

    async def cli(self, *argv: str, **env: str) -> subprocess.CompletedProcess:
        return await asyncio.to_thread(self.rein, *argv, **env)

    async def process(self, *argv: str, **env: str) -> subprocess.CompletedProcess:
        """The real console script, for what only a process shows (its exit status, its stderr)."""
        return await asyncio.to_thread(rein_cli, *argv, "--address", self.address, **env)

    def thread_id(self) -> str:
        return f"talk-{uuid.uuid4().hex[:8]}"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def served(dev):  # noqa: ANN001
    agent = Agent(provider=Heard(), name=f"talker-{uuid.uuid4().hex[:6]}", config=LoopConfig(detect_loops=False))
    async with rein.create_worker(dev.client, agents=[agent], task_queue=agent_task_queue(agent.name)):
        yield Served(dev, agent)


async def test_a_resent_message_id_is_said_to_be_a_repeat(served: Served) -> None:
    thread = served.thread_id()
    first = await served.cli("send", thread, "hello", "--agent", served.name, "--id", "m1", "--no-wait", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["receipt"]["duplicate"] is False
    again = await served.cli("send", thread, "hello", "--agent", served.name, "--id", "m1", "--no-wait", "--json")
    receipt = json.loads(again.stdout)["receipt"]
    assert (receipt["duplicate"], receipt["turn"], receipt["message_id"]) == (True, 1, "m1")
    said = await served.cli("send", thread, "hello", "--agent", served.name, "--id", "m1", "--no-wait")
    assert said.stdout == f"a repeat (the same --id, taken once): m1 is turn 1 of {thread}\n", said.stdout
    fresh = await served.client.send(thread, "and then?", agent=served.name, message_id="m2")
    assert not fresh.duplicate and fresh.turn == 2
    assert (await served.client.send(thread, "and then?", agent=served.name, message_id="m2")).duplicate
    await served.client.reply(fresh)
    assert (await served.client.thread(thread)).turns == 2  # each message once


async def test_a_message_for_another_agents_thread_is_refused(served: Served) -> None:
    thread = served.thread_id()
    await served.client.reply(await served.client.send(thread, "hello", agent=served.name))
    refused = await served.process("send", thread, "hi", "--agent", "someone-else", "--no-wait")
    line = assert_one_line_error(refused, EXIT_USAGE, f"thread {thread} is agent {served.name!r}'s, not 'someone-else'",
                                 "nothing was sent")
    assert hint_problems(cli_tree(), line, "send") == []
    assert (await served.client.thread(thread)).turns == 1


async def test_a_hint_names_only_options_of_the_command_that_prints_it(served: Served) -> None:
    nobody = f"nobody-{uuid.uuid4().hex[:6]}"
    root = cli_tree()
    for argv, command in ((["send", served.thread_id(), "hi", "--agent", nobody], "send"),
                          (["start", nobody, "hi"], "start"),
                          (["schedule", "create", f"s-{nobody}", "--agent", nobody, "--prompt", "p", "--every", "1h"],
                           "schedule create")):
        line = assert_one_line_error(await served.cli(*argv, REIN_WORKER_GRACE_S="0"), EXIT_NO_WORKER,
                                     f"no worker serves agent {nobody!r}", "`rein worker --agent MODULE:ATTR`")
        assert hint_problems(root, line, command) == [], line
        assert ("--no-check" in line) == (command != "send"), line  # said where the command takes it


async def test_show_of_a_thread_counts_every_turns_tokens(served: Served) -> None:
    thread = served.thread_id()
    turns = [await served.client.reply(await served.client.send(thread, text, agent=served.name))
             for text in ("hello", "and again")]
    each = [turn.usage.total_tokens for turn in turns]
    assert each[0] != each[1]  # the last turn's alone would read differently
    shown = json.loads((await served.cli("show", thread, "--json")).stdout)
    assert (shown["usage"]["input_tokens"] + shown["usage"]["output_tokens"], shown["turns"]) == (sum(each), 2)
    table = " ".join((await served.cli("show", thread)).stdout.split())
    assert f"tokens {sum(each)} ({sum(t.usage.input_tokens for t in turns)} in, 6 out), all 2 turns" in table, table


async def test_threads_help_names_the_columns_it_shows(served: Served) -> None:
    thread = served.thread_id()
    await served.client.reply(await served.client.send(thread, "hello", agent=served.name))
    help_text = " ".join((await served.cli("threads", "--help")).stdout.split())
    assert "last activity" not in help_text
    assert "id, agent, status (idle between turns) and age" in help_text
    listed = await served.cli("threads", "--limit", "200")
    assert listed.stdout.splitlines()[0].split() == ["thread", "agent", "status", "age"], listed.stdout


async def test_a_paused_schedule_shows_no_next_start(served: Served) -> None:
    schedule = f"digest-{uuid.uuid4().hex[:6]}"
    made = await served.cli("schedule", "create", schedule, "--agent", served.name, "--prompt", "p", "--every", "1h",
                            "--paused")
    assert made.returncode == 0, made.stderr
    try:
        assert "next start none (paused)" in made.stderr
        (row,) = [r for r in json.loads((await served.cli("schedule", "list", "--json")).stdout)
                  if r["schedule_id"] == schedule]
        assert (row["paused"], row["next"]) == (True, None)
        assert json.loads((await served.cli("schedule", "describe", schedule, "--json")).stdout)["next"] == []
        assert (await served.cli("schedule", "unpause", schedule)).returncode == 0
        assert len(json.loads((await served.cli("schedule", "describe", schedule, "--json")).stdout)["next"]) == 3
    finally:
        await served.cli("schedule", "delete", schedule)


async def test_watch_ends_the_streamed_text_before_the_next_line(served: Served) -> None:
    thread = served.thread_id()
    await served.client.reply(await served.client.send(thread, "hello", agent=served.name, stream=True))
    watching = subprocess.Popen([sys.executable, "-m", "rein.cli", "watch", thread, "--address", served.address],
                                cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
    try:
        assert watching.stdout is not None
        lines = []
        while not any("✓" in line for line in lines):  # the turn's text, then its step
            lines.append(await asyncio.to_thread(watching.stdout.readline))  # the worker is on this loop
            assert lines[-1], (lines, watching.poll(), watching.stderr and watching.stderr.read())
        await served.client.cancel(thread, reason="the test is done", wait=True)  # the thread ends: watch ends
        out, _ = await asyncio.to_thread(watching.communicate, timeout=60)
    finally:
        if watching.poll() is None:
            watching.kill()
    text = "".join(lines) + out
    assert "heard: hello\n" in text, text
    assert all(line.lstrip().startswith("✓") for line in text.splitlines() if "✓" in line), text


def test_the_thread_benchmark_times_each_send_to_its_own_turn(tmp_path: Path) -> None:
    """bench/threads.py's reader replays the thread's stream from its start (the warm-up turn too): before, each
    sample took the previous turn's first text, and the p50 read -20 ms."""
    out = tmp_path / "threads.json"
    proc = subprocess.run([sys.executable, "bench/threads.py", "--samples", "3", "--turns", "2", "--out", str(out)],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    latency = json.loads(out.read_text())["latency"]
    for kind in ("thread", "new run"):
        assert len(latency[kind]["samples_ms"]) == 3 and min(latency[kind]["samples_ms"]) > 0, latency

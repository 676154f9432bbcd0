"""A durable run's stream, read from any process (rein.client.ReinClient.stream, Agent.astream)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rein import Agent, Completion, LoopConfig, Message, MockProvider, StreamChunk, ToolCall, Usage
from rein.client import ReinClient
from rein.durable.embedded_server import DevServer, start_dev_server
from rein.durable.temporal_worker import create_worker
from tests.support.processes import stop_process, wait_for_text
from tests.support.tools import add

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120

READER = textwrap.dedent('''
    import asyncio, json, os
    from pathlib import Path
    from temporalio.client import Client
    from rein.client import ReinClient
    from rein.temporal import ReinPlugin

    async def main():
        client = await Client.connect(os.environ["STREAM_TEMPORAL"], plugins=[ReinPlugin()])
        runs = ReinClient(client, task_queue=os.environ["STREAM_QUEUE"])
        handle = await runs.start("streamer", "Say hello slowly", stream=True)
        out = Path(os.environ["REINTEST_DIR"])
        chunks = []
        async for chunk in runs.stream(handle.id):
            if chunk.type == "text" and not (out / "go").exists():
                with open(out / "events", "a") as f:
                    f.write("reader-got-text\\n")
                (out / "go").write_text("go")  # lets the model finish: only now can its activity complete
            chunks.append(chunk.model_dump(mode="json"))
        print(json.dumps({"run_id": handle.id, "chunks": chunks}), flush=True)

    asyncio.run(main())
    # temporalio's Rust threads can abort a short client process during interpreter teardown
    # (temporalio/sdk-python#300, "PyGILState_Release"): skip the teardown, as rein's CLI does.
    os._exit(0)
''')


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    dev = start_dev_server()
    try:
        yield dev
    finally:
        dev.stop()


def _env(server: DevServer, out: Path, queue: str) -> dict[str, str]:
    drop = ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_PROFILE", "REIN_TASK_QUEUE", "REIN_ENGINE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(REINTEST_DIR=str(out), REIN_HOME=str(out / "home"), STREAM_TEMPORAL=server.address,
               STREAM_QUEUE=queue, PYTHONUNBUFFERED="1")
    return env


def test_text_reaches_a_reader_in_another_process_while_the_remote_model_runs(server: DevServer, tmp_path: Path):
    """worker.py in one process, the reader in another: the model finishes only after the reader got text."""
    queue = f"stream-{uuid.uuid4().hex[:8]}"
    env = _env(server, tmp_path, queue)
    worker_log = tmp_path / "worker.log"
    with open(worker_log, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "worker.py", "--agent", "tests.agents.streaming:agent", "--task-queue", queue,
             "--address", server.address],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    try:
        wait_for_text(worker_log, "rein worker on", worker, TIMEOUT)
        reader = subprocess.run(
            [sys.executable, "-c", READER], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        assert reader.returncode == 0, reader.stderr[-3000:] + worker_log.read_text(errors="replace")[-3000:]
    finally:
        stop_process(worker)
    report = json.loads(reader.stdout.strip().splitlines()[-1])
    chunks = [StreamChunk.model_validate(c) for c in report["chunks"]]

    # The model waited for `go`, which the reader wrote on its first text chunk: text was live.
    assert (tmp_path / "events").read_text().splitlines() == ["model-started", "reader-got-text", "model-finished"]
    texts = [c.text for c in chunks if c.type == "text"]
    assert "".join(texts) == "Hello, streaming world." and len(texts) > 1  # deltas, none repeated
    kinds = [c.type for c in chunks]
    assert kinds[-1] == "done" and chunks[-1].finish_reason == "done"
    assert chunks[-1].usage == Usage(input_tokens=3, output_tokens=4)
    step = next(c for c in chunks if c.type == "step")
    assert step.name == "model" and kinds.index("step") > max(i for i, k in enumerate(kinds) if k == "text")


# --------------------------------------------------------------------------- in one process, on a dev server


class Counting(MockProvider):
    """Asks for `add` until the conversation holds `rounds` tool results, then answers (word by word
    in `stream`, the same answer: it says so, so a reader gets it live on a run not asked to stream)."""

    stream_is_complete = True

    def __init__(self, rounds: int):
        super().__init__([])
        self.rounds = rounds

    async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        done = sum(m.role == "tool" for m in messages)
        item = f"{done} rounds done." if done >= self.rounds else [
            ToolCall(id=f"c{done}", name="add", arguments={"a": done, "b": 1})
        ]
        self._responses, self._index = [item], 0
        return await super().complete(messages, tools, **kwargs)

    async def stream(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        completion = await self.complete(messages, tools)
        if completion.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls)
        for i, word in enumerate(completion.message.content.split(" ") if completion.message.content else []):
            yield StreamChunk(type="text", text=f" {word}" if i else word)
        yield StreamChunk(type="done", finish_reason=completion.finish_reason, usage=completion.usage)


async def test_stream_follows_continue_as_new_and_carries_steps_and_interrupts(dev):
    tq = f"stream-can-{uuid.uuid4().hex[:6]}"
    agent = Agent(provider=Counting(8), tools=[add], name="counter", config=LoopConfig(permission="ask"))
    async with create_worker(dev.client, agents=[agent], task_queue=tq):
        runs = ReinClient(dev.client, task_queue=tq)
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": "counter", "prompt": "count", "continue_as_new_after": 20},
            id=f"can-{uuid.uuid4().hex[:8]}", task_queue=tq,
        )
        seen: list[StreamChunk] = []
        async for chunk in runs.stream(handle.id):
            seen.append(chunk)
            if chunk.type == "interrupt":
                await runs.approve(handle.id, approver="tester", wait=True)
        runs_in_chain = []
        async for wf in dev.client.list_workflows(f'WorkflowId="{handle.id}"'):
            runs_in_chain.append(wf.status)
    assert len(runs_in_chain) > 1  # it did continue as new
    kinds = [c.type for c in seen]
    assert kinds.count("interrupt") == 8 and all(c.name == "need_approval" for c in seen if c.type == "interrupt")
    assert [c.name for c in seen if c.type == "step"] == ["model", "tool"] * 8 + ["model"]
    assert kinds.count("tool_calls") == 8
    assert "".join(c.text for c in seen if c.type == "text") == "8 rounds done."
    assert kinds[-1] == "done" and seen[-1].finish_reason == "done"


async def test_publish_event_from_a_tool_is_on_the_stream_in_order(dev):
    from rein.temporal import publish_event

    def note(text: str) -> str:
        """Note something."""
        publish_event("noted", {"text": text})
        return "ok"

    tq = f"stream-ev-{uuid.uuid4().hex[:6]}"
    agent = Agent(
        provider=MockProvider([[ToolCall(id="n1", name="note", arguments={"text": "hi"})], "noted."]),
        tools=[note], name="noter",
    )
    async with create_worker(dev.client, agents=[agent], task_queue=tq):
        runs = ReinClient(dev.client, task_queue=tq)
        handle = await runs.start("noter", "note hi")
        seen = [c async for c in runs.stream(handle.id)]
    kinds = [(c.type, c.name) for c in seen]
    event = kinds.index(("event", "noted"))
    assert seen[event].data == {"text": "hi"}
    assert kinds.index(("tool_calls", None)) < event < kinds.index(("step", "tool"))
    assert kinds[-1] == ("done", None)


def test_publish_event_outside_an_activity_is_a_clear_error():
    from rein.temporal import publish_event

    with pytest.raises(RuntimeError, match="only inside a rein activity"):
        publish_event("x")


class CompleteOnly:
    """A user's provider that implements only `complete` (no `stream`)."""

    model = "scripted/complete-only"

    async def complete(self, messages, tools=None, **kwargs):
        return Completion(message=Message(role="assistant", content="whole answer"), finish_reason="stop")


async def test_a_provider_without_stream_still_answers_a_streamed_run(dev):
    """ReinClient.start streams by default; a provider with only `complete` puts its whole answer on the stream."""
    tq = f"stream-co-{uuid.uuid4().hex[:6]}"
    agent = Agent(provider=CompleteOnly(), name="complete-only")
    async with create_worker(dev.client, agents=[agent], task_queue=tq):
        runs = ReinClient(dev.client, task_queue=tq)
        handle = await runs.start("complete-only", "answer", stream=True)
        seen = [c async for c in runs.stream(handle.id)]
        result = await runs.result(handle.id)
    assert result.status == "done" and result.output == "whole answer"
    assert "".join(c.text for c in seen if c.type == "text") == "whole answer"

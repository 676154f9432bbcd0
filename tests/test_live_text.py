"""Live text for a reader that attaches at any moment, and none in history while nobody reads.

The run is started first (ReinClient.start, no `stream=True`); the reader attaches while its
model call is under way, in another process (ReinClient.stream, `rein watch`). The model,
tests/agents/streaming.py:LateReaderModel, finishes only once that reader has received two
separate pieces: the text was live, not delivered whole after the call.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from rein import Agent, StreamChunk
from rein.client import ReinClient
from rein.core.contract import recorded_reply
from rein.core.events import StreamEvent
from rein.durable.temporal_worker import create_worker
from tests.agents.streaming import LATE_PIECES
from tests.support.history import decode_payload, decoded_values
from tests.support.processes import WorkerProcess

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
TIMEOUT = 120
PUBLISH_SIGNAL = "__temporal_workflow_stream_publish"

READER = textwrap.dedent('''
    import asyncio, json, os
    from pathlib import Path
    from temporalio.client import Client
    from rein.client import ReinClient
    from rein.temporal import ReinPlugin

    async def main():
        out = Path(os.environ["REINTEST_DIR"])
        while "model-started" not in ((out / "events").read_text() if (out / "events").exists() else ""):
            await asyncio.sleep(0.05)  # attach only once the model call is under way
        client = await Client.connect(os.environ["STREAM_TEMPORAL"], plugins=[ReinPlugin()])
        texts, chunks = 0, []
        async for chunk in ReinClient(client).stream(os.environ["RUN_ID"]):
            if chunk.type == "text":
                texts += 1
                if texts <= 2:
                    (out / f"go{texts}").write_text("go")  # opens the model's next gate
            chunks.append(chunk.model_dump(mode="json"))
        print(json.dumps(chunks), flush=True)

    asyncio.run(main())
    os._exit(0)  # skip temporalio's teardown in a short client process (sdk-python#300)
''')


@pytest.fixture
def late_worker(dev: Any, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """worker.py serving tests.agents.streaming:late_agent in its own process: (address, task queue)."""
    address = dev.client.service_client.config.target_host
    queue = f"late-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(address, ["tests.agents.streaming:late_agent"], queue, tmp_path / "worker.log",
                           REINTEST_DIR=str(tmp_path), REIN_HOME=str(tmp_path / "home"))
    worker.start(TIMEOUT)
    try:
        yield address, queue
    finally:
        worker.stop()


def _events(tmp_path: Path) -> list[str]:
    path = tmp_path / "events"
    return path.read_text().splitlines() if path.exists() else []


async def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _published_text(client: Client, run_id: str) -> list[str]:
    """The text chunks the worker put on the run's stream, as the publish signals in its history hold them. A batch
    signalled again after its first signal timed out (a loaded machine) has the same publisher and sequence: the
    stream takes it once, and so does this."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    texts, seen = [], set()
    for event in history.events:
        signal = event.workflow_execution_signaled_event_attributes
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED or signal.signal_name != PUBLISH_SIGNAL:
            continue
        for batch in await decoded_values(signal.input):
            key = (batch["publisher_id"], batch["sequence"])
            if key in seen:
                continue
            seen.add(key)
            for item in batch["items"]:
                (value,) = await decoded_values(_payload(item["data"]))
                chunk = StreamEvent.model_validate(value).chunk
                if chunk.type == "text":
                    texts.append(chunk.text)
    return texts


def _payload(data: str) -> Any:
    """One item of a publish batch: base64 of a serialized Payload (the contrib's wire form)."""
    import base64

    from temporalio.api.common.v1 import Payload

    payload = Payload()
    payload.ParseFromString(base64.b64decode(data))
    return payload


async def _model_results(client: Client, run_id: str) -> list[dict]:
    history = await client.get_workflow_handle(run_id).fetch_history()
    completed = [e.activity_task_completed_event_attributes for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    results = [recorded_reply(await decode_payload(c.result.payloads[0])) for c in completed]  # a lean start's, nested
    return [r for r in results if isinstance(r, dict) and "content" in r]


async def test_a_reader_attaching_mid_call_gets_live_text_once(dev, late_worker, tmp_path: Path):
    address, queue = late_worker
    runs = ReinClient(dev.client, task_queue=queue)
    handle = await runs.start("late-reader", "Say hello")  # no stream=True: nobody reads yet
    env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_TASK_QUEUE")}
    env.update(REINTEST_DIR=str(tmp_path), STREAM_TEMPORAL=address, RUN_ID=handle.id, PYTHONUNBUFFERED="1")
    reader = await asyncio.create_subprocess_exec(
        sys.executable, "-c", READER, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(reader.communicate(), TIMEOUT)
    assert reader.returncode == 0, stderr.decode()[-3000:]
    chunks = [StreamChunk.model_validate(c) for c in json.loads(stdout.decode().splitlines()[-1])]

    # The model waited for go1 and go2, which the reader wrote on its first two text chunks.
    assert _events(tmp_path) == ["model-started", "model-finished"]
    texts = [c.text for c in chunks if c.type == "text"]
    assert texts[:2] == ["".join(LATE_PIECES[:2]), LATE_PIECES[2]]  # what came before attaching, whole; then live
    assert "".join(texts) == "".join(LATE_PIECES)  # the whole answer, each piece once
    assert (await runs.result(handle.id)).output == "".join(LATE_PIECES)
    # The worker published it (the workflow did not publish it again) and said so in its result.
    assert await _published_text(dev.client, handle.id) == texts
    assert [r.get("published") for r in await _model_results(dev.client, handle.id)] == [True]


async def test_rein_watch_mid_call_prints_the_text_as_it_comes(dev, late_worker, tmp_path: Path):
    address, queue = late_worker
    runs = ReinClient(dev.client, task_queue=queue)
    handle = await runs.start("late-reader", "Say hello")
    await _until(lambda: "model-started" in _events(tmp_path), "the model call")
    out = tmp_path / "watch.out"
    env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")}
    env.update(PYTHONUNBUFFERED="1")
    with open(out, "wb") as stdout:
        watch = subprocess.Popen([REIN_BIN, "watch", handle.id, "--address", address], cwd=ROOT, env=env,
                                 stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        # Each gate opens only once `rein watch` has printed the text before it, while the call runs.
        await _until(lambda: "".join(LATE_PIECES[:2]) in out.read_text(), "the text said before attaching")
        (tmp_path / "go1").write_text("go")
        await _until(lambda: "".join(LATE_PIECES[:3]) in out.read_text(), "a live piece")
        assert "model-finished" not in _events(tmp_path)
        (tmp_path / "go2").write_text("go")
        _, stderr = await asyncio.to_thread(watch.communicate, timeout=TIMEOUT)
    finally:
        if watch.poll() is None:
            watch.kill()
    assert watch.returncode == 0, stderr.decode()[-3000:]
    printed, answer = out.read_text(), "".join(LATE_PIECES)
    # The live text first, whole and once (the step and the run's detail that follow repeat the answer).
    assert printed.startswith(answer) and printed.count("".join(LATE_PIECES[:2])) == printed.count(answer)


class Slow:
    """Streams its answer a piece every 0.1 s (long enough for a reader to be noticed mid-call); its
    stream is its answer (it says so), so runs nobody asked to stream stream it too."""

    model = "scripted/slow"
    stream_is_complete = True
    pieces = [f"w{i} " for i in range(15)]

    async def stream(self, messages: Any, tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        for piece in self.pieces:
            await asyncio.sleep(0.1)
            yield StreamChunk(type="text", text=piece)
        yield StreamChunk(type="done", finish_reason="stop")

    async def complete(self, messages: Any, tools: Any = None, **kwargs: Any) -> Any:
        raise AssertionError("rein streams from a provider whose stream is its answer")


async def test_no_text_goes_into_history_while_nobody_reads(dev):
    tq = f"live-{uuid.uuid4().hex[:6]}"
    async with create_worker(dev.client, agents=[Agent(provider=Slow(), name="slow")], task_queue=tq):
        runs = ReinClient(dev.client, task_queue=tq)
        unread = await runs.start("slow", "talk")
        assert (await runs.result(unread.id)).output == "".join(Slow.pieces)
        late = [c.text async for c in runs.stream(unread.id) if c.type == "text"]
        read = await runs.start("slow", "talk")
        seen = [c async for c in runs.stream(read.id)]
    # Nobody read: no publish signal at all, and the answer reached a later reader from the workflow.
    assert await _published_text(dev.client, unread.id) == []
    assert [r.get("published") for r in await _model_results(dev.client, unread.id)] == [None]
    assert late == ["".join(Slow.pieces)]
    # Read: the worker published the same answer (the control: the check above can fail).
    assert "".join(await _published_text(dev.client, read.id)) == "".join(Slow.pieces)
    assert "".join(c.text for c in seen if c.type == "text") == "".join(Slow.pieces)


def test_a_subclass_that_answers_in_complete_is_not_streamed():
    """Streaming from every provider that can is the default, but a MockProvider subclass that
    overrides only `complete` means that answer (tests record or script there)."""
    from rein import MockProvider
    from rein.blueprint.providers.base import streams

    class Recording(MockProvider):
        async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
            return await super().complete(messages, tools, **kwargs)

    assert streams(MockProvider(["hi"])) and streams(Slow())
    assert not streams(Recording(["hi"]))
    assert not streams(CompleteOnly())


class CompleteOnly:
    async def complete(self, messages: Any, tools: Any = None, **kwargs: Any) -> Any:
        raise AssertionError("not called")

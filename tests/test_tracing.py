"""Traces of durable runs in a real trace viewer: Arize Phoenix (`phoenix serve`, OTLP over HTTP),
checked through its REST API.

Traced workers are `worker.py` subprocesses whose only tracing configuration is the standard
OTEL_EXPORTER_OTLP_ENDPOINT; each test sends to its own Phoenix project (the `openinference.project.name`
resource attribute in OTEL_RESOURCE_ATTRIBUTES), so "every span of the project" is every span the test's
runs produced. The exporters send through a wire tap (tests/support/otlp_tap.py) that counts every span
sent, since Phoenix stores a span sent twice under one id once. A worker is stopped (which flushes its
exporter) before its spans are counted, so a duplicate would be there to see.

`rein trace` runs in this process (tests/support/in_process.py: what it prints and what it sends), over a run an
untraced worker in this process served; its one-line refusal without an endpoint goes through the real
console script.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))
from vendor_server import Reply, VendorServer  # noqa: E402

from rein.durable.embedded_server import free_port  # noqa: E402
from tests.support.in_process import rein_async  # noqa: E402
from tests.support.otlp_tap import OtlpTap  # noqa: E402
from tests.support.processes import WorkerProcess, stop_process, wait_for_port  # noqa: E402
from tests.support.runs import forget_sticky_worker  # noqa: E402
from tests.support.waiting import poll, wait_status, wait_until  # noqa: E402
from tests.test_ui_browser import Page, page  # noqa: E402,F401  (the headless Chromium fixture)

PHOENIX_BIN = str(Path(sys.executable).parent / "phoenix")
REIN_BIN = str(Path(sys.executable).parent / "rein")
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
AGENT = "traced-notes"
MODEL = "openai/gpt-4o"


# --------------------------------------------------------------------------- fixtures


class Phoenix:
    """`phoenix serve` on free ports with its own working directory, started without waiting: it takes
    ~15 s of CPU to import, which the first test's worker spends booting (and importing litellm) meanwhile."""

    def __init__(self, work: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = work / "phoenix.log"
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_PORT": str(self.port),
               "PHOENIX_HOST": "127.0.0.1", "PHOENIX_GRPC_PORT": str(free_port())}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen([PHOENIX_BIN, "serve"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        self.up = False

    def wait(self) -> str:
        """Its base URL, once it answers /healthz: before anything may send it spans."""
        if not self.up:
            wait_for_port(self.port, self.process, timeout=300, log=self.log)
            wait_until(lambda: httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200, "phoenix /healthz", 120)
            self.up = True
        return self.url


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Any:
    started = Phoenix(tmp_path_factory.mktemp("phoenix"))
    try:
        yield started
    finally:
        stop_process(started.process, 30)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def dev() -> Any:
    """A dev server of this module's own (not the session's): `rein trace --since` reads every run
    that ended on its server, so on the shared one it would rebuild every other module's runs too."""
    from rein.testing import start_local

    environment = await start_local()
    try:
        yield environment
    finally:
        await environment.shutdown()


@pytest.fixture(scope="module")
def tap(phoenix: Phoenix) -> Any:
    with OtlpTap(phoenix.url) as wire:
        yield wire


@pytest.fixture(scope="module")
def vendor() -> Any:
    with VendorServer() as server:
        yield server


class Traced:
    """A test's worker processes and Phoenix project."""

    def __init__(self, dev: Any, phoenix: Phoenix, tap: OtlpTap, vendor: VendorServer, tmp_path: Path, tq: str):
        self.dev, self.phoenix, self.tap, self.vendor, self.tmp_path, self.tq = dev, phoenix, tap, vendor, tmp_path, tq
        self.project = f"rein-{uuid.uuid4().hex[:10]}"
        self.workers: list[WorkerProcess] = []

    def otel_env(self) -> dict[str, str]:
        """The OTEL_* variables of a process that sends this test's spans (through the tap), once Phoenix is up."""
        self.phoenix.wait()
        return self._otel_vars()

    def _otel_vars(self) -> dict[str, str]:
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.tap.url,
            "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={self.project}",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }

    def worker(self, *extra: str, agent: str = "agent", **env: str) -> WorkerProcess:
        environment = {**self._otel_vars(), "REINTEST_VENDOR": self.vendor.base_url, **env}
        process = WorkerProcess(self.dev.client.service_client.config.target_host, [f"tests.agents.traced:{agent}"], self.tq,
                                self.tmp_path / f"worker-{len(self.workers)}.log", **environment)
        process.args += list(extra)
        self.workers.append(process)
        process.start()
        self.phoenix.wait()  # no span goes out before a run starts: the worker booted while Phoenix did
        return process

    def stop_all(self) -> None:
        for process in self.workers:
            process.stop()

    async def spans(self, expected: int) -> list[dict]:
        """Every span of the project, once at least `expected` arrived."""

        async def fetch() -> list[dict] | None:
            async with httpx.AsyncClient(timeout=10) as http:
                response = await http.get(f"{self.phoenix.url}/v1/projects/{self.project}/spans", params={"limit": 1000})
            if response.status_code == 404:  # the project appears with its first span
                return None
            response.raise_for_status()
            found = response.json()["data"]
            return found if len(found) >= max(expected, len(set(self.tap.sent[self.project]))) else None

        spans = await poll(fetch, f"{expected} spans in Phoenix project {self.project}", 60)
        wire = self.tap.sent[self.project]
        assert len(wire) == len(set(wire)), f"a span was sent twice: {sorted(wire)}"
        assert len(spans) == len(wire), f"sent {Counter(wire)}; Phoenix holds {by_name(spans)}"
        return spans


@pytest.fixture
def traced(phoenix: Phoenix, dev: Any, tap: OtlpTap, vendor: VendorServer, tmp_path: Path, ids: tuple[str, str]) -> Any:
    made = Traced(dev, phoenix, tap, vendor, tmp_path, ids[0])
    try:
        yield made
    finally:
        for process in made.workers:
            process.kill()


# --------------------------------------------------------------------------- helpers


def script_notes(vendor: VendorServer, notes: int) -> None:
    """`notes` model replies that each ask for one `note` call, then a final answer."""
    vendor.script([Reply(tool_calls=[(f"call-{i}", "note", {"text": f"n{i}"})], input_tokens=20 + i, output_tokens=5)
                   for i in range(notes)] + [Reply(text="All noted.", input_tokens=40, output_tokens=9)])


async def approve_each(handle: Any, notes: int, before_each: Any = None) -> None:
    for i in range(notes):
        await wait_status(handle, "waiting_approval", until=lambda v, i=i: v["pending_tool_calls"]
                          and v["pending_tool_calls"][0]["id"] == f"call-{i}", timeout=60)
        await handle.signal("approve", {"approver": "ops@example.com", "reason": f"note {i} is fine"})
        if before_each is not None:
            await before_each(i)


def by_name(spans: list[dict]) -> Counter:
    return Counter(span["name"] for span in spans)


def check_shape(spans: list[dict], *, runs: int, notes: int) -> dict:
    """One trace: the run span(s) of the chain, and under them each model call, tool call and approval
    exactly once with its gen_ai attributes. Returns the first run span."""
    assert len({s["context"]["trace_id"] for s in spans}) == 1, "the run's spans are in more than one trace"
    assert by_name(spans) == Counter({
        f"invoke_agent {AGENT}": runs, f"chat {MODEL}": notes + 1, "execute_tool note": notes, "approval": notes,
    }), by_name(spans)
    ids = {s["context"]["span_id"]: s for s in spans}
    run_spans = [s for s in spans if s["name"] == f"invoke_agent {AGENT}"]
    roots = [s for s in run_spans if not s.get("parent_id")]
    assert len(roots) == 1, [s.get("parent_id") for s in run_spans]
    for run in run_spans:
        assert run is roots[0] or ids[run["parent_id"]]["name"] == f"invoke_agent {AGENT}"
    for span in spans:
        if span["name"] != f"invoke_agent {AGENT}":
            assert ids[span["parent_id"]]["name"] == f"invoke_agent {AGENT}", span
    chats = sorted((s for s in spans if s["name"].startswith("chat ")), key=lambda s: s["start_time"])
    for i, chat in enumerate(chats):
        attributes = chat["attributes"]
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == MODEL
        assert attributes["gen_ai.response.model"]
        last = i == len(chats) - 1
        assert attributes["gen_ai.usage.input_tokens"] == (40 if last else 20 + i)
        assert attributes["gen_ai.usage.output_tokens"] == (9 if last else 5)
        assert list(attributes["gen_ai.response.finish_reasons"]) == (["stop"] if last else ["tool_calls"])
        assert attributes["gen_ai.usage.cost"] > 0  # from litellm's cost table for gpt-4o
    for tool in (s for s in spans if s["name"] == "execute_tool note"):
        assert tool["attributes"]["gen_ai.tool.name"] == "note"
        assert tool["attributes"]["gen_ai.tool.call.id"].startswith("call-")
        assert "gen_ai.tool.call.arguments" not in tool["attributes"]  # only when the user opts in
    for approval in (s for s in spans if s["name"] == "approval"):
        assert approval["attributes"]["rein.decision"] == "approved"
        assert approval["attributes"]["rein.approver"] == "ops@example.com"
        assert approval["attributes"]["rein.decided_at"]
    first = roots[0]
    final = max(run_spans, key=lambda s: s["start_time"])
    assert final["attributes"]["rein.status"] == "done"
    return first


# --------------------------------------------------------------------------- tests


async def test_a_run_is_one_trace_with_genai_spans_and_phoenix_shows_it(
        traced: Traced, ids: tuple[str, str], page: Page) -> None:  # noqa: F811
    """One run (one worker): its spans through Phoenix's API, then the same trace on Phoenix's own page."""
    traced.worker()
    script_notes(traced.vendor, 1)
    handle = await traced.dev.client.start_workflow(
        "AgentWorkflow", {"agent": AGENT, "prompt": "note something"}, id=ids[1], task_queue=traced.tq)
    await approve_each(handle, 1)
    assert (await handle.result())["status"] == "done"
    traced.stop_all()
    spans = await traced.spans(5)
    root = check_shape(spans, runs=1, notes=1)
    assert root["attributes"]["rein.workflow_id"] == ids[1]

    async with httpx.AsyncClient(timeout=10) as http:
        projects = (await http.get(f"{traced.phoenix.url}/v1/projects")).json()["data"]
    project_id = next(p["id"] for p in projects if p["name"] == traced.project)
    trace_id = spans[0]["context"]["trace_id"]
    await page.goto(f"{traced.phoenix.url}/projects/{project_id}/traces/{trace_id}")
    await page.wait_for(f"invoke_agent {AGENT}", f"chat {MODEL}", "execute_tool note", "approval")
    shot = await page.screenshot("phoenix-run-trace")
    assert shot.stat().st_size > 10_000


async def test_a_worker_killed_mid_tool_leaves_one_trace_without_duplicates(traced: Traced, ids: tuple[str, str]) -> None:
    marker = traced.tmp_path / "marks"
    marker.mkdir()
    first = traced.worker(REINTEST_DIR=str(marker))
    script_notes(traced.vendor, 1)
    handle = await traced.dev.client.start_workflow(
        "AgentWorkflow", {"agent": AGENT, "prompt": "note something"}, id=ids[1], task_queue=traced.tq)

    async def kill_mid_tool(_: int) -> None:
        await asyncio.to_thread(wait_until, (marker / "started").exists, "the tool's first attempt", 60)
        first.kill()  # SIGKILL: the tool's attempt and the workflow's cache die with it
        await forget_sticky_worker(traced.dev.client, ids[1])
        traced.worker()  # a fresh worker replays the run and retries the tool

    await approve_each(handle, 1, kill_mid_tool)
    assert (await handle.result())["status"] == "done"
    traced.stop_all()
    spans = await traced.spans(5)
    check_shape(spans, runs=1, notes=1)  # the killed attempt never ended: no span; nothing twice


async def test_every_task_replaying_emits_no_duplicates(traced: Traced, ids: tuple[str, str]) -> None:
    traced.worker("--max-cached-workflows", "0")
    script_notes(traced.vendor, 2)
    handle = await traced.dev.client.start_workflow(
        "AgentWorkflow", {"agent": AGENT, "prompt": "note two things"}, id=ids[1], task_queue=traced.tq)
    await approve_each(handle, 2)
    assert (await handle.result())["status"] == "done"
    traced.stop_all()
    spans = await traced.spans(8)
    check_shape(spans, runs=1, notes=2)


async def test_continue_as_new_keeps_one_trace(traced: Traced, ids: tuple[str, str]) -> None:
    traced.worker()
    script_notes(traced.vendor, 3)
    handle = await traced.dev.client.start_workflow(
        "AgentWorkflow", {"agent": AGENT, "prompt": "note three things", "continue_as_new_after": 20},
        id=ids[1], task_queue=traced.tq)
    await approve_each(handle, 3)
    assert (await handle.result())["status"] == "done"
    runs = [r async for r in traced.dev.client.list_workflows(f"WorkflowId = '{ids[1]}'")]
    assert len(runs) > 1, "the run did not continue as new"
    traced.stop_all()
    spans = await traced.spans(10 + len(runs))
    check_shape(spans, runs=len(runs), notes=3)


async def test_rein_trace_rebuilds_an_untraced_run(traced: Traced, ids: tuple[str, str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import rein
    from tests.agents import traced as traced_agents

    monkeypatch.setenv("REINTEST_VENDOR", traced.vendor.base_url)
    script_notes(traced.vendor, 1)
    # An untraced worker in this process (no OTEL_* variable here): the run's history is all `rein trace` reads.
    async with rein.create_worker(traced.dev.client, agents=[traced_agents.build()], task_queue=traced.tq):
        handle = await traced.dev.client.start_workflow(
            "AgentWorkflow", {"agent": AGENT, "prompt": "note something"}, id=ids[1], task_queue=traced.tq)
        await approve_each(handle, 1)
        assert (await handle.result())["status"] == "done"
    assert traced.tap.sent[traced.project] == [], "the worker traced the run itself"
    address = traced.dev.client.service_client.config.target_host
    done = await rein_async("trace", ids[1], "--address", address, **traced.otel_env())
    assert done.returncode == 0, done.stderr
    assert "sent 5 spans of 1 run(s)" in done.stdout
    spans = await traced.spans(5)
    root = check_shape(spans, runs=1, notes=1)
    assert root["attributes"]["rein.workflow_id"] == ids[1]

    secret_id = await _finished_encrypted_run(traced.dev.client)  # a run this process has no key for
    traced.project = f"rein-{uuid.uuid4().hex[:10]}"  # --since: every finished run, into a fresh project
    done = await rein_async("trace", "--since", "1h", "--address", address, **traced.otel_env())
    assert done.returncode == 0, done.stderr
    assert f"left out {secret_id}: this run's data is encrypted" in " ".join(done.stderr.split())
    spans = await traced.spans(5)
    runs = [s for s in spans if s["name"] == f"invoke_agent {AGENT}" and s["attributes"]["rein.workflow_id"] == ids[1]]
    assert len(runs) == 1
    same_trace = [s for s in spans if s["context"]["trace_id"] == runs[0]["context"]["trace_id"]]
    check_shape(same_trace, runs=1, notes=1)


async def _finished_encrypted_run(client: Any) -> str:
    """A run whose workers encrypt its payloads (REIN_CODEC_KEY), finished; its id."""
    import base64
    import dataclasses

    from temporalio.client import Client

    import rein
    from rein import Agent, MockProvider
    from rein.client import ReinClient
    from rein.temporal.codec import codec_from_keys
    from rein.temporal.converter import rein_data_converter

    key = "k1:" + base64.b64encode(b"\x07" * 32).decode()
    converter = rein_data_converter(dataclasses.replace(client.data_converter, payload_codec=codec_from_keys(key)))
    secret = Client(**{**client.config(), "data_converter": converter})
    queue, name = f"enc-{uuid.uuid4().hex[:8]}", f"enc-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(secret, agents=[Agent(provider=MockProvider(["ok"]), name=name)], task_queue=queue):
        handle = await ReinClient(secret, task_queue=queue).start(name, "secret")
        await handle.result()
    return handle.id


async def test_an_agent_used_as_a_tool_nests_under_the_tool_span(traced: Traced, ids: tuple[str, str]) -> None:
    traced.worker(agent="lead")
    traced.vendor.script([Reply(tool_calls=[("call-ask", "traced_helper", {"prompt": "find it"})]),
                          Reply(text="found it"), Reply(text="The helper found it.")])
    handle = await traced.dev.client.start_workflow(
        "AgentWorkflow", {"agent": "traced-lead", "prompt": "ask the helper"}, id=ids[1], task_queue=traced.tq)
    assert (await handle.result())["status"] == "done"
    traced.stop_all()
    spans = await traced.spans(6)
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    assert by_name(spans) == Counter({"invoke_agent traced-lead": 1, "invoke_agent traced-helper": 1,
                                      "execute_tool traced-helper": 1, f"chat {MODEL}": 3}), by_name(spans)
    named = {s["name"]: s for s in spans if not s["name"].startswith("chat ")}
    ids_ = {s["context"]["span_id"]: s["name"] for s in spans}
    assert not named["invoke_agent traced-lead"].get("parent_id")
    assert ids_[named["execute_tool traced-helper"]["parent_id"]] == "invoke_agent traced-lead"
    assert ids_[named["invoke_agent traced-helper"]["parent_id"]] == "execute_tool traced-helper"
    parents = Counter(ids_[s["parent_id"]] for s in spans if s["name"].startswith("chat "))
    assert parents == Counter({"invoke_agent traced-lead": 2, "invoke_agent traced-helper": 1})
    assert named["execute_tool traced-helper"]["attributes"]["gen_ai.tool.call.id"] == "call-ask"


def test_rein_trace_without_an_endpoint_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([REIN_BIN, "trace", "some-run"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["rein: set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://localhost:6006) to say where traces go"]


async def test_each_turn_of_a_thread_is_a_trace_linked_to_the_thread(traced: Traced, ids: tuple[str, str]) -> None:
    from rein.client import ReinClient

    traced.worker()
    traced.vendor.script([Reply(text="Hello.", input_tokens=11, output_tokens=2),
                          Reply(text="Still here.", input_tokens=17, output_tokens=3)])
    runs = ReinClient(traced.dev.client, traced.tq)
    for text in ("hi", "are you there?"):
        assert (await runs.reply(await runs.send(ids[1], text, agent=AGENT))).status == "done"
    await runs.cancel(ids[1], wait=True)  # the thread's own span ends with the thread
    traced.stop_all()
    spans = await traced.spans(6)
    assert by_name(spans) == Counter({f"invoke_agent {AGENT}": 3, f"chat {MODEL}": 2, "cancel": 1}), by_name(spans)
    ids_of = {s["context"]["span_id"]: s for s in spans}
    turns = sorted((s for s in spans if "rein.turn" in s["attributes"]), key=lambda s: s["attributes"]["rein.turn"])
    thread = [s for s in spans if s["name"] == f"invoke_agent {AGENT}" and "rein.turn" not in s["attributes"]]
    assert [t["attributes"]["rein.turn"] for t in turns] == [1, 2] and len(thread) == 1
    traces = {s["context"]["trace_id"] for s in (*turns, *thread)}
    assert len(traces) == 3, "each turn is a trace of its own, and so is the thread"
    for turn in turns:
        assert not turn.get("parent_id")
        assert turn["attributes"]["gen_ai.conversation.id"] == ids[1]
        assert turn["attributes"]["rein.stop_reason"] == "done"
    for chat in (s for s in spans if s["name"].startswith("chat ")):
        parent = ids_of[chat["parent_id"]]
        assert "rein.turn" in parent["attributes"] and chat["context"]["trace_id"] == parent["context"]["trace_id"]
    cancel = next(s for s in spans if s["name"] == "cancel")  # decided between turns: on the thread's trace
    assert cancel["context"]["trace_id"] == thread[0]["context"]["trace_id"]
    assert thread[0]["attributes"]["rein.status"] == "cancelled"
    assert [ids_of[c["parent_id"]]["attributes"]["rein.turn"] for c in sorted(
        (s for s in spans if s["name"].startswith("chat ")), key=lambda s: s["start_time"])] == [1, 2]

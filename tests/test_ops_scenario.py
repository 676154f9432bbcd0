"""The ops acceptance scenario, with real processes and only stock Temporal tools.

A PLAIN `temporal server start-dev` (no search attributes, no dynamic config),
`python worker.py --agent tests.agents.ops:agent` as a separate process holding
a fake API key, and then nothing of rein on the client side: the `temporal`
CLI and a raw temporalio Client with the default data converter.

    start (CLI) -> listed by ReinStatus="waiting_approval" (CLI) -> garbage signals
    (CLI, ignored) -> approve (CLI) -> result (CLI + raw client) -> history (CLI + raw client)
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import string
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter

from rein.durable.embedded_server import free_port, temporal_binary
from rein.testing import full_result
from tests.support.history import assert_secret_absent, history_from_json, scheduled, summaries
from tests.support.processes import stop_process, wait_for_port, wait_for_text
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parent.parent
AGENT_TARGET = "tests.agents.ops:agent"
AGENT_NAME = "ops-bot"
TOOL_NAME = "restart_service"
MODEL_LABEL = "ScriptedOpsModel"  # Agent.model_label of a provider-only agent: the provider's class name
PROMPT = "Please restart the billing service"
EXPECTED_OUTPUT = "Report: billing restarted cleanly"
DEFAULT_CONVERTER = DataConverter.default  # the client side runs no rein code

# --------------------------------------------------------------------------- processes


class Stack:
    """The server and worker processes, and how to reach them."""

    def __init__(self, address: str, secret: str, worker_log: Path, server_log: Path):
        self.address = address
        self.secret = secret
        self.worker_log = worker_log
        self.server_log = server_log

    def temporal(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run the stock `temporal` CLI against this server."""
        proc = subprocess.run(
            [temporal_binary(), *args, "--address", self.address, "--namespace", "default"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"temporal {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("ops-scenario")
    port = free_port()
    address = f"127.0.0.1:{port}"
    secret = "sk-test-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(24))
    server_log, worker_log = logs / "server.log", logs / "worker.log"
    server = worker = None
    try:
        with open(server_log, "wb") as out:
            server = subprocess.Popen(
                [temporal_binary(), "server", "start-dev", "--headless", "--port", str(port), "--ip", "127.0.0.1"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        wait_for_port(port, server, 30, server_log)

        env = {k: v for k, v in os.environ.items() if k not in ("REIN_TASK_QUEUE", "TEMPORAL_NAMESPACE", "REIN_ENGINE")}
        env.update(TEMPORAL_ADDRESS=address, OPENAI_API_KEY=secret)
        with open(worker_log, "wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "worker.py", "--agent", AGENT_TARGET],
                cwd=str(ROOT), env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        wait_for_text(worker_log, f"serving: {AGENT_NAME}", worker, 30)
        yield Stack(address, secret, worker_log, server_log)
    finally:
        stop_process(worker)
        stop_process(server)


# --------------------------------------------------------------------------- helpers


async def scheduled_activities(history: WorkflowHistory) -> list[tuple[str, str | None]]:
    """(activity type, UI summary) of every ActivityTaskScheduled event, in order."""
    names = [e.activity_task_scheduled_event_attributes.activity_type.name for e in scheduled(history.events)]
    return list(zip(names, await summaries(history, DEFAULT_CONVERTER), strict=True))


# --------------------------------------------------------------------------- the scenario


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scenario(stack: Stack) -> dict[str, Any]:
    """Runs the whole ops flow once; the tests below each check one part of what it observed."""
    seen: dict[str, Any] = {}
    wf_id = f"ops-{uuid.uuid4().hex[:10]}"
    seen["wf_id"] = wf_id
    client = await Client.connect(stack.address)  # default data converter: no rein code on this side

    async def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return await asyncio.to_thread(stack.temporal, *args, check=check)

    started = await cli(
        "workflow", "start", "--type", "AgentWorkflow", "--task-queue", "rein", "--workflow-id", wf_id,
        "--input", json.dumps({"agent": AGENT_NAME, "prompt": PROMPT}),
    )
    seen["start_stdout"] = started.stdout

    async def listed_waiting() -> list[str]:
        proc = await cli("workflow", "list", "--query", 'ReinStatus="waiting_approval"', "-o", "json", check=False)
        if proc.returncode != 0:  # the attribute may not be queryable yet on a plain server
            raise RuntimeError(proc.stderr.strip())
        rows = json.loads(proc.stdout) if proc.stdout.strip() else []
        return [row["execution"]["workflowId"] for row in rows if row["execution"]["workflowId"] == wf_id]

    # RuntimeError: the attribute may not be queryable yet on a plain server
    seen["listed_waiting"] = await poll(listed_waiting, "ReinStatus=\"waiting_approval\" to list the run", 20,
                                        interval=0.2, ignore=(RuntimeError,))

    handle = client.get_workflow_handle(wf_id)
    seen["status_waiting"] = await handle.query("status")

    seen["garbage_signals"] = [
        await cli("workflow", "signal", "--workflow-id", wf_id, "--name", "approve", "--input", '"garbage"', check=False),
        await cli("workflow", "signal", "--workflow-id", wf_id, "--name", "approve",
                  "--input", '{"tool_call_id": 5}', check=False),
    ]

    async def both_ignored() -> dict | None:
        view = await handle.query("status")
        return view if view.get("ignored_signals") == 2 else None

    seen["status_after_garbage"] = await poll(both_ignored, "both garbage signals to be counted as ignored", 10,
                                              interval=0.2)

    await cli("workflow", "signal", "--workflow-id", wf_id, "--name", "approve", "--input", '{"approver": "alice"}')

    result_proc = await cli("workflow", "result", "--workflow-id", wf_id, "-o", "json")
    seen["cli_result_raw"] = result_proc.stdout
    seen["cli_result"] = json.loads(result_proc.stdout)
    seen["client_result"] = await asyncio.wait_for(full_result(handle), 20)
    seen["status_done"] = await handle.query("status")

    show = await cli("workflow", "show", "--workflow-id", wf_id, "-o", "json")
    seen["history_raw"] = show.stdout
    seen["history"] = json.loads(show.stdout)
    seen["cli_history"] = history_from_json(wf_id, show.stdout)
    seen["sdk_history"] = await handle.fetch_history()
    seen["client"] = client
    return seen


def test_worker_registered_search_attributes_on_plain_server(stack: Stack) -> None:
    proc = stack.temporal("operator", "search-attribute", "list", "-o", "json")
    text = proc.stdout
    for name in ("ReinAgent", "ReinStatus", "ReinIterations", "ReinTokens"):
        assert name in text, f"{name} not registered by the worker: {text[:2000]}"


def test_cli_start_and_waiting_approval_listing(scenario: dict) -> None:
    assert scenario["wf_id"] in scenario["start_stdout"]
    assert scenario["listed_waiting"] == [scenario["wf_id"]]
    view = scenario["status_waiting"]
    assert view["status"] == "waiting_approval"
    assert view["interrupt"]["type"] == "need_approval"
    assert [c["name"] for c in view["pending_tool_calls"]] == [TOOL_NAME]
    assert view["pending_tool_calls"][0]["arguments"] == {"service": "billing"}


def test_garbage_signals_are_ignored_without_losing_state(scenario: dict) -> None:
    for proc in scenario["garbage_signals"]:
        assert proc.returncode == 0, proc.stderr
    view = scenario["status_after_garbage"]
    assert view["ignored_signals"] == 2
    assert view["status"] == "waiting_approval"
    assert view["pending_tool_calls"] == scenario["status_waiting"]["pending_tool_calls"]


def test_approved_run_completes_with_expected_output(scenario: dict) -> None:
    cli_result = scenario["cli_result"]
    assert cli_result["status"] == "COMPLETED", cli_result
    results = cli_result["closeEvent"]["workflowExecutionCompletedEventAttributes"]["result"]
    assert results[0]["output"] == EXPECTED_OUTPUT
    assert results[0]["status"] == "done"
    assert results[0]["stop_reason"] == "done"

    raw = scenario["client_result"]  # a plain dict from the default converter
    assert isinstance(raw, dict)
    assert raw["output"] == EXPECTED_OUTPUT
    assert raw["run_id"] == scenario["wf_id"]
    assert [(d["tool_call_id"], d["approved"], d["approver"]) for d in raw["session"]["decisions"]] == [
        ("call-restart-1", True, "alice")
    ]
    assert [s["kind"] for s in raw["steps"]] == ["model", "tool", "model"]
    assert scenario["status_done"]["status"] == "done"


async def test_history_has_both_activity_types_with_readable_summaries(scenario: dict) -> None:
    activities = await scheduled_activities(scenario["cli_history"])
    kinds = {name for name, _ in activities}
    assert {"rein.call_model", "rein.run_tool"} <= kinds, activities

    model_summaries = [s for name, s in activities if name == "rein.call_model"]
    tool_summaries = [s for name, s in activities if name == "rein.run_tool"]
    assert all(s and re.fullmatch(r"model (\S+|of agent \S+) · iteration \d+", s) for s in model_summaries), model_summaries
    # A lean start's first call is scheduled before the run knows its model: its summary names the agent.
    assert model_summaries == [f"model of agent {AGENT_NAME} · iteration 1", f"model {MODEL_LABEL} · iteration 2"]
    assert tool_summaries == [f'tool {TOOL_NAME}(service="billing")']


async def test_history_summaries_agree_with_sdk_view(scenario: dict) -> None:
    """The raw client (default converter) reads the same summaries from user_metadata."""
    client: Client = scenario["client"]
    history = scenario["sdk_history"]
    converter = client.data_converter.payload_converter
    sdk = [
        (e.activity_task_scheduled_event_attributes.activity_type.name,
         converter.from_payload(e.user_metadata.summary, str))
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert sdk == await scheduled_activities(scenario["cli_history"])


def test_history_has_no_workflow_task_failures(scenario: dict) -> None:
    types = [e["eventType"] for e in scenario["history"]["events"]]
    assert "EVENT_TYPE_WORKFLOW_TASK_FAILED" not in types
    assert types[-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    sdk_types = [e.event_type for e in scenario["sdk_history"].events]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in sdk_types
    # the two garbage signals and the approval are all in the history
    assert types.count("EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED") == 3


async def test_api_key_never_reaches_history_or_results(scenario: dict, stack: Stack) -> None:
    key = stack.secret
    assert key.startswith("sk-test-") and len(key) == len("sk-test-") + 24
    # "billing restarted cleanly": the decoding does find payload contents
    for history in (scenario["cli_history"], scenario["sdk_history"]):
        await assert_secret_absent(history, key, DEFAULT_CONVERTER, present="billing restarted cleanly")
    for name, text in {
        "history JSON (CLI)": scenario["history_raw"],
        "result (CLI)": scenario["cli_result_raw"],
        "result (client)": json.dumps(scenario["client_result"]),
    }.items():
        assert key not in text, f"the worker's API key leaked into the {name}"
    worker_log = stack.worker_log.read_text(errors="replace")
    assert "serving: ops-bot" in worker_log
    assert key not in worker_log, "the worker's API key leaked into its log"

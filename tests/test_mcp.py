"""MCP tools (`Agent(..., mcp_servers=[...])`) in durable runs, against a real MCP server.

tests/mcp_server.py is a small server on the official SDK's server side, run as a real
subprocess: over stdio (the worker starts it) and over streamable HTTP on loopback (the test
starts it). Runs are started the way ops start them (raw client, plain dict input) on the
time-skipping test server; the engine test goes through `Agent.run` on both engines.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

import rein
from rein import Agent, LoopConfig, MockProvider
from rein.blueprint.mcp import MCPServerHTTP, MCPServerStdio
from rein.core.contract import AgentDescription
from rein.durable.embedded_server import free_port
from rein.testing import full_result
from tests.support.history import assert_secret_absent, first_call_result, summaries
from tests.support.processes import wait_for_port
from tests.support.providers import RecordingProvider
from tests.support.results import tool_messages
from tests.support.tools import tc
from tests.support.waiting import wait_status, wait_until

SERVER = Path(__file__).parent / "mcp_server.py"
TOKEN = "tok-" + uuid.uuid4().hex


def stdio(**options: Any) -> MCPServerStdio:
    return MCPServerStdio(sys.executable, [str(SERVER), "stdio"], **options)


@contextmanager
def http_server() -> Iterator[tuple[subprocess.Popen, str]]:
    """The test server on streamable HTTP, on a free loopback port; stopped afterwards."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env={"PATH": "/usr/bin:/bin", "REINTEST_TOKEN": TOKEN},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc, timeout=30)
        yield proc, f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=10)


ASKED_FIRST = {"session": {"messages": []}}
"""A run given a Session asks describe_agent first (a marker); a new conversation starts lean."""


async def run(env, ids, agent: Agent, prompt: str = "go", start: dict | None = None) -> tuple[dict, WorkflowHistory]:
    tq, wf_id = ids
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": prompt, **(start or {})}, id=wf_id, task_queue=tq
        )
        result = await full_result(handle)
        history = await handle.fetch_history()
    return result, history


async def recorded_description(env, events: list) -> AgentDescription:
    """The agent as the run recorded it: the describe marker's result, or a lean start's first model call's."""
    markers = [e.marker_recorded_event_attributes for e in events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    marker = next((m for m in markers if m.marker_name == "core_local_activity"), None)
    if marker is None:
        first = await first_call_result(events, env.client.data_converter)
        return AgentDescription.model_validate(first["agent"])
    payloads: Payloads = marker.details["result"]
    [description] = await env.client.data_converter.decode(payloads.payloads, [AgentDescription])
    return description


# --------------------------------------------------------------------------- stdio


@pytest.mark.parametrize("start", [ASKED_FIRST, {}], ids=["asked-first", "lean-start"])
async def test_stdio_tools_are_listed_into_history_and_called_as_activities(env, ids, start):
    provider = RecordingProvider([[tc("add", "1", a=1, b=2), tc("read_env", "2")], "3 and a value"])
    agent = Agent(provider=provider, mcp_servers=[stdio(env={"REINTEST_VALUE": "from-env"})], name="mcp-stdio")
    result, history = await run(env, ids, agent, start=start)
    assert result["status"] == "done" and result["output"] == "3 and a value"
    assert list(tool_messages(result).values()) == ["3", "from-env"]
    # The worker listed the server in describe_agent: the specs are recorded in the run's history.
    description = await recorded_description(env, history.events)
    specs = {t.spec.name: t.spec for t in description.tools}
    assert {"add", "shout", "read_env", "refuse", "die"} <= set(specs)
    assert specs["add"].parameters["properties"]["a"]["type"] == "integer"
    assert specs["add"].parameters["required"] == ["a", "b"]
    assert specs["add"].description == "Add two integers."
    # ... and the model was offered exactly those.
    assert [t.name for t in provider.offered[0]] == [t.spec.name for t in description.tools]
    assert await summaries(history, env.client.data_converter, "rein.run_tool") == [
        "tool add(a=1, b=2)", "tool read_env()"]


@pytest.mark.parametrize("how", ["permission-ask", "server-requires-approval"])
async def test_approval_applies_to_mcp_calls(env, ids, how):
    tq, wf_id = ids
    agent = Agent(
        provider=MockProvider([[tc("shout", "s1", text="hi")], [tc("shout", "s2", text="no")], "done"]),
        mcp_servers=[stdio(requires_approval=how == "server-requires-approval")],
        config=LoopConfig(permission="ask" if how == "permission-ask" else "allow"),
        name=f"mcp-{how}",
    )
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "go"}, id=wf_id, task_queue=tq
        )
        for decision, tool_call_id in (("approve", "s1"), ("deny", "s2")):
            status = await wait_status(
                handle, "waiting_approval", until=lambda s, call=tool_call_id: [c["id"] for c in s["pending_tool_calls"]] == [call])
            assert status["interrupt"]["tool_call"]["name"] == "shout"
            await handle.signal(decision, {"approver": "ops", "reason": "checked"})
        result = await full_result(handle)
    assert list(tool_messages(result).values())[0] == "HI"
    assert list(tool_messages(result).values())[1].startswith("Denied by ops")
    assert [d["approved"] for d in result["session"]["decisions"]] == [True, False]


def test_a_long_command_keeps_its_script_in_the_label():
    """A checkout deep in the file system must not cut the script's name off the server's label."""
    deep = "/" + "/".join(["a-rather-long-directory-name"] * 6)
    server = MCPServerStdio(f"{deep}/.venv/bin/python", [f"{deep}/tests/mcp_server.py", "stdio"])
    label = server.label
    assert label.startswith("'/a-rather") and label.endswith("mcp_server.py stdio'")
    assert "…" in label and len(label) == 80 + 2  # the quotes repr adds
    assert MCPServerStdio("python", ["server.py", "stdio"]).label == "'python server.py stdio'"


async def test_worker_shutdown_closes_pooled_connections(env, ids):
    """The stdio server a worker started (its pooled connection) ends when the worker shuts down."""
    agent = Agent(provider=RecordingProvider([[tc("pid", "1")], "noted"]), mcp_servers=[stdio()], name="mcp-close")
    result, _ = await run(env, ids, agent)  # the worker has shut down when this returns
    server_pid = int(tool_messages(result)["1"])
    wait_until(lambda: not _running(server_pid), "the MCP stdio server to exit", 30)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_stdio_server_dying_mid_call_is_an_error_result_and_the_next_call_restarts_it(env, ids):
    script = [[tc("die", "1")], [tc("add", "2", a=2, b=2)], [tc("refuse", "3", reason="policy")], "ok"]
    agent = Agent(provider=MockProvider(script), mcp_servers=[stdio()], name="mcp-die")
    result, history = await run(env, ids, agent)
    assert (result["status"], result["stop_reason"], result["output"]) == ("done", "done", "ok")
    died, added, refused = list(tool_messages(result).values())
    assert "MCP server" in died and "mcp_server.py" in died and "die" in died
    assert added == "4"
    assert "refused: policy" in refused
    assert [s["is_error"] for s in result["steps"] if s["kind"] == "tool"] == [True, False, True]
    # Each failure is a tool result, not an activity failure or retry.
    failed = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert failed == []


async def test_a_call_that_never_returns_times_out_into_an_error_result(env, ids):
    script = [[tc("sleep", "1", seconds=3600)], [tc("add", "2", a=1, b=1)], "ok"]
    agent = Agent(provider=MockProvider(script), mcp_servers=[stdio(timeout_s=1.5)], name="mcp-hang")
    result, _ = await run(env, ids, agent)
    hung, added = list(tool_messages(result).values())
    assert "MCP server" in hung and "sleep" in hung
    assert added == "2"
    assert result["output"] == "ok"


async def test_server_retries_are_temporal_retries_of_the_tool_activity(env, ids):
    agent = Agent(provider=MockProvider([[tc("die", "1")], "ok"]), mcp_servers=[stdio(retries=1)], name="mcp-retry")
    result, history = await run(env, ids, agent)
    [died] = list(tool_messages(result).values())
    assert "MCP server" in died and "die" in died
    attempts = [e.activity_task_started_event_attributes.attempt for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
                and e.activity_task_started_event_attributes.attempt > 0]
    assert max(attempts) == 2  # the first death was retried (a new server process), the second is the result


# --------------------------------------------------------------------------- streamable HTTP


async def test_http_tools_with_headers_that_stay_out_of_history(env, ids):
    with http_server() as (_, url):
        server = MCPServerHTTP(url, headers={"Authorization": f"Bearer {TOKEN}"}, tool_prefix="calc")
        agent = Agent(
            provider=MockProvider([[tc("calc_add", "1", a=20, b=22), tc("calc_check_auth", "2")], "42"]),
            mcp_servers=[server],
            name="mcp-http",
        )
        result, history = await run(env, ids, agent)
    assert list(tool_messages(result).values()) == ["42", "authorized"]
    assert TOKEN not in repr(server)
    await assert_secret_absent(history, TOKEN, env.client.data_converter, present="authorized")
    assert (await summaries(history, env.client.data_converter, "rein.run_tool"))[0] == "tool calc_add(a=20, b=22)"


async def test_http_server_dying_mid_call_then_unreachable(env, ids):
    with http_server() as (proc, url):
        script = [[tc("die", "1")], [tc("add", "2", a=1, b=1)], "gave up"]
        agent = Agent(provider=MockProvider(script), mcp_servers=[MCPServerHTTP(url, timeout_s=10)], name="mcp-http-die")
        result, _ = await run(env, ids, agent)
        assert proc.wait(timeout=10) == 3  # the server really died, mid-call
    died, after = list(tool_messages(result).values())
    assert result["output"] == "gave up"
    assert "MCP server 'http://127.0.0.1" in died and "die" in died
    assert "unreachable" in after


async def test_a_server_down_at_start_leaves_its_tools_out(env, ids):
    def local(x: int) -> int:
        """A local tool."""
        return x

    provider = RecordingProvider([[tc("add", "1", a=1, b=1)], "fine"])
    down = MCPServerHTTP(f"http://127.0.0.1:{free_port()}/mcp", connect_timeout_s=5)
    agent = Agent(provider=provider, tools=[local], mcp_servers=[down], name="mcp-down")
    result, _ = await run(env, ids, agent)
    assert result["output"] == "fine"
    assert [t.name for t in provider.offered[0]] == ["local"]
    [message] = list(tool_messages(result).values())
    assert "Unknown tool 'add'" in message and "local" in message


async def test_a_server_that_never_answers_is_left_out_after_its_timeout(env, ids):
    def local(x: int) -> int:
        """A local tool."""
        return x

    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        provider = RecordingProvider(["fine"])
        hung = MCPServerHTTP(f"http://127.0.0.1:{silent.getsockname()[1]}/mcp", connect_timeout_s=0.5)
        agent = Agent(provider=provider, tools=[local], mcp_servers=[hung], name="mcp-hung")
        result, _ = await run(env, ids, agent)
    assert result["output"] == "fine"
    assert [t.name for t in provider.offered[0]] == ["local"]


# --------------------------------------------------------------------------- both engines, config


@pytest.mark.parametrize("engine", ["local", "temporal"])
async def test_agent_run_on_both_engines(engine):
    script = [[tc("add", "1", a=1, b=2), tc("refuse", "2", reason="no")], "3"]
    agent = Agent(provider=MockProvider(script), mcp_servers=[stdio()], engine=engine)
    result = await agent.arun("go")
    assert result.output == "3"
    contents = [m.content for m in result.session.messages if m.role == "tool"]
    assert contents[0] == "3" and "refused: no" in contents[1]
    assert [s.summary.split(" → ")[0] for s in result.steps] == ["tool calls: add, refuse", "add", "refuse", "3"]


async def test_tool_name_clash_is_a_clear_error():
    def add(a: int, b: int) -> int:
        return a + b

    clashing = Agent(provider=MockProvider(["x"]), tools=[add], mcp_servers=[stdio()], engine="local")
    with pytest.raises(ValueError, match="'add'.*tool_prefix"):
        await clashing.arun("go")
    prefixed = Agent(provider=MockProvider([[tc("m_add", "1", a=1, b=1)], "2"]), tools=[add],
                     mcp_servers=[stdio(tool_prefix="m")], engine="local")
    result = await prefixed.arun("go")
    assert [m.content for m in result.session.messages if m.role == "tool"] == ["2"]


def test_configs_keep_secrets_out_of_repr_and_reject_other_objects():
    assert "s3cret" not in repr(stdio(env={"KEY": "s3cret"}))
    assert "s3cret" not in repr(MCPServerHTTP("http://127.0.0.1:1/mcp", headers={"X-Key": "s3cret"}))
    with pytest.raises(TypeError, match="MCPServerStdio"):
        Agent(provider=MockProvider([]), mcp_servers=["http://example.com/mcp"])

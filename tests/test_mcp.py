"""MCP tools (`Agent(..., mcp_servers=[...])`) in durable runs, against a real MCP server.

tests/mcp_server.py is a small server on the official SDK's server side, run as a real
subprocess: over stdio (the worker starts it) and over streamable HTTP on loopback (the test
starts it). Runs are started the way ops start them (raw client, plain dict input) on the
time-skipping test server; the engine test goes through `Agent.run` on both engines.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType

import rein
from rein import Agent, LoopConfig, MockProvider, ToolCall
from rein.contract import AgentDescription
from rein.mcp import MCPServerHTTP, MCPServerStdio
from rein.server import free_port
from rein.testing import full_result

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
        env={"PATH": "/usr/bin:/bin", "REIN_TEST_TOKEN": TOKEN},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "the MCP test server exited at start"
            assert time.monotonic() < deadline, "the MCP test server did not listen within 30 s"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield proc, f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def call(cid: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=arguments)


class RecordingProvider(MockProvider):
    """A MockProvider that keeps the tools each model call was offered."""

    def __init__(self, responses: list):
        super().__init__(responses)
        self.offered: list[list] = []

    async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        self.offered.append(list(tools or []))
        return await super().complete(messages, tools, **kwargs)


async def run(env, ids, agent: Agent, prompt: str = "go") -> tuple[dict, list]:
    tq, wf_id = ids
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": prompt}, id=wf_id, task_queue=tq
        )
        result = await full_result(handle)
        history = await handle.fetch_history()
    return result, list(history.events)


def tool_messages(result: dict) -> list[str]:
    return [m["content"] for m in result["session"]["messages"] if m["role"] == "tool"]


async def recorded_description(env, events: list) -> AgentDescription:
    markers = [e.marker_recorded_event_attributes for e in events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    marker = next(m for m in markers if m.marker_name == "core_local_activity")
    payloads: Payloads = marker.details["result"]
    [description] = await env.client.data_converter.decode(payloads.payloads, [AgentDescription])
    return description


def scheduled_tools(events: list) -> list[tuple[str, str]]:
    import json

    return [
        (e.activity_task_scheduled_event_attributes.activity_type.name, json.loads(e.user_metadata.summary.data))
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "rein.run_tool"
    ]


# --------------------------------------------------------------------------- stdio


async def test_stdio_tools_are_listed_into_history_and_called_as_activities(env, ids):
    provider = RecordingProvider([[call("1", "add", a=1, b=2), call("2", "read_env")], "3 and a value"])
    agent = Agent(provider=provider, mcp_servers=[stdio(env={"REIN_TEST_VALUE": "from-env"})], name="mcp-stdio")
    result, events = await run(env, ids, agent)
    assert result["status"] == "done" and result["output"] == "3 and a value"
    assert tool_messages(result) == ["3", "from-env"]
    # The worker listed the server in describe_agent: the specs are recorded in the run's history.
    description = await recorded_description(env, events)
    specs = {t.spec.name: t.spec for t in description.tools}
    assert {"add", "shout", "read_env", "refuse", "die"} <= set(specs)
    assert specs["add"].parameters["properties"]["a"]["type"] == "integer"
    assert specs["add"].parameters["required"] == ["a", "b"]
    assert specs["add"].description == "Add two integers."
    # ... and the model was offered exactly those.
    assert [t.name for t in provider.offered[0]] == [t.spec.name for t in description.tools]
    assert scheduled_tools(events) == [("rein.run_tool", "tool add(a=1, b=2)"), ("rein.run_tool", "tool read_env()")]


@pytest.mark.parametrize("how", ["permission-ask", "server-requires-approval"])
async def test_approval_applies_to_mcp_calls(env, ids, how):
    tq, wf_id = ids
    agent = Agent(
        provider=MockProvider([[call("s1", "shout", text="hi")], [call("s2", "shout", text="no")], "done"]),
        mcp_servers=[stdio(requires_approval=how == "server-requires-approval")],
        config=LoopConfig(permission="ask" if how == "permission-ask" else "allow"),
        name=f"mcp-{how}",
    )
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "go"}, id=wf_id, task_queue=tq
        )
        for decision, tool_call_id in (("approve", "s1"), ("deny", "s2")):
            status = await wait_status(handle, "waiting_approval", tool_call_id)
            assert status["interrupt"]["tool_call"]["name"] == "shout"
            await handle.signal(decision, {"approver": "ops", "reason": "checked"})
        result = await full_result(handle)
    assert tool_messages(result)[0] == "HI"
    assert tool_messages(result)[1].startswith("Denied by ops")
    assert [d["approved"] for d in result["session"]["decisions"]] == [True, False]


async def wait_status(handle, status: str, pending_id: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            now = await handle.query("status")
        except Exception:
            now = None
        if now and now["status"] == status and [c["id"] for c in now["pending_tool_calls"]] == [pending_id]:
            return now
        await asyncio.sleep(0.05)
    raise AssertionError(f"the run never waited for approval of {pending_id}")


async def test_stdio_server_dying_mid_call_is_an_error_result_and_the_next_call_restarts_it(env, ids):
    script = [[call("1", "die")], [call("2", "add", a=2, b=2)], [call("3", "refuse", reason="policy")], "ok"]
    agent = Agent(provider=MockProvider(script), mcp_servers=[stdio()], name="mcp-die")
    result, events = await run(env, ids, agent)
    assert (result["status"], result["stop_reason"], result["output"]) == ("done", "done", "ok")
    died, added, refused = tool_messages(result)
    assert "MCP server" in died and "mcp_server.py" in died and "die" in died
    assert added == "4"
    assert "refused: policy" in refused
    assert [s["is_error"] for s in result["steps"] if s["kind"] == "tool"] == [True, False, True]
    # Each failure is a tool result, not an activity failure or retry.
    failed = [e for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert failed == []


async def test_a_call_that_never_returns_times_out_into_an_error_result(env, ids):
    script = [[call("1", "sleep", seconds=3600)], [call("2", "add", a=1, b=1)], "ok"]
    agent = Agent(provider=MockProvider(script), mcp_servers=[stdio(timeout_s=3)], name="mcp-hang")
    result, _ = await run(env, ids, agent)
    hung, added = tool_messages(result)
    assert "MCP server" in hung and "sleep" in hung
    assert added == "2"
    assert result["output"] == "ok"


async def test_server_retries_are_temporal_retries_of_the_tool_activity(env, ids):
    agent = Agent(provider=MockProvider([[call("1", "die")], "ok"]), mcp_servers=[stdio(retries=1)], name="mcp-retry")
    result, events = await run(env, ids, agent)
    [died] = tool_messages(result)
    assert "MCP server" in died and "die" in died
    attempts = [e.activity_task_started_event_attributes.attempt for e in events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
                and e.activity_task_started_event_attributes.attempt > 0]
    assert max(attempts) == 2  # the first death was retried (a new server process), the second is the result


# --------------------------------------------------------------------------- streamable HTTP


async def test_http_tools_with_headers_that_stay_out_of_history(env, ids):
    with http_server() as (_, url):
        server = MCPServerHTTP(url, headers={"Authorization": f"Bearer {TOKEN}"}, tool_prefix="calc")
        agent = Agent(
            provider=MockProvider([[call("1", "calc_add", a=20, b=22), call("2", "calc_check_auth")], "42"]),
            mcp_servers=[server],
            name="mcp-http",
        )
        result, events = await run(env, ids, agent)
    assert tool_messages(result) == ["42", "authorized"]
    assert TOKEN not in repr(server)
    assert all(TOKEN not in str(e) for e in events)
    assert scheduled_tools(events)[0] == ("rein.run_tool", "tool calc_add(a=20, b=22)")


async def test_http_server_dying_mid_call_then_unreachable(env, ids):
    with http_server() as (proc, url):
        script = [[call("1", "die")], [call("2", "add", a=1, b=1)], "gave up"]
        agent = Agent(provider=MockProvider(script), mcp_servers=[MCPServerHTTP(url, timeout_s=10)], name="mcp-http-die")
        result, _ = await run(env, ids, agent)
        assert proc.wait(timeout=10) == 3  # the server really died, mid-call
    died, after = tool_messages(result)
    assert result["output"] == "gave up"
    assert "MCP server 'http://127.0.0.1" in died and "die" in died
    assert "unreachable" in after


async def test_a_server_down_at_start_leaves_its_tools_out(env, ids):
    def local(x: int) -> int:
        """A local tool."""
        return x

    provider = RecordingProvider([[call("1", "add", a=1, b=1)], "fine"])
    down = MCPServerHTTP(f"http://127.0.0.1:{free_port()}/mcp", connect_timeout_s=5)
    agent = Agent(provider=provider, tools=[local], mcp_servers=[down], name="mcp-down")
    result, _ = await run(env, ids, agent)
    assert result["output"] == "fine"
    assert [t.name for t in provider.offered[0]] == ["local"]
    [message] = tool_messages(result)
    assert "Unknown tool 'add'" in message and "local" in message


async def test_a_server_that_never_answers_is_left_out_after_its_timeout(env, ids):
    def local(x: int) -> int:
        """A local tool."""
        return x

    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        provider = RecordingProvider(["fine"])
        hung = MCPServerHTTP(f"http://127.0.0.1:{silent.getsockname()[1]}/mcp", connect_timeout_s=2)
        agent = Agent(provider=provider, tools=[local], mcp_servers=[hung], name="mcp-hung")
        result, _ = await run(env, ids, agent)
    assert result["output"] == "fine"
    assert [t.name for t in provider.offered[0]] == ["local"]


# --------------------------------------------------------------------------- both engines, config


@pytest.mark.parametrize("engine", ["local", "temporal"])
async def test_agent_run_on_both_engines(engine):
    script = [[call("1", "add", a=1, b=2), call("2", "refuse", reason="no")], "3"]
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
    prefixed = Agent(provider=MockProvider([[call("1", "m_add", a=1, b=1)], "2"]), tools=[add],
                     mcp_servers=[stdio(tool_prefix="m")], engine="local")
    result = await prefixed.arun("go")
    assert [m.content for m in result.session.messages if m.role == "tool"] == ["2"]


def test_configs_keep_secrets_out_of_repr_and_reject_other_objects():
    assert "s3cret" not in repr(stdio(env={"KEY": "s3cret"}))
    assert "s3cret" not in repr(MCPServerHTTP("http://127.0.0.1:1/mcp", headers={"X-Key": "s3cret"}))
    with pytest.raises(TypeError, match="MCPServerStdio"):
        Agent(provider=MockProvider([]), mcp_servers=["http://example.com/mcp"])

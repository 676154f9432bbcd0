"""ReinPlugin in a user's own Client and Worker, and agents run as child workflows of user workflows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

import rein
import rein.core.contract
from rein import Agent, MockProvider, Session, ToolCall
from rein.core.contract import RunOutcome
from rein.durable.embedded_server import start_dev_server
from rein.temporal import ReinPlugin
from rein.temporal.plugin import SANDBOX_PASSTHROUGH, has_rein_converter
from rein.testing import full_result
from tests.support.tools import add

ROOT = Path(__file__).resolve().parent.parent


def adder(name: str = "adder") -> Agent:
    return Agent(
        provider=MockProvider([[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})], "The sum is 5."]),
        tools=[add],
        name=name,
    )


async def test_plugin_on_a_plain_worker_of_a_plain_client(env):
    """A client with temporalio's default converter: the plugin alone makes the worker speak rein's payloads."""
    plain = Client(**{**env.client.config(), "data_converter": __import__("temporalio").converter.DataConverter.default})
    tq = f"plugin-{uuid.uuid4().hex[:8]}"
    worker = Worker(plain, task_queue=tq, plugins=[ReinPlugin(agents=[adder()])])
    assert has_rein_converter(worker.client) and not has_rein_converter(plain)
    runner = worker.config(active_config=True)["workflow_runner"]
    assert isinstance(runner, SandboxedWorkflowRunner)  # AgentWorkflow runs sandboxed by default
    assert set(SANDBOX_PASSTHROUGH) <= set(runner.restrictions.passthrough_modules)
    async with worker:
        client = Client(**{**plain.config(), "plugins": [ReinPlugin()]})
        handle = await client.start_workflow(
            "AgentWorkflow", {"agent": "adder", "prompt": "2+3?"}, id=f"wf-{tq}", task_queue=tq, result_type=RunOutcome
        )
        result = await handle.result()
        session = Session.model_validate(await handle.query("session"))
    assert isinstance(result, RunOutcome)
    assert result.output == "The sum is 5."
    assert [m.content for m in session.messages if m.role == "tool"] == ["5"]


async def test_sandbox_opt_out_and_a_client_level_plugin_merge(env):
    tq = f"plugin-{uuid.uuid4().hex[:8]}"
    client = Client(**{**env.client.config(), "plugins": [ReinPlugin(agents=[adder("first")])]})
    with pytest.warns(UserWarning, match="same plugin type"):  # temporalio's warning; the two merge
        worker = Worker(client, task_queue=tq, plugins=[ReinPlugin(agents=[adder("second")], sandboxed=False)])
    assert isinstance(worker.config(active_config=True)["workflow_runner"], UnsandboxedWorkflowRunner)
    names = [getattr(a, "__temporal_activity_definition").name for a in worker.config(active_config=True)["activities"]]
    assert sorted(names) == ["rein.call_model", "rein.close_canceled", "rein.compact", "rein.describe_agent",
                            "rein.notify_waiting", "rein.pass_decision", "rein.policy_check", "rein.replay_check",
                            "rein.rules_changed", "rein.run_tool"]  # registered once
    async with worker:
        for name in ("first", "second"):  # both plugins' agents are served by the one registration
            result = await client.execute_workflow(
                "AgentWorkflow", {"agent": name, "prompt": "2+3?"}, id=f"wf-{tq}-{name}", task_queue=tq,
                result_type=RunOutcome,
            )
            assert result.output == "The sum is 5."


async def test_an_unversioned_worker_reports_reins_build_id(env, monkeypatch: pytest.MonkeyPatch):
    """Not temporalio's default, which reads and hashes the bytecode of every loaded module as a Worker is
    built (0.1 s of CPU, 0.3 s with litellm loaded); a build id of the Worker's own is kept."""
    import temporalio.worker._worker as sdk_worker

    from rein.temporal.deployment import default_build_id

    monkeypatch.delenv("REIN_DEPLOYMENT", raising=False)
    monkeypatch.setattr(sdk_worker, "_default_build_id", None)  # temporalio memoizes it per process
    tq = f"plugin-{uuid.uuid4().hex[:8]}"
    worker = Worker(env.client, task_queue=tq, plugins=[ReinPlugin(agents=[adder()])])
    assert worker.config(active_config=True)["build_id"] == default_build_id()
    assert sdk_worker._default_build_id is None  # never computed
    own = Worker(env.client, task_queue=f"{tq}-own", build_id="mine", plugins=[ReinPlugin(agents=[adder()])])
    assert own.config(active_config=True)["build_id"] == "mine"


# --------------------------------------------------------------------------- a user project, in its own process

PROJECT_WORKFLOWS = '''
"""The user's own `workflows` package (the layout Temporal's samples teach)."""
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from rein.temporal import run_agent


@workflow.defn
class Triage:
    @workflow.run
    async def run(self, ticket: str) -> dict:
        result = await run_agent("adder", f"Ticket: {ticket}")
        return {"output": result.output, "status": result.status, "child": result.run_id}
'''

PROJECT_AGENTS = '''
from rein import Agent, MockProvider, ToolCall


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


agent = Agent(
    provider=MockProvider([[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})], "The sum is 5."]),
    tools=[add],
    name="adder",
)
'''

PROJECT_MAIN = '''
import asyncio, json, os, sys

from temporalio.client import Client
from temporalio.worker import Worker

from rein.temporal import ReinPlugin

import workflows
from agents import agent


async def main():
    client = await Client.connect(os.environ["PROJECT_TEMPORAL"], plugins=[ReinPlugin()])
    queue = os.environ["PROJECT_QUEUE"]
    async with Worker(client, task_queue=queue, workflows=[workflows.Triage], plugins=[ReinPlugin(agents=[agent])]):
        out = await client.execute_workflow(workflows.Triage.run, "T-1", id=queue + "-triage", task_queue=queue)
    print("RESULT " + json.dumps({"out": out, "workflows_from": workflows.__file__}))


asyncio.run(main())
'''


@pytest.fixture(scope="module")
def dev_server():
    server = start_dev_server()
    try:
        yield server
    finally:
        server.stop()


def test_user_project_with_its_own_workflows_package(tmp_path: Path, dev_server):
    project = tmp_path / "project"
    (project / "workflows").mkdir(parents=True)
    (project / "workflows" / "__init__.py").write_text(textwrap.dedent(PROJECT_WORKFLOWS))
    (project / "agents.py").write_text(textwrap.dedent(PROJECT_AGENTS))
    (project / "main.py").write_text(textwrap.dedent(PROJECT_MAIN))
    queue = f"project-{uuid.uuid4().hex[:8]}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "REIN_"))},
        "PROJECT_TEMPORAL": dev_server.address,
        "PROJECT_QUEUE": queue,
        "REIN_HOME": str(tmp_path / "rein-home"),
    }
    proc = subprocess.run(
        [sys.executable, "main.py"], cwd=project, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    report = json.loads(line.removeprefix("RESULT "))
    assert Path(report["workflows_from"]).resolve() == (project / "workflows" / "__init__.py").resolve()
    assert report["out"]["output"] == "The sum is 5."
    assert report["out"]["status"] == "done"
    assert report["out"]["child"].startswith(f"{queue}-triage/adder-")


# --------------------------------------------------------------------------- an agent as another agent's tool


def boss_and_researcher(looked_up: list[str]) -> Agent:
    """`boss` calls `researcher` as a tool; the researcher's lookup waits for approval."""
    from rein import LoopConfig

    def lookup(topic: str) -> str:
        """Look a topic up."""
        looked_up.append(topic)
        return f"{topic} purr"

    researcher = Agent(
        provider=MockProvider([[ToolCall(id="l1", name="lookup", arguments={"topic": "cats"})], "Cats purr."]),
        tools=[lookup],
        name="researcher",
        config=LoopConfig(permission="ask"),
    )
    return Agent(
        provider=MockProvider([[ToolCall(id="r1", name="researcher", arguments={"prompt": "Find out about cats"})],
                               "The researcher says: cats purr."]),
        tools=[researcher],
        name="boss",
    )


async def test_agent_as_tool_runs_as_a_child_whose_approval_is_answered_through_the_parent(dev):
    from temporalio.common import SearchAttributeKey

    from rein.client import ReinClient

    looked_up: list[str] = []
    boss = boss_and_researcher(looked_up)
    tq = f"boss-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[boss], task_queue=tq):  # serves researcher too
        runs = ReinClient(dev.client, task_queue=tq)
        handle = await runs.start("boss", "Tell me about cats")
        paused = await runs.wait(handle.id)
        # The parent run shows the child's interrupt and pending call.
        assert paused.status == "interrupted" and paused.interrupt.type == "need_approval"
        assert paused.interrupt.tool_call.name == "lookup"
        view = await runs.status(handle.id)
        assert view.status == "waiting_approval" and [c.id for c in view.pending_tool_calls] == ["l1"]
        assert (await handle.describe()).typed_search_attributes.get(
            SearchAttributeKey.for_keyword("ReinStatus")) == "waiting_approval"
        assert looked_up == []

        await runs.approve(handle.id, approver="alice", wait=True)  # sent to the parent, decided in the child
        result = await runs.wait(handle.id, rein.core.contract.WaitRequest(after_pause=view.pause))
        child = await full_result(dev.client.get_workflow_handle(f"{handle.id}/r1"))
    assert result.status == "done" and result.output == "The researcher says: cats purr."
    assert looked_up == ["cats"]
    tool_results = [m.content for m in result.session.messages if m.role == "tool"]
    assert tool_results == ["Cats purr."]
    assert child["output"] == "Cats purr."
    assert child["session"]["decisions"][0]["approver"] == "alice"


async def test_a_decision_update_sent_to_the_parent_is_answered_by_the_waiting_child(dev):
    """A stock tool's update to the parent (`temporal workflow update execute --name rein.approve`) while its
    agent-as-tool child waits: the parent passes it on and answers with the child's own answer or refusal."""
    from temporalio.client import WorkflowUpdateFailedError

    from rein.client import ReinClient
    from tests.support.waiting import wait_status

    looked_up: list[str] = []
    tq = f"boss-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[boss_and_researcher(looked_up)], task_queue=tq):
        parent = await dev.client.start_workflow("AgentWorkflow", {"agent": "boss", "prompt": "Tell me about cats"},
                                                 id=tq, task_queue=tq)
        await wait_status(parent, "waiting_approval")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await parent.execute_update("rein.approve", {"tool_call_id": "l2", "approver": "bob"})
        assert f"the agent-as-tool run {tq}/r1: " in str(refused.value.cause)
        assert "no pending tool call with id 'l2'" in str(refused.value.cause)  # the child's own refusal
        assert await parent.execute_update("rein.approve", {"tool_call_id": "l1", "approver": "bob"}) == ["l1"]
        assert (await parent.result())["output"] == "The researcher says: cats purr."
        child = await ReinClient(dev.client, tq).result(f"{tq}/r1")
    assert looked_up == ["cats"] and child.session.decisions[0].approver == "bob"

"""A run's own model (AgentInput.model) and a fork that switches it, over real HTTP: LiteLLM against
tests/vendor_server.py. Also a fork's lineage in its current details, fork step numbering that
continues the original's, and rewinding to a step of an earlier run of a continue-as-new chain."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowFailureError

import rein
from rein import Agent, LiteLLMProvider, LoopConfig
from rein.cli import main
from rein.client import ReinClient
from rein.core.contract import CALL_MODEL
from rein.core.fork_edits import ForkError
from tests.support.history import (
    assert_secret_absent,
    decoded_values,
    scheduled,
    summaries,
)
from tests.support.providers import RecordingProvider
from tests.support.tools import add
from tests.test_fork import Counted, calls, five_steps
from tests.vendor_server import Reply, VendorServer

SECRET = "sk-test-" + uuid.uuid4().hex


@pytest.fixture()
def srv():
    with VendorServer() as s:
        yield s


@pytest.fixture
def names() -> str:
    return uuid.uuid4().hex[:6]


def llm_agent(srv: VendorServer, name: str, **kwargs) -> Agent:
    """An agent of two model attempts (not LoopConfig's default): a lean start's first call describes it only
    and the run makes the call with its options (rein.workflows.start)."""
    return Agent(
        provider=LiteLLMProvider("openai/gpt-4o", api_base=srv.base_url + "/v1", api_key=SECRET),
        tools=[add], name=name, config=LoopConfig(model_attempts=2), **kwargs,
    )


async def model_inputs(history) -> list[dict]:
    """The decoded input of every rein.call_model activity of `history`."""
    return [(await decoded_values(e.activity_task_scheduled_event_attributes.input))[0]
            for e in scheduled(history.events, CALL_MODEL)]


async def current_details(client, run_id: str) -> str:
    metadata = await client.get_workflow_handle(run_id).query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return metadata.current_details


async def test_fork_with_another_model_over_http(dev, srv, names, capsys):
    srv.script([Reply(tool_calls=[("c1", "add", {"a": 2, "b": 3})]), Reply(text="It is 5."), Reply(text="mini: 5")])
    agent = llm_agent(srv, f"switch-{names}", client_overrides=["model"])
    tq, fork_id = f"fm-{names}", f"switch-{names}-mini"
    address = dev.client.service_client.config.target_host
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        original = (await client.start(agent.name, "2 + 3?")).id
        assert (await client.result(original)).output == "It is 5."
        code = await asyncio.to_thread(main, ["fork", original, "--at-step", "1", "--model", "openai/gpt-4o-mini",
                                              "--id", fork_id, "--by", "ops-carol", "--address", address])
        assert code == 0 and capsys.readouterr().out.strip() == fork_id
        result = await client.result(fork_id)
        fork_steps = await client.steps(fork_id)
        details = await current_details(dev.client, fork_id)
        fork_history = await dev.client.get_workflow_handle(fork_id).fetch_history()
        original_history = await dev.client.get_workflow_handle(original).fetch_history()
        assert await asyncio.to_thread(main, ["show", fork_id, "--address", address]) == 0
        shown = " ".join(capsys.readouterr().out.split())
    assert result.output == "mini: 5"
    # The original's two requests name its model; the fork's one request (after step 1) the new one.
    assert [r.body["model"] for r in srv.requests] == ["gpt-4o", "gpt-4o", "gpt-4o-mini"]
    assert [m["role"] for m in srv.requests[2].body["messages"]] == ["user", "assistant", "tool"]
    assert await summaries(fork_history, dev.client.data_converter) == ["model openai/gpt-4o-mini · iteration 2"]
    assert await summaries(original_history, dev.client.data_converter, CALL_MODEL) == [
        f"model of agent {agent.name} · iteration 1", "model openai/gpt-4o · iteration 1", "model openai/gpt-4o · iteration 2"]
    assert [i.get("model") for i in await model_inputs(fork_history)] == ["openai/gpt-4o-mini"]
    assert all("model" not in i for i in await model_inputs(original_history))  # unset: left out of history
    # The fork's steps continue the original's count: its one step is step 2.
    assert [s.index for s in fork_steps] == [2]
    assert f"**Fork** of `{original}`" in details and "at step 1, by ops-carol" in details
    assert "- model switched to openai/gpt-4o-mini" in details and "Model: `openai/gpt-4o-mini`" in details
    assert f"{original} at step 1 (model switched to openai/gpt-4o-mini) by ops-carol" in shown
    await assert_secret_absent(fork_history, SECRET, dev.client.data_converter, present="mini: 5")


async def test_a_run_started_with_its_own_model(dev, srv, names, capsys):
    srv.script([Reply(text="small answer")])
    agent = llm_agent(srv, f"own-{names}", client_overrides=True)
    tq = f"fm-{names}"
    address = dev.client.service_client.config.target_host
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        argv = ["start", agent.name, "hi", "--model", "openai/gpt-4o-mini", "--task-queue", tq, "--address", address]
        assert await asyncio.to_thread(main, argv) == 0
        handle = dev.client.get_workflow_handle(capsys.readouterr().out.strip())
        assert (await client.result(handle.id)).output == "small answer"
        history = await handle.fetch_history()
        srv.script([Reply(text="still small"), Reply(text="nano")])
        kept = await client.fork(handle.id, at_step=0, edits={"drop_last_reply": True})
        assert (await client.result(kept)).output == "still small"
        switched = await client.fork(handle.id, at_step=0, edits={"drop_last_reply": True},
                                     config={"model": "openai/gpt-4o-nano", "max_iterations": 5})
        assert (await client.result(switched)).output == "nano"
    # A fork keeps the original's model override unless it switches it (here through `config`).
    assert [r.body["model"] for r in srv.requests] == ["gpt-4o-mini", "gpt-4o-mini", "gpt-4o-nano"]
    assert await summaries(history, dev.client.data_converter, CALL_MODEL) == ["model openai/gpt-4o-mini · iteration 1"] * 2


async def test_a_model_switch_that_cannot_be_made_is_a_clear_error(dev, srv, names):
    locked = llm_agent(srv, f"locked-{names}")
    scripted = Agent(provider=RecordingProvider(["x"]), name=f"scripted-{names}", client_overrides=["model"])
    pinned = llm_agent(srv, f"pinned-{names}", client_overrides=["model"])
    tq = f"fm-{names}"
    async with rein.create_worker(dev.client, agents=[locked, scripted, pinned], task_queue=tq):
        client = ReinClient(dev.client, tq)
        cases = [
            (locked, "openai/gpt-4o-mini", "InvalidInput", "does not let a client switch its model (openai/gpt-4o -> openai/gpt-4o-mini)"),
            (scripted, "openai/gpt-4o-mini", "ModelNotSwitchable", "provider RecordingProvider is not LiteLLM-based"),
            (pinned, "anthropic/claude-3-5-haiku", "ModelNotSwitchable", "api_key and api_base belong to openai"),
        ]
        srv.script([Reply(text="a switch that should have been refused")] * 3)  # ends such a run: no hang
        for agent, model, kind, message in cases:
            handle = await client.start(agent.name, "hi", model=model)
            with pytest.raises(WorkflowFailureError) as failure:
                await handle.result()
            cause = failure.value.cause
            text = f"{cause} {getattr(cause, 'cause', '')}"
            assert message in text, (agent.name, text)
            assert kind in f"{getattr(cause, 'type', '')} {getattr(getattr(cause, 'cause', None), 'type', '')}"
            assert (await client.status(handle.id)).status == "failed"
        original = (await client.start(locked.name, "hi")).id
        await client.result(original)
        with pytest.raises(ForkError, match="does not let a client switch its model"):
            await client.fork(original, at_step=0, model="openai/gpt-4o-mini")
        with pytest.raises(ForkError, match="two different models"):
            await client.fork(original, at_step=0, model="openai/a", config={"model": "openai/b"})
    assert [r.body["model"] for r in srv.requests] == ["gpt-4o"]  # no refused switch reached the vendor


async def test_fork_step_numbers_continue_the_original(dev, names):
    tools, model = Counted(), RecordingProvider(five_steps())
    agent = Agent(provider=model, tools=tools.tools(), name=f"count-{names}")
    tq = f"fm-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        handle = await client.start(agent.name, "go")
        await handle.result()
        first = await client.fork(handle.id, at_step=3, edits={"tool_results": {"c-b": "EDITED"}})
        assert (await client.result(first)).output == "fork answer"
        assert [s.index for s in await client.steps(first)] == [4]
        assert (await client.status(first)).first_step == 4
        second = await client.fork(first, at_step=4, edits={"drop_last_reply": True})  # a fork of a fork
        second_result = await client.result(second)
        second_steps = await client.steps(second)
        with pytest.raises(ForkError, match=rf"is a fork of {handle.id} at step 3: its own steps start at 4"):
            await client.fork(first, at_step=2)
        with pytest.raises(ForkError, match="its steps are 4..4"):
            await client.fork(first, at_step=5)
    assert second_result.output == "second fork answer"
    assert [s.index for s in second_steps] == [5]
    assert tools.calls == ["a", "b"]


async def test_rewind_to_a_step_of_an_earlier_run_of_the_chain(dev, names):
    tools = Counted()
    script = [calls(str(i)) for i in range(8)] + ["original done", "rewound done"]
    agent = Agent(provider=RecordingProvider(script), tools=tools.tools(), name=f"rw-{names}",
                  config=LoopConfig(detect_loops=False))
    tq = f"fm-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "go", "continue_as_new_after": 20},
            id=f"rw-{names}", task_queue=tq,
        )
        await handle.result()
        assert (await client.status(handle.id)).first_step > 3  # step 3 lies in an earlier run
        with pytest.raises(ForkError, match="tool step"):
            await client.rewind(handle.id, to_step=3)
        new_run = await client.rewind(handle.id, to_step=3, rerun_tools=True, reason="redo from 3")
        result = await client.result(handle.id)
        steps = await client.steps(handle.id)
    assert new_run
    # Steps 0..3 kept (from the chain's first run); the model answered step 4 again, and that ended it.
    assert result.output == "rewound done"
    assert [(s.index, s.kind) for s in steps] == [(0, "model"), (1, "tool"), (2, "model"), (3, "tool"), (4, "model")]
    assert tools.calls == [str(i) for i in range(8)]


async def test_an_agent_with_middleware_uses_the_run_model(dev, srv, names):
    """Agents with middleware run each step whole on the worker (rein.workflows.worker_steps): same override."""
    srv.script([Reply(text="hooked answer")])
    agent = llm_agent(srv, f"mw-{names}", client_overrides=["model"])
    seen: list[str] = []

    @agent.before_model
    async def note(ctx):
        seen.append(getattr(ctx.provider, "model", "?"))

    tq = f"fm-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        handle = await client.start(agent.name, "hi", model="openai/gpt-4o-mini")
        assert (await client.result(handle.id)).output == "hooked answer"
        history = await handle.fetch_history()
    assert [r.body["model"] for r in srv.requests] == ["gpt-4o-mini"]
    assert seen == ["openai/gpt-4o-mini"]  # the step's context holds the switched provider too
    assert await summaries(history, dev.client.data_converter, CALL_MODEL) == ["model openai/gpt-4o-mini · iteration 1"] * 2

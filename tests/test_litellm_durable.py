"""A durable run whose model is LiteLLM over real HTTP (a local server speaking OpenAI's wire format).

The key lives only in the worker: it must not reach history, results or activity errors.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError

sys.path.insert(0, str(Path(__file__).parent))
from vendor_server import Fail, Reply, VendorServer  # noqa: E402

import rein  # noqa: E402
from rein import Agent, LiteLLMProvider, LoopConfig  # noqa: E402
from tests.support.history import assert_secret_absent, summaries  # noqa: E402
from tests.support.tools import add  # noqa: E402
from tests.support.waiting import wait_status  # noqa: E402

SECRET = "sk-test-" + uuid.uuid4().hex


@pytest.fixture()
def srv():
    with VendorServer() as s:
        yield s


def agent_for(srv: VendorServer, name: str, **config) -> Agent:
    # Two attempts, 0.1 s apart (not the default 1 s): the wait between them is no test's point here.
    return Agent(
        provider=LiteLLMProvider("openai/gpt-4o", api_base=srv.base_url + "/v1", api_key=SECRET),
        tools=[add],
        name=name,
        config=LoopConfig(model_attempts=2, model_retry_interval_s=0.1, **config),
    )


async def run(dev, agent: Agent, prompt: str = "2 + 3?", stream: bool = False):
    tq = f"llm-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": prompt, "stream": stream}, id=f"llm-{uuid.uuid4().hex[:8]}",
            task_queue=tq,
        )
        try:
            result = await handle.result()
        finally:
            history = await handle.fetch_history()
    return result, history


async def test_tool_round_over_http_with_a_transient_error(dev, srv):
    srv.script([Fail(429, echo_auth=True), Reply(tool_calls=[("c1", "add", {"a": 2, "b": 3})]), Reply(text="It is 5.")])
    result, history = await run(dev, agent_for(srv, "llm-ok"))
    assert result["output"] == "It is 5."
    assert result["usage"]["input_tokens"] == 22  # two answered calls of 11 tokens each
    # The 429 was retried by Temporal (one activity, two attempts), not by litellm.
    assert len(srv.requests) == 3
    sent = srv.requests[-1].body
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
    assert sent["tools"][0]["function"]["name"] == "add"
    # Its own model attempts: the lean first call described the agent only, the run made the call with them.
    assert await summaries(history, dev.client.data_converter) == [
        "model of agent llm-ok · iteration 1", "model openai/gpt-4o · iteration 1", "tool add(a=2, b=3)",
        "model openai/gpt-4o · iteration 2"]
    # "It is 5." shows the decoded payloads really are readable.
    await assert_secret_absent(history, SECRET, dev.client.data_converter, present="It is 5.")
    assert SECRET not in json.dumps(result)


async def test_a_streamed_run_keeps_the_key_out_of_every_payload(dev, srv):
    """The streaming path (the model's answer published live to the run's stream) also keeps the key
    out of every decoded payload of the history and out of the result."""
    srv.script([Reply(tool_calls=[("c1", "add", {"a": 2, "b": 3})]), Reply(text="It is 5.")])
    result, history = await run(dev, agent_for(srv, "llm-stream"), stream=True)
    assert result["output"] == "It is 5."
    assert all(r.body.get("stream") is True for r in srv.requests) and len(srv.requests) == 2  # really streamed
    await assert_secret_absent(history, SECRET, dev.client.data_converter, present="It is 5.")
    assert SECRET not in json.dumps(result)


async def test_a_401_fails_the_run_without_retries_or_leaking_the_key(dev, srv):
    srv.script([Fail(401, echo_auth=True)])
    with pytest.raises(WorkflowFailureError) as failure:
        await run(dev, agent_for(srv, "llm-401"))
    assert len(srv.requests) == 1
    assert "AuthenticationError" in str(failure.value.cause)
    assert SECRET not in str(failure.value.cause)


async def test_exhausted_retries_wait_for_the_retry_signal(dev, srv):
    srv.script([Fail(503), Fail(503), Reply(text="back again")])
    agent = agent_for(srv, "llm-503")
    tq = f"llm-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "hi"}, id=f"llm-{uuid.uuid4().hex[:8]}", task_queue=tq
        )
        status = await wait_status(handle, "waiting_retry")
        assert status["interrupt"]["type"] == "error"
        assert "503" in status["interrupt"]["message"] or "ServiceUnavailable" in status["interrupt"]["message"]
        await handle.signal("retry", {})
        result = await handle.result()
    assert result["output"] == "back again"
    assert len(srv.requests) == 3


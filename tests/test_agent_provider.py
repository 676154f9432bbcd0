"""Reassigning `agent.provider` (or `agent.model`) on an agent a worker already serves takes effect
from the next model call: each model call asks the agent for its provider."""

from __future__ import annotations

import uuid

import rein
from rein import Agent
from rein.blueprint.providers import LiteLLMProvider, MockProvider
from rein.client import ReinClient


async def test_reassigned_provider_answers_the_next_run(env):
    agent = Agent(provider=MockProvider(["from the first provider"]), name=f"swap-{uuid.uuid4().hex[:6]}")
    queue = f"swap-{uuid.uuid4().hex[:6]}"
    client = ReinClient(env.client, task_queue=queue)
    async with rein.create_worker(env.client, agents=[agent], task_queue=queue):
        first = await client.result((await client.start(agent.name, "hi")).id)
        agent.provider = MockProvider(["from the second provider"])  # the worker is already serving
        second = await client.result((await client.start(agent.name, "hi")).id)
    assert first.output == "from the first provider"
    assert second.output == "from the second provider"
    assert agent.provider._index == 1  # the new provider answered once


def test_reassigned_model_rebuilds_the_provider():
    agent = Agent("openai/gpt-4o-mini")
    built = agent._resolve_provider()
    assert isinstance(built, LiteLLMProvider) and built.model == "openai/gpt-4o-mini"
    assert agent._resolve_provider() is built  # cached while the model stays
    agent.model = "anthropic/claude-3-5-haiku-latest"
    rebuilt = agent._resolve_provider()
    assert isinstance(rebuilt, LiteLLMProvider) and rebuilt.model == "anthropic/claude-3-5-haiku-latest"
    given = MockProvider(["x"])
    agent.provider = given
    assert agent._resolve_provider() is given

"""The OpenAI Agents SDK on Temporal's own integration (temporalio-openai-agents, OpenAIAgentsPlugin), the
lean.py workload: a scripted model asks make(n, pad) (an activity as tool) until n results, then answers."""
from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Model, ModelProvider, Runner
    from temporalio.openai_agents import workflow as oa_workflow
    from temporalio.openai_agents.testing import ResponseBuilders


@activity.defn
async def make(n: int, pad: int) -> str:
    """The padded tool result."""
    return (str(n + 1) + ":").ljust(pad, "x")


class Scripted(Model):
    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, **kw: Any):
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        prompt = next(i["content"] for i in items if isinstance(i, dict) and i.get("role") == "user")
        n = int(prompt.split("n=")[1].split()[0])
        pad = int(prompt.split("pad=")[1].split()[0])
        last = items[-1]
        done = int(str(last["output"]).split(":", 1)[0]) if isinstance(last, dict) and last.get("type") == "function_call_output" else 0
        if done >= n:
            return ResponseBuilders.output_message(f"done after {done}")
        return ResponseBuilders.tool_call(json.dumps({"n": done, "pad": pad}), "make", call_id=f"c{done}", item_id=f"i{done}")

    def stream_response(self, *a: Any, **kw: Any):
        raise NotImplementedError


class Provider(ModelProvider):
    def get_model(self, model_name):
        return Scripted()


@workflow.defn
class PeerOA:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = Agent(name="peer", instructions="", tools=[
            oa_workflow.activity_as_tool(make, start_to_close_timeout=timedelta(seconds=60))])
        result = await Runner.run(agent, prompt, max_turns=100_000)
        return result.final_output

"""pydantic-ai's Temporal integration (TemporalDurability, stock PydanticAIPlugin), the lean.py workload:
a scripted model asks make(n, pad) until n tool results, then answers in text."""
from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits


def scripted(messages, info: AgentInfo) -> ModelResponse:
    prompt = messages[0].parts[-1].content
    n = int(prompt.split("n=")[1].split()[0])
    pad = int(prompt.split("pad=")[1].split()[0])
    done = 0
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        done = int(str(last.content).split(":", 1)[0])
    if done >= n:
        return ModelResponse(parts=[TextPart(f"done after {done}")])
    return ModelResponse(parts=[ToolCallPart("make", {"n": done, "pad": pad}, tool_call_id=f"c{done}")])


async def make(n: int, pad: int) -> str:
    return (str(n + 1) + ":").ljust(pad, "x")


agent = Agent(FunctionModel(scripted), name="peer", tools=[make], capabilities=[TemporalDurability()])


@workflow.defn
class PeerPAI(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [agent]

    @workflow.run
    async def run(self, prompt: str) -> str:
        return (await agent.run(prompt, usage_limits=UsageLimits(request_limit=None))).output

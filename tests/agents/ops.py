"""The agent of the ops scenario (tests/test_ops_scenario.py), served by `python worker.py`.

    python worker.py --agent tests.agents.ops:agent

A stateless scripted model: it decides by the conversation alone (no counters),
so any worker process can serve any run at any point. First it asks to run
`restart_service`; once a tool result is in, it reports that result as text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from rein import Agent, Completion, LoopConfig, Message, StreamChunk, ToolCall, Usage

SERVICE = "billing"
TOOL_CALL_ID = "call-restart-1"


def restart_service(service: str) -> str:
    """Restart a service and report what happened.

    Args:
        service: The name of the service to restart.
    """
    return f"{service} restarted cleanly"


class ScriptedOpsModel:
    """Tool call first, then a text answer quoting the tool's result."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        usage = Usage(input_tokens=10, output_tokens=5)
        results = [m for m in messages if m.role == "tool"]
        if not results:
            call = ToolCall(id=TOOL_CALL_ID, name="restart_service", arguments={"service": SERVICE})
            return Completion(
                message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls", usage=usage
            )
        text = f"Report: {results[-1].content}"
        return Completion(message=Message(role="assistant", content=text), finish_reason="stop", usage=usage)

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        completion = await self.complete(messages, tools)
        if completion.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls)
        else:
            yield StreamChunk(type="text", text=completion.message.content)
        yield StreamChunk(type="done", finish_reason=completion.finish_reason, usage=completion.usage)


agent = Agent(
    provider=ScriptedOpsModel(),
    tools=[restart_service],
    system="You are an ops assistant. Use the tools to act on services.",
    config=LoopConfig(permission="ask"),
    name="ops-bot",
)

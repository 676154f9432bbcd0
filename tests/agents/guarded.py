"""An agent with middleware, a hook and event handlers, served by a separate `python worker.py`.

    REINTEST_EVENTS=/tmp/events.log python worker.py --agent tests.agents.guarded:agent

Its model is stateless (it decides by the conversation alone) and reports what it saw,
so the client can tell that the hook ran before the model call. Event handlers append
to the file named by REINTEST_EVENTS, which shows where they ran.
"""

from __future__ import annotations

import os
from typing import Any

from rein import Agent, Completion, Message, ToolCall


def lookup(account: str) -> str:
    """Look an account up."""
    return f"account {account}: card 4111-1111-1111-1111"


class ReportingModel:
    """Asks for `lookup` once, then answers with the tool result it was given."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        results = [m.content for m in messages if m.role == "tool"]
        if not results:
            call = ToolCall(id="call-1", name="lookup", arguments={"account": "acme"})
            return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls")
        notes = [m.content for m in messages if m.role == "system"]
        return Completion(
            message=Message(role="assistant", content=f"I saw: {results[-1]} | notes: {notes}"), finish_reason="stop"
        )


agent = Agent(provider=ReportingModel(), tools=[lookup], name="guarded")


@agent.middleware
async def compliance_note(ctx, call_next):  # noqa: ANN001, ANN201
    if not any(m.role == "system" for m in ctx.session.messages):
        ctx.session.messages.insert(0, Message(role="system", content=f"served by pid {os.getpid()}"))
    return await call_next(ctx)


@agent.after_tool
async def mask_cards(ctx):  # noqa: ANN001, ANN201
    for message in ctx.session.messages:
        if message.role == "tool":
            message.content = message.content.replace("4111-1111-1111-1111", "****")


def _record(ctx) -> None:  # noqa: ANN001
    path = os.environ.get("REINTEST_EVENTS")
    if path:
        with open(path, "a") as out:
            out.write(f"{os.getpid()} {ctx.stage.value} {[s.kind for s in ctx.steps]}\n")


agent.on("step", _record)

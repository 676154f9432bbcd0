"""Agents that wait for people, for the inbox's tests and bench: a stateless model that says a few words and asks
for the call its prompt names (`read /tmp/a`, `delete /etc/x`, `ask Which one?`), then reports the result."""

from __future__ import annotations

from typing import Any

import rein
from rein import Agent, Completion, LoopConfig, Message, ToolCall, Usage


class FilesModel:
    """Stateless: `read P` -> read_file(path=P), `delete P` -> delete_file(path=P), `ask Q` -> ask_human(question=Q);
    after a tool result, `Done: <result>`."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        usage = Usage(input_tokens=3, output_tokens=2)
        results = [m for m in messages if m.role == "tool"]
        if results:
            return Completion(message=Message(role="assistant", content=f"Done: {results[-1].content}"),
                              finish_reason="stop", usage=usage)
        prompt = next(m.content for m in messages if m.role == "user") or ""
        verb, _, rest = prompt.partition(" ")
        name, arguments = {"read": ("read_file", {"path": rest}), "delete": ("delete_file", {"path": rest}),
                           "ask": ("ask_human", {"question": rest})}.get(verb, ("read_file", {"path": rest}))
        call = ToolCall(id=f"call-{verb}", name=name, arguments=arguments)
        return Completion(message=Message(role="assistant", content=f"I will {verb} {rest} now.", tool_calls=[call]),
                          finish_reason="tool_calls", usage=usage)


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: Which file.
    """
    return f"contents of {path}"


@rein.tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (always asks a person).

    Args:
        path: Which file.
    """
    return f"{path} deleted"


def files_agent(name: str, **config: Any) -> Agent:
    """An agent whose every call asks (permission "ask"); delete_file asks whatever a rule says."""
    return Agent(provider=FilesModel(), tools=[read_file, delete_file, rein.ask_human], name=name,
                 config=LoopConfig(permission="ask", **config))

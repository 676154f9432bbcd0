"""A planner agent that keeps a to-do list in its thread's shared state (docs/threads.md, "Shared state").

Offline: a small scripted model reads the request. `add milk and eggs` calls `add_todo` once per item, one after
another, `remove milk` calls `remove_todo`, anything else `list_todos`; then it says what its last tool said. The list lives
in the thread, not in the worker: a page (AG-UI or the AI SDK, examples/aisdk with `?agent=planner`) shows it and
may change it too, and every change is versioned so neither side overwrites the other's.

    rein worker --agent rein.examples.planner:agent
    rein send todo-1 "add milk and eggs" --agent planner
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

from rein import Agent, Completion, Message, StreamChunk, ToolCall, ToolContext, Usage


def add_todo(item: str, ctx: ToolContext) -> str:
    """Add an item to the to-do list.

    Args:
        item: What to do.
    """
    todos = ctx.state.setdefault("todos", [])
    todos.append(item)
    return f"added {item} ({len(todos)} on the list)"


def remove_todo(item: str, ctx: ToolContext) -> str:
    """Remove an item from the to-do list.

    Args:
        item: The item to remove.
    """
    todos = ctx.state.setdefault("todos", [])
    if item not in todos:
        return f"{item} is not on the list"
    todos.remove(item)
    return f"removed {item} ({len(todos)} on the list)"


def list_todos(ctx: ToolContext) -> str:
    """Read the to-do list."""
    todos = ctx.state.get("todos") or []
    return ", ".join(todos) if todos else "the list is empty"


class ScriptedPlanner:
    """Plays the model offline (see the module): one call per item, one after another (each sees the list as the
    last one left it); `batch=True` asks for them all at once (one batch: each sees the list as the batch began,
    and their changes apply in call order)."""

    stream_is_complete = True

    def __init__(self, batch: bool = False):
        self.batch = batch

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        usage = Usage(input_tokens=sum(len(m.content) for m in messages) // 4, output_tokens=6)
        start = max(i for i, m in enumerate(messages) if m.role == "user")
        asked, answered = messages[start].content.strip(), [m for m in messages[start:] if m.role == "tool"]
        verb, _, rest = asked.partition(" ")
        items = [i.strip() for i in re.split(r",|\band\b", rest) if i.strip()] if verb in ("add", "remove") else []
        todo = items[len(answered):] if not (self.batch and answered) else []
        if not todo and answered:
            return Completion(message=Message(role="assistant", content=f"Done: {answered[-1].content}."),
                              finish_reason="stop", usage=usage)
        if todo:
            calls = [ToolCall(id=f"todo-{len(messages)}-{n}", name=f"{verb}_todo", arguments={"item": item})
                     for n, item in enumerate(todo if self.batch else todo[:1])]
        else:
            calls = [ToolCall(id=f"todo-{len(messages)}-list", name="list_todos", arguments={})]
        return Completion(message=Message(role="assistant", tool_calls=calls), finish_reason="tool_calls", usage=usage)

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        completion = await self.complete(messages, tools)
        if completion.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls)
        else:
            yield StreamChunk(type="text", text=completion.message.content)
        yield StreamChunk(type="done", finish_reason=completion.finish_reason, usage=completion.usage)


agent = Agent(
    provider=ScriptedPlanner(),
    tools=[add_todo, remove_todo, list_todos],
    system="You keep the user's to-do list in the thread's shared state.",
    name="planner",
)

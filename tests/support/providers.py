"""Scripted models for tests, and the vendor errors they raise.

`MockProvider` (rein's own scripted model) covers most tests; these cover what it does not:
recording what each call saw, deciding by the conversation alone (stateless, so any worker
or concurrent run can use one instance), and outages a test switches off.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from rein import Completion, Message, MockProvider, StreamChunk, ToolCall, Usage


class RateLimited(Exception):
    """A transient vendor error (HTTP 429)."""

    status_code = 429


class Unavailable(Exception):
    """A transient vendor error (HTTP 503)."""

    status_code = 503


class AuthFailed(Exception):
    """A fatal vendor error (HTTP 401)."""

    status_code = 401


class StreamsItsCompletion:
    """`stream` as the chunks of `complete`'s answer: its tool calls or its text, then `done`.

    A mixin: the class (or one after it in the MRO, e.g. MockProvider) defines `complete`.
    """

    async def stream(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> AsyncIterator[StreamChunk]:
        completion = await self.complete(messages, tools)
        if completion.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls)
        else:
            yield StreamChunk(type="text", text=completion.message.content)
        yield StreamChunk(type="done", finish_reason=completion.finish_reason, usage=completion.usage)


class RecordingProvider(MockProvider):
    """A MockProvider that keeps what each model call saw: the conversation and the tools offered.

    `gate`: the first call waits until it is set (to hold a run inside its first model call).
    """

    def __init__(self, responses: list, gate: asyncio.Event | None = None, **kwargs: Any):
        super().__init__(responses, **kwargs)
        self.seen: list[list[Message]] = []
        self.offered: list[list] = []
        self.gate = gate

    @property
    def seen_dumped(self) -> list[list[dict[str, Any]]]:
        """`seen` as plain dicts (what two engines' runs can be compared by)."""
        return [[m.model_dump() for m in conversation] for conversation in self.seen]

    async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        self.seen.append([m.model_copy(deep=True) for m in messages])
        self.offered.append(list(tools or []))
        if self.gate is not None and len(self.seen) == 1:
            await self.gate.wait()
        return await super().complete(messages, tools, **kwargs)


class EchoProvider(StreamsItsCompletion):
    """Stateless: answers `prefix` + the last user message, so concurrent runs cannot mix; counts calls."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.calls = 0

    async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        self.calls += 1
        await asyncio.sleep(0)  # let concurrent runs interleave
        last_user = next(m.content for m in reversed(messages) if m.role == "user")
        return Completion(message=Message(role="assistant", content=self.prefix + last_user), finish_reason="stop",
                          usage=Usage(input_tokens=1))


class OutageProvider(StreamsItsCompletion):
    """Raises `error(message)` on every call while `failing` is set; answers "recovered" once a test clears it."""

    def __init__(self, error: type[Exception], message: str) -> None:
        self.error, self.message = error, message
        self.failing = True
        self.calls = 0

    async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        self.calls += 1
        if self.failing:
            raise self.error(self.message)
        return Completion(message=Message(role="assistant", content="recovered"), finish_reason="stop",
                          usage=Usage(input_tokens=3, output_tokens=4))


class CallThenReport(StreamsItsCompletion):
    """Stateless (decides by the conversation alone, so any worker can serve any run at any point):
    asks for one tool call, then answers `report` filled with the last tool result.

    `arguments`: the call's arguments, or a function of the user's prompt that returns them.
    """

    def __init__(self, tool_name: str, arguments: dict[str, Any] | Callable[[str], dict[str, Any]],
                 call_id: str = "call-1", report: str = "Report: {}",
                 usage: Usage = Usage(input_tokens=3, output_tokens=2)) -> None:
        self.tool_name, self.arguments, self.call_id = tool_name, arguments, call_id
        self.report, self.usage = report, usage

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        results = [m for m in messages if m.role == "tool"]
        if results:
            text = self.report.format(results[-1].content)
            return Completion(message=Message(role="assistant", content=text), finish_reason="stop",
                              usage=self.usage.model_copy())
        prompt = next(m.content for m in messages if m.role == "user")
        arguments = self.arguments(prompt) if callable(self.arguments) else self.arguments
        call = ToolCall(id=self.call_id, name=self.tool_name, arguments=arguments)
        return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls",
                          usage=self.usage.model_copy())


def restart(service: str) -> str:
    """Restart a service.

    Args:
        service: Which service.
    """
    return f"{service} restarted"


class OpsModel(CallThenReport):
    """restart(service=<first word of the prompt>), then "Report: <what restart said>"."""

    def __init__(self) -> None:
        super().__init__("restart", lambda prompt: {"service": prompt.split()[0]}, call_id="call-restart")

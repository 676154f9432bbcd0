"""Compaction: keep a long conversation within budget before each model call.

In-process, the strategy runs before every model call. In a durable run the
workflow checks the strategy's `trigger` (plain data it can evaluate
deterministically) and, when it is due, asks the worker to compact (activity
`rein.compact`) and replaces the conversation it carries with the result. A
strategy without a `trigger` is asked before every model call.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from rein.core.ir import Message

SUMMARY_PREFIX = "[conversation summary]"


def estimate_tokens(messages_or_text: str | list[Message]) -> int:
    """A cheap, dependency-free estimate: a non-ASCII character ~1 token, four ASCII ones ~1."""
    if isinstance(messages_or_text, str):
        text = messages_or_text
    else:
        parts = []
        for m in messages_or_text:
            parts.append(m.content)
            for tc in m.tool_calls or []:
                parts.append(tc.name + json.dumps(tc.arguments, ensure_ascii=False))
        text = "".join(parts)
    return int(sum(1.0 if ord(ch) > 127 else 0.25 for ch in text)) + 1


class CompactionTrigger(BaseModel):
    """When compaction may change something: more than `max_messages` non-system messages
    and an estimate above `max_tokens` (a None bound always holds)."""

    max_messages: int | None = None
    max_tokens: int | None = None

    def due(self, messages: list[Message]) -> bool:
        if self.max_messages is not None and sum(m.role != "system" for m in messages) <= self.max_messages:
            return False
        return self.max_tokens is None or estimate_tokens(messages) > self.max_tokens


def trigger_of(strategy: Any) -> CompactionTrigger:
    trigger = getattr(strategy, "trigger", None)
    return trigger if isinstance(trigger, CompactionTrigger) else CompactionTrigger()


@runtime_checkable
class CompactionStrategy(Protocol):
    async def compact(self, messages: list[Message]) -> list[Message]: ...


def _drop_orphan_tools(messages: list[Message]) -> list[Message]:
    """A window must not start with tool results whose calls were cut off."""
    i = 0
    while i < len(messages) and messages[i].role == "tool":
        i += 1
    return messages[i:]


class SlidingWindow:
    """Keep the system messages and the last `max_messages` others."""

    def __init__(self, max_messages: int, *, keep_system: bool = True):
        self.max_messages = max_messages
        self.keep_system = keep_system

    @property
    def trigger(self) -> CompactionTrigger:
        return CompactionTrigger(max_messages=self.max_messages)

    async def compact(self, messages: list[Message]) -> list[Message]:
        system = [m for m in messages if m.role == "system"]
        others = [m for m in messages if m.role != "system"]
        if len(others) <= self.max_messages:
            return messages
        recent = _drop_orphan_tools(others[-self.max_messages :]) if self.max_messages > 0 else []
        return (system if self.keep_system else []) + recent


class SummarizeCompaction:
    """Fold old history into one system summary when the estimate exceeds `max_tokens`.

    `summarizer`: None (a mechanical digest), a Provider (asked to summarise), or
    an async callable taking the old messages and returning the summary text.
    """

    def __init__(self, max_tokens: int, *, keep_recent: int = 4, summarizer: Any = None):
        self.max_tokens = max_tokens
        self.keep_recent = keep_recent
        self.summarizer = summarizer

    @property
    def trigger(self) -> CompactionTrigger:
        # keep_recent <= 0 never compacts: a bound no conversation reaches.
        return CompactionTrigger(max_messages=self.keep_recent if self.keep_recent > 0 else 2**53, max_tokens=self.max_tokens)

    async def compact(self, messages: list[Message]) -> list[Message]:
        system = [m for m in messages if m.role == "system"]
        others = [m for m in messages if m.role != "system"]
        if estimate_tokens(messages) <= self.max_tokens or len(others) <= self.keep_recent or self.keep_recent <= 0:
            return messages
        old, recent = others[: -self.keep_recent], _drop_orphan_tools(others[-self.keep_recent :])
        summary = await self._summarize(old)
        return system + [Message(role="system", content=f"{SUMMARY_PREFIX} {summary}")] + recent

    async def _summarize(self, old: list[Message]) -> str:
        if self.summarizer is None:
            parts = [
                f"{m.role}: {m.content}" if m.content or not m.tool_calls
                else f"{m.role} called {', '.join(tc.name for tc in m.tool_calls)}"
                for m in old
            ]
            text = " | ".join(parts)
            return text if len(text) <= 500 else text[:500] + "…"
        if hasattr(self.summarizer, "complete"):
            convo = "\n".join(f"{m.role}: {m.content}" for m in old if m.content)
            prompt = "Summarise the key points of this conversation concisely:\n\n" + convo
            completion = await self.summarizer.complete([Message(role="user", content=prompt)])
            return completion.message.content
        return await self.summarizer(old)

"""Plain tools, and builders for the tool calls scripted models ask for."""

from __future__ import annotations

from typing import Any

from rein import ToolCall


def tc(name: str, /, cid: str = "1", **arguments: Any) -> ToolCall:
    """A tool call `cid` of `name` with keyword arguments (any names, even `name`), as a model would ask for it."""
    return ToolCall(id=cid, name=name, arguments=arguments)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def explode() -> str:
    """Always fails."""
    raise ZeroDivisionError("kaboom")


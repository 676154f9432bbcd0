"""Runtimes execute tool calls for the in-process runner (`rein.loop.arun(..., runtime=...)`).

The durable engine runs each call as a `rein.run_tool` activity instead; both
end up in `rein.tools.execute_tool`, so results are the same.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable

from rein.ir import ToolCall, ToolResult
from rein.machine import policy_denial
from rein.tools import ToolRegistry, execute_tool


@runtime_checkable
class Runtime(Protocol):
    async def execute(self, call: ToolCall, registry: ToolRegistry, permission: str = "allow") -> ToolResult: ...

    async def execute_all(
        self, calls: list[ToolCall], registry: ToolRegistry, permission: str = "allow"
    ) -> list[ToolResult]: ...


class LocalRuntime:
    """Runs tools in this process: async ones on the loop, sync ones in a thread."""

    async def execute(self, call: ToolCall, registry: ToolRegistry, permission: str = "allow") -> ToolResult:
        if permission == "deny":
            return policy_denial(call)
        return await execute_tool(registry.get(call.name), call, available=registry.names())

    async def execute_all(
        self, calls: list[ToolCall], registry: ToolRegistry, permission: str = "allow"
    ) -> list[ToolResult]:
        return list(await asyncio.gather(*(self.execute(c, registry, permission) for c in calls)))

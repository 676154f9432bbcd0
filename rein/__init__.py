"""rein: a durable agent orchestrator. Every agent run is a Temporal workflow.

Names are imported lazily (PEP 562), so importing a pure module such as
`rein.core.machine` (as the workflow sandbox does) never pulls in litellm, httpx or the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"

_EXPORTS: dict[str, str] = {
    "A2AServer": "rein.ops.a2a", "serve_a2a": "rein.ops.a2a",
    "Agent": "rein.blueprint.agent", "Chat": "rein.blueprint.agent", "tool": "rein.blueprint.agent",
    "LoopConfig": "rein.core.config",
    "ask_human": "rein.blueprint.human",
    "Completion": "rein.core.ir", "Message": "rein.core.ir", "StreamChunk": "rein.core.ir", "ToolCall": "rein.core.ir",
    "ToolResult": "rein.core.ir", "ToolSpec": "rein.core.ir", "Usage": "rein.core.ir",
    "disable_logging": "rein.core.log", "enable_logging": "rein.core.log",
    "MCPServerHTTP": "rein.blueprint.mcp", "MCPServerStdio": "rein.blueprint.mcp", "MCPServerStreamableHTTP": "rein.blueprint.mcp",
    "arun": "rein.local.loop", "aresume": "rein.local.loop", "astream": "rein.local.loop", "run": "rein.local.loop",
    "step": "rein.local.loop",
    "FallbackProvider": "rein.blueprint.providers", "LiteLLMProvider": "rein.blueprint.providers",
    "MockProvider": "rein.blueprint.providers",
    "Provider": "rein.blueprint.providers",
    "Interrupt": "rein.core.result", "RunResult": "rein.core.result", "Step": "rein.core.result",
    "LocalRuntime": "rein.blueprint.runtime", "Runtime": "rein.blueprint.runtime",
    "Decision": "rein.core.session", "Session": "rein.core.session", "Stage": "rein.core.session",
    "FileSessionStore": "rein.blueprint.store", "MemorySessionStore": "rein.blueprint.store", "SessionStore": "rein.blueprint.store",
    "Tool": "rein.blueprint.tools", "ToolContext": "rein.blueprint.tools", "ToolRegistry": "rein.blueprint.tools",
    "create_worker": "rein.durable.temporal_worker",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rein' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def _local_runner() -> Any:
    from rein.local import loop

    return loop


def _durable_runner() -> Any:
    from rein.durable import runner

    return runner


def _register_runners() -> None:
    from rein.blueprint.runners import register_runner

    register_runner("local", _local_runner)
    register_runner("temporal", _durable_runner)


_register_runners()


if TYPE_CHECKING:
    from rein.blueprint.agent import Agent, Chat, tool
    from rein.blueprint.human import ask_human
    from rein.blueprint.mcp import MCPServerHTTP, MCPServerStdio, MCPServerStreamableHTTP
    from rein.blueprint.providers import FallbackProvider, LiteLLMProvider, MockProvider, Provider
    from rein.blueprint.runtime import LocalRuntime, Runtime
    from rein.blueprint.store import FileSessionStore, MemorySessionStore, SessionStore
    from rein.blueprint.tools import Tool, ToolContext, ToolRegistry
    from rein.core.config import LoopConfig
    from rein.core.ir import Completion, Message, StreamChunk, ToolCall, ToolResult, ToolSpec, Usage
    from rein.core.log import disable_logging, enable_logging
    from rein.core.result import Interrupt, RunResult, Step
    from rein.core.session import Decision, Session, Stage
    from rein.durable.temporal_worker import create_worker
    from rein.local.loop import aresume, arun, astream, run, step
    from rein.ops.a2a import A2AServer, serve_a2a

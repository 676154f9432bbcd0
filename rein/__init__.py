"""rein: a durable agent orchestrator. Every agent run is a Temporal workflow.

Names are imported lazily (PEP 562), so importing a pure module such as
`rein.machine` (as the workflow sandbox does) never pulls in litellm, httpx or the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"

_EXPORTS: dict[str, str] = {
    "A2AServer": "rein.a2a", "serve_a2a": "rein.a2a",
    "Agent": "rein.agent", "Chat": "rein.agent", "tool": "rein.agent",
    "LoopConfig": "rein.config",
    "ask_human": "rein.human",
    "Completion": "rein.ir", "Message": "rein.ir", "StreamChunk": "rein.ir", "ToolCall": "rein.ir",
    "ToolResult": "rein.ir", "ToolSpec": "rein.ir", "Usage": "rein.ir",
    "disable_logging": "rein.log", "enable_logging": "rein.log",
    "MCPServerHTTP": "rein.mcp", "MCPServerStdio": "rein.mcp", "MCPServerStreamableHTTP": "rein.mcp",
    "arun": "rein.loop", "aresume": "rein.loop", "astream": "rein.loop", "run": "rein.loop", "step": "rein.loop",
    "FallbackProvider": "rein.providers", "LiteLLMProvider": "rein.providers", "MockProvider": "rein.providers",
    "Provider": "rein.providers",
    "Interrupt": "rein.result", "RunResult": "rein.result", "Step": "rein.result",
    "LocalRuntime": "rein.runtime", "Runtime": "rein.runtime",
    "Decision": "rein.session", "Session": "rein.session", "Stage": "rein.session",
    "FileSessionStore": "rein.store", "MemorySessionStore": "rein.store", "SessionStore": "rein.store",
    "Tool": "rein.tools", "ToolContext": "rein.tools", "ToolRegistry": "rein.tools",
    "create_worker": "rein.worker",
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


if TYPE_CHECKING:
    from rein.a2a import A2AServer, serve_a2a
    from rein.agent import Agent, Chat, tool
    from rein.config import LoopConfig
    from rein.human import ask_human
    from rein.ir import Completion, Message, StreamChunk, ToolCall, ToolResult, ToolSpec, Usage
    from rein.log import disable_logging, enable_logging
    from rein.loop import aresume, arun, astream, run, step
    from rein.mcp import MCPServerHTTP, MCPServerStdio, MCPServerStreamableHTTP
    from rein.providers import FallbackProvider, LiteLLMProvider, MockProvider, Provider
    from rein.result import Interrupt, RunResult, Step
    from rein.runtime import LocalRuntime, Runtime
    from rein.session import Decision, Session, Stage
    from rein.store import FileSessionStore, MemorySessionStore, SessionStore
    from rein.tools import Tool, ToolContext, ToolRegistry
    from rein.worker import create_worker

"""rein: a durable agent orchestrator. Every agent run is a Temporal workflow.

Names are imported lazily (PEP 562), so importing a pure module such as
`rein.core.machine` (as the workflow sandbox does) never pulls in litellm, httpx or the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rein import old_paths

__version__ = "0.4.0"

_EXPORTS: dict[str, str] = {
    "A2AServer": "rein.web.a2a", "serve_a2a": "rein.web.a2a",
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
    # the rest of rein-agent 0.2.0's top-level names
    "CompactionStrategy": "rein.core.compaction", "SlidingWindow": "rein.core.compaction",
    "SummarizeCompaction": "rein.core.compaction", "estimate_tokens": "rein.core.compaction",
    "StepContext": "rein.blueprint.middleware", "DockerRuntime": "rein.blueprint.runtime",
    "load_plugins": "rein.plugins", "plugin_names": "rein.plugins",
    "available_templates": "rein.ops.scaffold", "create_project": "rein.ops.scaffold", "export_run": "rein.tracing.export",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if f"rein.{name}" in old_paths.OLD_PATHS:  # rein-agent's `import rein; rein.loop.run(...)`
        return importlib.import_module(f"rein.{name}")
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
old_paths.install()  # earlier releases' module paths (rein.ir, rein.providers.fallback, ...) as aliases


if TYPE_CHECKING:
    from rein.blueprint.agent import Agent, Chat, tool
    from rein.blueprint.human import ask_human
    from rein.blueprint.mcp import MCPServerHTTP, MCPServerStdio, MCPServerStreamableHTTP
    from rein.blueprint.middleware import StepContext
    from rein.blueprint.providers import FallbackProvider, LiteLLMProvider, MockProvider, Provider
    from rein.blueprint.runtime import DockerRuntime, LocalRuntime, Runtime
    from rein.blueprint.store import FileSessionStore, MemorySessionStore, SessionStore
    from rein.blueprint.tools import Tool, ToolContext, ToolRegistry
    from rein.core.compaction import CompactionStrategy, SlidingWindow, SummarizeCompaction, estimate_tokens
    from rein.core.config import LoopConfig
    from rein.core.ir import Completion, Message, StreamChunk, ToolCall, ToolResult, ToolSpec, Usage
    from rein.core.log import disable_logging, enable_logging
    from rein.core.result import Interrupt, RunResult, Step
    from rein.core.session import Decision, Session, Stage
    from rein.durable.temporal_worker import create_worker
    from rein.local.loop import aresume, arun, astream, run, step
    from rein.ops.scaffold import available_templates, create_project
    from rein.plugins import load_plugins, plugin_names
    from rein.tracing.export import export_run
    from rein.web.a2a import A2AServer, serve_a2a

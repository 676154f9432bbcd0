"""rein: a durable agent orchestrator. Every agent run is a Temporal workflow."""

from rein.a2a import A2AServer, serve_a2a
from rein.agent import Agent, Chat, tool
from rein.config import LoopConfig
from rein.human import ask_human
from rein.ir import Completion, Message, StreamChunk, ToolCall, ToolResult, ToolSpec, Usage
from rein.log import disable_logging, enable_logging
from rein.loop import arun, aresume, astream, run, step
from rein.providers import FallbackProvider, LiteLLMProvider, MockProvider, Provider
from rein.result import Interrupt, RunResult, Step
from rein.runtime import LocalRuntime, Runtime
from rein.session import Decision, Session, Stage
from rein.store import FileSessionStore, MemorySessionStore, SessionStore
from rein.tools import Tool, ToolContext, ToolRegistry

__version__ = "0.3.0"


def create_worker(client, agents, task_queue="rein", **worker_kwargs):  # noqa: ANN001, ANN201
    """A temporalio Worker serving `agents` on `task_queue` (see rein.worker.create_worker)."""
    from rein.worker import create_worker as _create_worker

    return _create_worker(client, agents, task_queue=task_queue, **worker_kwargs)


__all__ = [
    "__version__",
    "Agent", "Chat", "tool", "ask_human", "create_worker",
    "Message", "ToolCall", "ToolResult", "ToolSpec", "Usage", "Completion", "StreamChunk",
    "LoopConfig", "Session", "Stage", "Decision", "RunResult", "Step", "Interrupt",
    "Tool", "ToolRegistry", "ToolContext",
    "Provider", "MockProvider", "LiteLLMProvider", "FallbackProvider",
    "step", "arun", "run", "astream", "aresume",
    "enable_logging", "disable_logging",
    "Runtime", "LocalRuntime", "SessionStore", "MemorySessionStore", "FileSessionStore",
    "A2AServer", "serve_a2a",
]

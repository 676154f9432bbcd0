"""The agent of the tracing tests (tests/test_tracing.py), served by `worker.py` subprocesses.

Its model is LiteLLM's `openai/gpt-4o` over real HTTP against tests/vendor_server.py (the test
scripts the replies; REINTEST_VENDOR is its base URL). Every tool call waits for approval.
With REINTEST_DIR set, the first attempt of `note` writes `started` there and then hangs, so
a test can SIGKILL the worker mid-tool. `lead` uses `helper` as a tool (a child run).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from rein import Agent, LiteLLMProvider, LoopConfig, ToolContext, tool


@tool(timeout_s=4)
def note(text: str, ctx: ToolContext) -> str:
    """Write a note down.

    Args:
        text: The note.
    """
    folder = os.environ.get("REINTEST_DIR")
    if folder and ctx.attempt == 1:
        (Path(folder) / "started").write_text(str(os.getpid()))
        time.sleep(60)
    return f"noted: {text}"


def build(name: str = "traced-notes", tools: list | None = None, permission: str = "ask") -> Agent:
    base = os.environ.get("REINTEST_VENDOR", "http://127.0.0.1:9") + "/v1"
    provider = LiteLLMProvider("openai/gpt-4o", api_base=base, api_key="sk-test-tracing")
    return Agent(provider=provider, tools=tools or [note], config=LoopConfig(permission=permission), name=name)


agent = build()

helper = build("traced-helper")
lead = build("traced-lead", tools=[helper.as_tool()], permission="allow")

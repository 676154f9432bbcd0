"""The agent of the cross-process tests (tests/test_embedded.py), run by separate scripts.

A stateless scripted model: it asks to run `record` once, then reports the tool's result.
`record` needs approval and leaves its side effects in files named by REINTEST_DIR, so the
tests count how often it started and finished across processes. With REINTEST_SLOW_FIRST
set, its first attempt writes `started` and then sleeps (for killing the process mid-tool).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from rein import Agent, LoopConfig, ToolContext, Usage, tool
from tests.support.providers import CallThenReport


@tool(timeout_s=6)
def record(note: str, ctx: ToolContext) -> str:
    """Record a note.

    Args:
        note: What to record.
    """
    out = Path(os.environ["REINTEST_DIR"])
    with open(out / "starts", "a") as f:
        f.write(f"{os.getpid()} attempt {ctx.attempt}\n")
    if os.environ.get("REINTEST_SLOW_FIRST") and ctx.attempt == 1:
        (out / "started").write_text(str(os.getpid()))
        time.sleep(4)
    with open(out / "effects", "a") as f:
        f.write(f"{note} by {os.getpid()}\n")
    return f"recorded {note}"


MODEL = CallThenReport("record", {"note": "hello"}, call_id="call-record", report="Done: {}.",
                       usage=Usage(input_tokens=10, output_tokens=5))
agent = Agent(provider=MODEL, tools=[record], config=LoopConfig(permission="ask", heartbeat_timeout_s=2),
              name="durable-notes")
"""A tool call lost with a killed process is tried again 2 s after its last heartbeat, not 6 (its timeout)."""

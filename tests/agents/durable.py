"""The agent of the cross-process tests (tests/test_embedded.py), run by separate scripts.

A stateless scripted model: it asks to run `record` once, then reports the tool's result.
`record` needs approval and leaves its side effects in files named by REIN_TEST_DIR, so the
tests count how often it started and finished across processes. With REIN_TEST_SLOW_FIRST
set, its first attempt writes `started` and then sleeps (for killing the process mid-tool).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rein import Agent, Completion, LoopConfig, Message, ToolCall, ToolContext, Usage, tool


@tool(timeout_s=6)
def record(note: str, ctx: ToolContext) -> str:
    """Record a note.

    Args:
        note: What to record.
    """
    out = Path(os.environ["REIN_TEST_DIR"])
    with open(out / "starts", "a") as f:
        f.write(f"{os.getpid()} attempt {ctx.attempt}\n")
    if os.environ.get("REIN_TEST_SLOW_FIRST") and ctx.attempt == 1:
        (out / "started").write_text(str(os.getpid()))
        time.sleep(4)
    with open(out / "effects", "a") as f:
        f.write(f"{note} by {os.getpid()}\n")
    return f"recorded {note}"


class Model:
    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        usage = Usage(input_tokens=10, output_tokens=5)
        results = [m.content for m in messages if m.role == "tool"]
        if results:
            text = f"Done: {results[-1]}."
            return Completion(message=Message(role="assistant", content=text), finish_reason="stop", usage=usage)
        call = ToolCall(id="call-record", name="record", arguments={"note": "hello"})
        return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls", usage=usage)


agent = Agent(provider=Model(), tools=[record], config=LoopConfig(permission="ask"), name="durable-notes")

"""Record the workflow histories that the replay tests run (tests/test_workflow.py).

Run it once per deliberate change of AgentWorkflow's command sequence, and commit
the JSON it writes; the tests only read it:

    .venv/bin/python tests/histories/make_histories.py

agent_approval_v<N>.json: a tool call that needs approval (approved, then executed),
then an `ask_human` question answered by a person, then the final answer. Older
versions stay: each records the command sequence of an earlier AgentWorkflow, which
the current code must still replay (via workflow.patched).
  v1: before the rein-throttled-counters patch
  v2: with it
  v3: with the rein-prompt-cancel patch
  v4: both patches retired (workflow.deprecate_patch: no markers), slim result, model calls
      that refer to worker-produced messages; v1 no longer replays (see tests/test_workflow.py)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import rein
from rein import Agent, LoopConfig, MockProvider, ToolCall
from rein.testing import start_local

HERE = Path(__file__).parent
CURRENT = "agent_approval_v4.json"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def approval_agent() -> Agent:
    return Agent(
        provider=MockProvider(
            [
                [ToolCall(id="call-add", name="add", arguments={"a": 1, "b": 2})],
                [ToolCall(id="call-ask", name="ask_human", arguments={"question": "Round the result?"})],
                "The sum is 3.",
            ]
        ),
        tools=[add, rein.ask_human],
        system="You add numbers.",
        name="history-agent",
        config=LoopConfig(permission="ask"),
    )


async def wait_for(handle, status: str) -> None:  # noqa: ANN001
    for _ in range(500):
        if (await handle.query("status"))["status"] == status:
            return
        await asyncio.sleep(0.02)
    raise RuntimeError(f"run never reached {status}")


async def main() -> None:
    env = await start_local()
    try:
        async with rein.create_worker(env.client, agents=[approval_agent()], task_queue="histories"):
            handle = await env.client.start_workflow(
                "AgentWorkflow",
                {"agent": "history-agent", "prompt": "What is 1 + 2?"},
                id="agent-approval",
                task_queue="histories",
            )
            await wait_for(handle, "waiting_approval")
            await handle.signal("approve", {"approver": "alice", "reason": "read-only"})
            await wait_for(handle, "waiting_input")
            await handle.signal("answer", {"text": "No rounding.", "approver": "alice"})
            result = await handle.result()
            assert result["output"] == "The sum is 3.", result
            history = await handle.fetch_history()
        target = HERE / CURRENT
        target.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
        print(f"wrote {target} ({len(history.events)} events)")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())

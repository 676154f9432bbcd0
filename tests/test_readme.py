"""The README's user-facing snippets, run as written (they are the first thing people copy)."""

from __future__ import annotations

import rein
from examples.calculator import agent
from rein.testing import start_time_skipping


async def test_my_agent_waits_three_days():
    async with await start_time_skipping() as env:
        async with rein.create_worker(env.client, agents=[agent], task_queue="t"):
            handle = await env.client.start_workflow(
                "AgentWorkflow", {"agent": "calculator", "prompt": "2 + 3?"}, id="t-1", task_queue="t")
            await env.sleep(3 * 86400)       # runs in well under a second
            await handle.signal("approve", {"approver": "me"})
            assert (await handle.result())["output"] == "The answer is 5."

"""The agent of the ops scenario (tests/test_ops_scenario.py), served by `python worker.py`.

    python worker.py --agent tests.agents.ops:agent

A stateless scripted model: it decides by the conversation alone (no counters),
so any worker process can serve any run at any point. First it asks to run
`restart_service`; once a tool result is in, it reports that result as text.
"""

from __future__ import annotations

from rein import Agent, LoopConfig, Usage
from tests.support.providers import CallThenReport

SERVICE = "billing"
TOOL_CALL_ID = "call-restart-1"


def restart_service(service: str) -> str:
    """Restart a service and report what happened.

    Args:
        service: The name of the service to restart.
    """
    return f"{service} restarted cleanly"


class ScriptedOpsModel(CallThenReport):
    """restart_service(service="billing") first, then a report quoting the tool's result.

    Its class name is the model label the ops scenario reads in activity summaries.
    """

    def __init__(self) -> None:
        super().__init__("restart_service", {"service": SERVICE}, call_id=TOOL_CALL_ID,
                         usage=Usage(input_tokens=10, output_tokens=5))


agent = Agent(
    provider=ScriptedOpsModel(),
    tools=[restart_service],
    system="You are an ops assistant. Use the tools to act on services.",
    config=LoopConfig(permission="ask"),
    name="ops-bot",
)

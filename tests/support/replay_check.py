"""Replay histories with whichever rein this process imports; writes {workflow id: failure or null}.

    python replay_check.py histories.json failures.json   # in: {"<workflow id>": <history JSON>, ...}

tests/support/old_build.py copies it next to an old build and runs it there, so the old build's
AgentWorkflow replays histories this build recorded (and the other way round in-process).
"""

from __future__ import annotations

import asyncio
import json
import sys

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from rein.temporal import ReinPlugin
from rein.workflows import AgentWorkflow


async def main(path: str, out: str) -> None:
    histories = json.loads(open(path).read())
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[ReinPlugin(agents=[])])
    failures: dict[str, str | None] = {}
    for workflow_id, data in histories.items():
        result = await replayer.replay_workflow(WorkflowHistory.from_json(workflow_id, data),
                                                raise_on_replay_failure=False)
        failures[workflow_id] = None if result.replay_failure is None else str(result.replay_failure)
    with open(out, "w") as target:  # not stdout: the SDK's core logs its warnings there
        json.dump(failures, target)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

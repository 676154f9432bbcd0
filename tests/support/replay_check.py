"""Replay histories with whichever rein this process imports; writes {workflow id: failure or null}.

    python replay_check.py histories.json failures.json   # in: {"<workflow id>": <history JSON>, ...}

tests/support/old_build.py copies it next to an old build and runs it there, so the old build's
AgentWorkflow replays histories this build recorded (and the other way round in-process).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from rein.temporal.plugin import ReinPlugin  # every landed build has it (rein.ops.replay is newer than some)


def replayer() -> Replayer:
    """AgentWorkflow with rein's converter, as this process's rein defines them. Not rein.ops.replay's: an old
    build without rein.ops would import this checkout's (the editable install maps `rein.ops` here) and mix."""
    return Replayer(workflows=[], plugins=[ReinPlugin(agents=[])])


async def replay(histories: dict[str, dict]) -> dict[str, str | None]:
    """Workflow id -> why its history does not replay (None: it does), all in one replaying worker."""
    loaded = [WorkflowHistory.from_json(workflow_id, data) for workflow_id, data in histories.items()]

    async def each() -> AsyncIterator[WorkflowHistory]:
        for history in loaded:
            yield history

    results = await replayer().replay_workflows(each(), raise_on_replay_failure=False)
    failures = {h.run_id: results.replay_failures.get(h.run_id) for h in loaded}
    return {h.workflow_id: None if failures[h.run_id] is None else str(failures[h.run_id]) for h in loaded}


def main(path: str, out: str) -> None:
    sys.path.insert(0, os.getcwd())  # the checkout, for REPLAY_IMPORTS
    for module in filter(None, os.environ.get("REPLAY_IMPORTS", "").split(",")):
        importlib.import_module(module)  # the application's own workflow-side changes (tests/agents/deploys.py)
    failures = asyncio.run(replay(json.loads(Path(path).read_text())))
    Path(out).write_text(json.dumps(failures))  # not stdout: the SDK's core logs its warnings there


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    # The old build predates rein.temporal.connection.free_core_at_exit: left to interpreter teardown,
    # temporalio's core may abort a process that has done its work (sdk-python#300; CI saw it once).
    os._exit(0)

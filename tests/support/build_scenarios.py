"""The three runs the support window names, recorded by a landed build's own worker (docs/deploys.md).

    python -m tests.support.build_scenarios <short sha>    # into tests/histories/builds/<sha>/

A dev server, that build's `python worker.py` (unversioned) serving tests/agents/upgrades.py, and three runs:
- `waited`: waits for approval;
- `in_model_call`: in its final model call (the model holds it until released);
- `continued`: waits for approval and continues as new on the signals it is sent meanwhile
  (`continued` is the run that continued, `continued_next` its successor, still waiting).
Each open history is stored as it was when its worker would be stopped for an upgrade; then the same build
finishes them (`*_done`: approved, released), so the current build also replays that build's endings.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus

from rein.client import connect
from rein.temporal.dev_server import start_dev_server
from tests.support.old_build import BUILD_HISTORIES, OldWorkerProcess, unpack_old_build, unversioned
from tests.support.waiting import poll

AGENTS = ["tests.agents.upgrades:pay_ask", "tests.agents.upgrades:pay_held"]
CONTINUE_AFTER = 20
"""The smallest `continue_as_new_after` every build accepts: a waiting run continues after 20 signals."""
MISFIT = {"tool_call_id": "no-such-call"}
"""An approval that fits no pending call: ignored, and counted toward continue-as-new."""


async def status(client: Client, run_id: str) -> str:
    return (await client.get_workflow_handle(run_id).query("status"))["status"]


async def start_scenarios(client: Client, queue: str) -> dict[str, str]:
    """The three runs, started: scenario -> workflow id (also the first word of its prompt)."""
    runs = {}
    for n, (scenario, agent, extra) in enumerate([
        ("waited", "upgrade-ask", {}),
        ("in_model_call", "upgrade-held", {}),
        ("continued", "upgrade-ask", {"continue_as_new_after": CONTINUE_AFTER}),
    ]):
        run_id = f"{scenario}-{uuid.uuid4().hex[:8]}"
        await client.start_workflow("AgentWorkflow", {"agent": agent, "prompt": f"{run_id} {100 + n}", **extra},
                                    id=run_id, task_queue=queue)
        runs[scenario] = run_id
    return runs


async def bring_to_the_upgrade_point(client: Client, runs: dict[str, str], deploy_dir: Path) -> str:
    """Each run where an upgrade would find it; the id of the run `continued` continued from."""
    await poll(lambda: (deploy_dir / f"{runs['in_model_call']}.held").exists(), "the held model call", 120)
    for scenario in ("waited", "continued"):
        await poll(lambda s=scenario: _is(client, runs[s], "waiting_approval"), f"{scenario} to wait", 120, 0.1)
    handle = client.get_workflow_handle(runs["continued"])
    first = (await handle.describe()).run_id
    for _ in range(CONTINUE_AFTER):
        await handle.signal("approve", MISFIT)

    async def continued_and_waits() -> bool:
        latest = await handle.describe()
        return latest.run_id != first and await _is(client, runs["continued"], "waiting_approval")

    await poll(continued_and_waits, "the run to continue as new and wait again", 120, 0.1)
    assert first is not None
    return first


async def _is(client: Client, run_id: str, expected: str) -> bool:
    return await status(client, run_id) == expected


async def history(client: Client, run_id: str, run: str | None = None) -> dict[str, Any]:
    return (await client.get_workflow_handle(run_id, run_id=run).fetch_history()).to_json_dict()


async def record(commit: str, target: Path) -> list[Path]:
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="rein-scenarios-") as tmp:
        root = Path(tmp)
        old = unpack_old_build(root / "old", commit)
        server = start_dev_server(log_path=root / "server.log")
        worker = OldWorkerProcess(old, server.address, AGENTS, f"scenarios-{commit}", root / "worker.log",
                                  DEPLOY_DIR=tmp, DEPLOY_BUILD=commit, **unversioned(commit))
        try:
            worker.start()
            client = await connect(server.address)
            runs = await start_scenarios(client, f"scenarios-{commit}")
            first = await bring_to_the_upgrade_point(client, runs, root)
            stored = {
                "waited": await history(client, runs["waited"]),
                "in_model_call": await history(client, runs["in_model_call"]),
                "continued": await history(client, runs["continued"], first),
                "continued_next": await history(client, runs["continued"]),
            }
            for scenario in ("waited", "continued"):
                await client.get_workflow_handle(runs[scenario]).signal("approve", {})
            (root / f"{runs['in_model_call']}.release").touch()
            for scenario, run_id in runs.items():
                handle = client.get_workflow_handle(run_id)
                await asyncio.wait_for(handle.result(), 120)
                assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
                stored[f"{scenario}_done"] = await history(client, run_id)
        finally:
            worker.stop()
            server.stop()
    target.mkdir(parents=True, exist_ok=True)
    for name, data in stored.items():
        path = target / f"{name}.json"
        path.write_text(json.dumps(data, indent=1) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    sha = sys.argv[1]
    for path in asyncio.run(record(sha, BUILD_HISTORIES / sha)):
        print(path)

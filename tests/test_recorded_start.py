"""A run records how it started (the patch rein-recorded-start) and a replay reads that back, not its build id.

Before it, a build id of your own of 32 hex characters (REIN_BUILD_ID) was taken for temporalio's default, which
meant an earlier build that described every run first: a new run of such a build asked its agent first. The table
of earlier builds' ids (rein.workflows.window) is read only for runs without the marker (tests/test_build_histories).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from temporalio.worker import Replayer

import rein
from rein.temporal import ReinPlugin
from rein.temporal.deployment import current_build_id, describe
from rein.workflows import AgentWorkflow
from tests.support.providers import CallThenReport
from tests.support.tools import add
from tests.support.waiting import poll

HEX_BUILD = "0123456789abcdef0123456789abcdef"


async def test_a_run_of_a_32_hex_build_id_records_its_lean_start_and_replays(dev):
    suffix = uuid.uuid4().hex[:8]
    queue, deployment = f"recorded-{suffix}", f"recorded-{suffix}"
    agent = rein.Agent(provider=CallThenReport("add", {"a": 1, "b": 2}), tools=[add], name=f"recorded-{suffix}")
    async with rein.create_worker(dev.client, [agent], task_queue=queue, deployment=deployment, build_id=HEX_BUILD):
        await poll(lambda: _current(dev.client, deployment), "the build to make itself current", timeout=60)
        handle = await dev.client.start_workflow("AgentWorkflow", {"agent": agent.name, "prompt": "1 + 2?"},
                                                 id=f"recorded-{suffix}", task_queue=queue)
        assert (await handle.result())["status"] == "done"
    history = await handle.fetch_history()
    completed = [e.workflow_task_completed_event_attributes for e in history.events if e.HasField(
        "workflow_task_completed_event_attributes")]
    assert completed[0].deployment_version.build_id == HEX_BUILD
    assert _patch_ids(history)[:1] == ["rein-recorded-start"]
    markers = [e.marker_recorded_event_attributes.marker_name for e in history.events
               if e.HasField("marker_recorded_event_attributes")]
    assert "core_local_activity" not in markers  # lean: no describe_agent first, whatever the build id looks like
    result = await Replayer(workflows=[AgentWorkflow], plugins=[ReinPlugin(agents=[])]).replay_workflow(
        history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


async def _current(client, deployment: str) -> bool:  # noqa: ANN001
    return current_build_id(await describe(client, deployment)) == HEX_BUILD


def _patch_ids(history: Any) -> list[str]:
    return [json.loads(p.data)["id"] for e in history.events if e.HasField("marker_recorded_event_attributes")
            and e.marker_recorded_event_attributes.marker_name == "core_patch"
            for p in e.marker_recorded_event_attributes.details["patch-data"].payloads]

"""Histories recorded by landed builds replay on this one (tests/histories/builds/<short sha>/).

Each folder holds what that build's own tests/histories/make_histories.py recorded (approval,
ask_human, cancel, an unknown agent, middleware and compaction, a long tool loop): runs in flight
when it was deployed look like these. Store the next landed build's with

    .venv/bin/python -m tests.support.old_build <short sha>

tests/test_compat.py runs the previous build beside this one; this is the fast half (no server).
"""

from __future__ import annotations

import json

import pytest
from rein.workflows import AgentWorkflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from rein.temporal import ReinPlugin
from tests.support.old_build import BUILD_HISTORIES, OLD_BUILD

RECORDED = sorted(BUILD_HISTORIES.glob("*/*.json"))
SCENARIOS = {"approval", "cancel", "cancel_signal", "changed", "extensions", "failed", "long"}


def test_the_previous_build_recorded_every_scenario():
    """Named as its make_histories.py wrote them, without `agent_` (approval_v8: the approval run started lean)."""
    recorded = {p.stem for p in RECORDED if p.parent.name == OLD_BUILD}
    assert {stem.rsplit("_v", 1)[0] for stem in recorded} == SCENARIOS
    assert {"approval_v7", "approval_v8"} <= recorded


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.name}-{p.stem}")
async def test_a_landed_build_history_replays(path):
    history = WorkflowHistory.from_json(f"{path.parent.name}-{path.stem}", json.loads(path.read_text()))
    assert EventType.Name(history.events[-1].event_type).startswith("EVENT_TYPE_WORKFLOW_EXECUTION_")  # closed
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[ReinPlugin(agents=[])])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure

"""Histories recorded by landed builds replay on this one (tests/histories/builds/<short sha>/).

Each folder holds what that build's own tests/histories/make_histories.py recorded (approval,
ask_human, cancel, an unknown agent, middleware and compaction, a long tool loop): runs in flight
when it was deployed look like these. Store the next landed build's with

    .venv/bin/python -m tests.support.old_build <short sha>

tests/test_compat.py runs the previous build beside this one; this is the fast half (no server).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from rein.temporal import ReinPlugin
from rein.workflows import AgentWorkflow
from tests.support.old_build import BUILD_HISTORIES, OLD_BUILD
from tests.support.processes import ROOT

RECORDED = sorted(BUILD_HISTORIES.glob("*/*.json"))
SCENARIOS = {"approval", "cancel", "cancel_signal", "changed", "extensions", "failed", "long"}
DRAINED = ROOT / "tests" / "histories" / "drained"
"""This repo's own recordings of earlier command sequences that this build no longer replays."""


def drains(path: Path) -> str | None:
    """Why this build does not replay a stored history (its runs finish on the build that started them:
    docs/deploys.md, "One way to version"), or None when it replays it."""
    build, name = path.parent.name, path.stem
    if path.parent == DRAINED:
        return "an earlier generation of this repo's own histories (tests/histories/make_histories.py)"
    if build in ("f732bd2", "8846014"):
        return "started before lean starts: asked its agent first with no marker"
    if build == "4c3b4a4" and name != "approval_v8":
        return "asked its agent first with no marker, or recorded describe-result flags since retired"
    if build == OLD_BUILD and name in ("approval_v7", "extensions_v1"):
        return "asked its agent first (REIN_LEAN_START=0, or an agent with middleware) with no marker"
    return None


def test_the_previous_build_recorded_every_scenario():
    """Named as its make_histories.py wrote them, without `agent_` (approval_v8: the approval run started lean)."""
    recorded = {p.stem for p in RECORDED if p.parent.name == OLD_BUILD}
    assert {stem.rsplit("_v", 1)[0] for stem in recorded} == SCENARIOS
    assert {"approval_v7", "approval_v8"} <= recorded


def test_most_of_the_previous_build_replays():
    """What the previous build recorded by default (a lean start, on plain agents) replays here."""
    replaying = {p.stem for p in RECORDED if p.parent.name == OLD_BUILD and drains(p) is None}
    assert replaying == {"approval_v8", "cancel_v4", "cancel_signal_v1", "changed_v1", "failed_v1", "long_v3"}


async def _replay(path: Path) -> str | None:
    history = WorkflowHistory.from_json(f"{path.parent.name}-{path.stem}", json.loads(path.read_text()))
    assert EventType.Name(history.events[-1].event_type).startswith("EVENT_TYPE_WORKFLOW_EXECUTION_")  # closed
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[ReinPlugin(agents=[])])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return None if result.replay_failure is None else str(result.replay_failure)


@pytest.mark.parametrize("path", [p for p in RECORDED if drains(p) is None], ids=lambda p: f"{p.parent.name}-{p.stem}")
async def test_a_landed_build_history_replays(path):
    assert await _replay(path) is None


@pytest.mark.parametrize("path", [p for p in [*RECORDED, *sorted(DRAINED.glob("*.json"))] if drains(p) is not None],
                         ids=lambda p: f"{p.parent.name}-{p.stem}")
async def test_a_drained_history_fails_as_documented(path):
    """Exactly the histories `drains` names do not replay, each with a nondeterminism error (a run that waits
    for its own build), not a crash: docs/deploys.md tells operators to let such runs finish there."""
    failure = await _replay(path)
    assert failure is not None and "Nondeterminism" in failure, failure

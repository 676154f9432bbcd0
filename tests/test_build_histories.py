"""Histories recorded by landed builds replay on this one (tests/histories/builds/<short sha>/): the support window.

Each folder holds what that build's own tests/histories/make_histories.py recorded (approval, ask_human,
cancel, an unknown agent, middleware and compaction, a long tool loop) and, for the builds in the support
window (rein.workflows.window, docs/deploys.md), the three runs the window names, recorded by that build's
own worker (tests/support/build_scenarios.py): one that waited, one in a model call, one that continued as
new (open, as an upgrade finds them, and finished by that build). Store the next landed build's with

    .venv/bin/python -m tests.support.old_build <short sha>
    .venv/bin/python -m tests.support.build_scenarios <short sha>

tests/test_upgrades.py carries such runs on with real processes; this is the fast half (no server).
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from rein.temporal import ReinPlugin
from rein.workflows import AgentWorkflow
from rein.workflows.window import OLDEST_BUILD, OLDEST_BUILD_AT, SUPPORT_DAYS, OutsideWindow, Start, start_of
from tests.support.old_build import BUILD_HISTORIES, OLD_BUILD
from tests.support.processes import ROOT

RECORDED = sorted(BUILD_HISTORIES.glob("*/*.json"))
SCENARIOS = {"approval", "cancel", "cancel_signal", "changed", "extensions", "failed", "long"}
WINDOW = ("f732bd2", "27084f6", "81ba243")
"""The builds that ended a turn of work in the last SUPPORT_DAYS days (and this one)."""
WINDOW_SCENARIOS = {"waited", "waited_done", "in_model_call", "in_model_call_done", "continued", "continued_next",
                    "continued_done"}
DRAINED = ROOT / "tests" / "histories" / "drained"
"""This repo's own recordings of earlier command sequences that this build no longer replays."""
OUTSIDE = "older than this build's support window"


def drains(path: Path) -> str | None:
    """Why this build does not replay a stored history, or None when it replays it."""
    build, name = path.parent.name, path.stem
    if path.parent == DRAINED:
        started = datetime.fromisoformat(json.loads(path.read_text())["events"][0]["eventTime"][:19]).replace(tzinfo=UTC)
        if started < OLDEST_BUILD_AT:
            return OUTSIDE
        return "a commit between two landings (f732bd2 and 39e2702) that described the waiting timer in a flag"
    if build == "4c3b4a4" and name != "approval_v8":
        return "a commit between two landings that recorded its start as a private SDK flag, asked first by default"
    if build == "27084f6" and name in ("approval_v7", "extensions_v1"):
        return "asked its agent first (REIN_LEAN_START=0, or an agent with middleware) under a private SDK flag"
    return None


def test_each_build_in_the_window_recorded_its_scenarios():
    """A run that waited, one in a model call and one that continued as new, by each build's own worker."""
    for build in WINDOW:
        assert {p.stem for p in RECORDED if p.parent.name == build} >= WINDOW_SCENARIOS, build


def test_the_previous_build_recorded_every_scenario():
    """Named as its make_histories.py wrote them, without `agent_` (approval_v8: the approval run started lean)."""
    recorded = {p.stem for p in RECORDED if p.parent.name == OLD_BUILD} - WINDOW_SCENARIOS
    assert {stem.rsplit("_v", 1)[0] for stem in recorded} == SCENARIOS


def test_every_history_of_the_window_replays_but_runs_started_by_a_private_flag():
    """Of the builds in the window only 27084f6's runs that asked first without the default (a worker told
    REIN_LEAN_START=0, an agent with middleware) do not: it recorded that as a private SDK flag."""
    drained = {f"{p.parent.name}/{p.stem}" for p in RECORDED if p.parent.name in WINDOW and drains(p)}
    assert drained == {"27084f6/approval_v7", "27084f6/extensions_v1"}


async def _replay(path: Path) -> str | None:
    history = WorkflowHistory.from_json(f"{path.parent.name}-{path.stem}", json.loads(path.read_text()))
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[ReinPlugin(agents=[])])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return None if result.replay_failure is None else str(result.replay_failure)


@pytest.mark.parametrize("path", [p for p in RECORDED if drains(p) is None], ids=lambda p: f"{p.parent.name}-{p.stem}")
async def test_a_landed_build_history_replays(path):
    assert await _replay(path) is None


@pytest.mark.parametrize("path", [p for p in [*RECORDED, *sorted(DRAINED.glob("*.json"))] if drains(p) is not None],
                         ids=lambda p: f"{p.parent.name}-{p.stem}")
async def test_a_drained_history_fails_as_documented(path):
    """Exactly the histories `drains` names do not replay: one older than the window with the one line that says
    which build it needs (not a nondeterminism error); the others with a nondeterminism error (docs/deploys.md)."""
    failure = await _replay(path)
    assert failure is not None
    if drains(path) == OUTSIDE:
        build = next(e["workflowTaskCompletedEventAttributes"]["workerVersion"]["buildId"]
                     for e in json.loads(path.read_text())["events"] if "workflowTaskCompletedEventAttributes" in e)
        assert f"{OUTSIDE} of {SUPPORT_DAYS} days" in failure and f"by rein build {build}" in failure, failure
        assert "Nondeterminism" not in failure
    else:
        assert "Nondeterminism" in failure, failure


# --------------------------------------------------------------------------- which build started a run


def first_build_id(path: Path) -> str:
    return next(e["workflowTaskCompletedEventAttributes"]["workerVersion"]["buildId"]
                for e in json.loads(path.read_text())["events"] if "workflowTaskCompletedEventAttributes" in e)


def test_a_default_build_id_names_how_its_commit_started_runs():
    """The table in rein.workflows.window against the commits' own code: each stored history of a build that
    reported rein's default build id is classified as that commit's start.py started runs."""
    from tests.support.build_ids import era

    expected = {"asked": Start.ASKED, "marked": Start.MARKED, "flagged": Start.LEAN, "lean": Start.LEAN}
    checked = set()
    for path in RECORDED:
        build_id = first_build_id(path)
        if build_id.startswith("rein-") and path.parent.name not in checked:
            assert start_of(build_id, datetime.now(UTC)) is expected[era(path.parent.name)], path
            checked.add(path.parent.name)
    assert checked >= {"8846014", "27084f6", "81ba243"}


def test_temporalios_default_build_id_is_f732bd2s_or_outside_the_window():
    md5 = "cc0c9d34fff911bd8064cf5ab996f4c5"
    assert start_of(md5, OLDEST_BUILD_AT) is Start.ASKED
    with pytest.raises(OutsideWindow) as outside:
        start_of(md5, OLDEST_BUILD_AT - timedelta(seconds=1))
    assert str(outside.value).startswith("this run was started on 2026-11-30 18:51 UTC by rein build " + md5)
    assert f"(a build from before {OLDEST_BUILD})" in str(outside.value) and "\n" not in str(outside.value)


def test_any_other_build_id_starts_lean_asking_nothing():
    for build_id in ("", "rein-000000000000", "v2.3.1", "cc0c9d34fff911bd8064cf5ab996f4c"):
        assert start_of(build_id, OLDEST_BUILD_AT - timedelta(days=400)) is Start.LEAN


def test_the_table_covers_only_builds_before_runs_recorded_their_start():
    """Since rein-recorded-start every run records how it started: the table of earlier builds never grows."""
    from rein.workflows.window import ASKED_BUILDS, MARKED_BUILDS

    assert (len(ASKED_BUILDS), len(MARKED_BUILDS)) == (10, 39)


def test_this_build_is_not_in_the_table():
    """This build's own default build id starts lean: its runs record no marker for how they started."""
    from rein.temporal.deployment import default_build_id

    assert start_of(default_build_id(), datetime.now(UTC)) is Start.LEAN


def test_the_window_is_as_long_as_the_docs_say():
    text = (ROOT / "docs" / "deploys.md").read_text()
    assert f"{SUPPORT_DAYS} days" in text and OLDEST_BUILD in text
    head = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%cI", OLDEST_BUILD], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert datetime.fromisoformat(head) == OLDEST_BUILD_AT

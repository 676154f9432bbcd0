"""Which deployment version a rein worker is (REIN_DEPLOYMENT, REIN_BUILD_ID, the default build id)."""

from __future__ import annotations

import pytest
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

from rein.temporal import deployment
from rein.temporal.deployment import (
    DEFAULT_DEPLOYMENT,
    default_build_id,
    deployment_config,
    versioning_behavior,
    with_default_behavior,
    worker_version,
)


def test_versioning_is_off_without_a_deployment_name(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("REIN_DEPLOYMENT", raising=False)
    monkeypatch.delenv("REIN_BUILD_ID", raising=False)
    assert worker_version() is None
    with pytest.raises(ValueError, match="needs a deployment name"):
        worker_version(build_id="b1")


def test_environment_and_arguments(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("REIN_DEPLOYMENT", "pay")
    monkeypatch.setenv("REIN_BUILD_ID", "b7")
    assert worker_version() == WorkerDeploymentVersion("pay", "b7")
    assert worker_version("other", "b8") == WorkerDeploymentVersion("other", "b8")
    monkeypatch.delenv("REIN_BUILD_ID")
    assert worker_version() == WorkerDeploymentVersion("pay", default_build_id())
    with pytest.raises(ValueError, match="may not contain"):
        worker_version("a.b")


def test_default_build_id_follows_the_workflow_code(monkeypatch: pytest.MonkeyPatch, tmp_path):
    first = default_build_id()
    assert first == default_build_id() and first.startswith("rein-")
    changed = tmp_path / "loop.py"
    changed.write_text("# another build\n")
    files = deployment._source_files(deployment.BUILD_SOURCES)
    assert any(p.name == "loop.py" for p in files) and any(p.parent.name == "activities" for p in files)
    monkeypatch.setattr(deployment, "_source_files", lambda modules: files | {changed})
    assert default_build_id() != first


def test_rein_runs_auto_upgrade_unless_the_worker_says_pinned(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("REIN_VERSIONING", raising=False)
    version = WorkerDeploymentVersion("pay", "b1")
    assert versioning_behavior() == VersioningBehavior.AUTO_UPGRADE
    assert deployment_config(version, versioning_behavior()).default_versioning_behavior == VersioningBehavior.AUTO_UPGRADE
    monkeypatch.setenv("REIN_VERSIONING", "pinned")
    assert deployment_config(version, versioning_behavior()).default_versioning_behavior == VersioningBehavior.PINNED
    assert versioning_behavior("auto_upgrade") == VersioningBehavior.AUTO_UPGRADE
    with pytest.raises(ValueError, match="REIN_VERSIONING='sticky': expected one of auto-upgrade, pinned"):
        versioning_behavior("sticky")
    own = WorkerDeploymentConfig(version=version, use_worker_versioning=True)
    assert with_default_behavior(own).default_versioning_behavior == VersioningBehavior.AUTO_UPGRADE
    pinned = WorkerDeploymentConfig(version, True, VersioningBehavior.PINNED)
    assert with_default_behavior(pinned) is pinned


def test_the_application_is_the_deployment_whatever_the_queue(monkeypatch: pytest.MonkeyPatch):
    """`rein worker` on a model queue or the shared queue, and the engine: one deployment, `rein` unless named."""
    monkeypatch.delenv("REIN_DEPLOYMENT", raising=False)
    monkeypatch.delenv("REIN_BUILD_ID", raising=False)
    assert worker_version(default=DEFAULT_DEPLOYMENT) == WorkerDeploymentVersion("rein", default_build_id())
    monkeypatch.setenv("REIN_DEPLOYMENT", "pay")
    assert worker_version(default=DEFAULT_DEPLOYMENT).deployment_name == "pay"
    monkeypatch.setenv("REIN_DEPLOYMENT", "none")
    assert worker_version(default=DEFAULT_DEPLOYMENT) is None


def test_each_build_with_runs_waiting_and_no_worker_gets_its_line():
    """The lines `rein deployment status` and `rein list --stuck` print (rein.ops.routing): the current build's runs
    are moved by a rollback; a pinned build's by its workers or update-options; a build the server lists no
    poller of says so rather than a time."""
    from datetime import UTC, datetime

    from rein.ops.routing import DeploymentState, VersionState

    polled = datetime(2026, 12, 7, 10, 2, 11, tzinfo=UTC)
    state = DeploymentState("pay", "b", None, 0.0, None, [
        VersionState("b", "current", last_poll=polled, waiting=3),
        VersionState("a", "draining", last_poll=None, waiting=2, last_current=polled),
        VersionState("c", "inactive", last_poll=polled, polling=True, waiting=1)])
    assert state.outages() == [
        "deployment pay: the current build b has had no worker since 2026-12-07 10:02:11 UTC: its 3 open runs wait "
        "(nothing changes by itself); start its workers again, or `rein deployment rollback` moves them to a",
        "deployment pay: build a has had no worker listed (the server forgets a stopped one at once): 2 runs pinned to "
        "it wait; start a worker of it (REIN_DEPLOYMENT=pay REIN_BUILD_ID=a), or let them follow the current build: "
        "temporal workflow update-options --query 'TemporalWorkerDeploymentVersion=\"pay:a\"' "
        "--versioning-override-behavior auto_upgrade"]
    assert state.to_json()["open_runs"] == 3 and state.refusals() == []


def test_a_check_blocks_on_runs_that_can_go_on_where_they_are_and_names_them():
    """What keeps a build out (rein.temporal.promotion.Check): runs it cannot replay that go on where they are. A
    stuck run, one older than the support window and one an earlier rein pinned are left, never blocking."""
    from rein.temporal.promotion import Check, ReplayFailure, RunRef

    nondeterminism = 'Nondeterminism error: [TMPRL1100] Local activity marker was unexpectedly found", source: x'
    runs = [RunRef(f"r{i}", "x", "a") for i in range(6)] + [RunRef("stuck", "x", "a", stuck=True),
                                                           RunRef("old", "x"), RunRef("pinned", "x", "p", pinned=True)]
    check = Check(runs, len(runs), [ReplayFailure(r, nondeterminism) for r in runs[:5] + runs[6:7] + runs[8:]]
                  + [ReplayFailure(runs[7], "this run was started ... older than this build's support window of 30 days")])
    assert [f.run.workflow_id for f in check.left] == ["stuck", "pinned", "old"]
    assert check.refusal(300) == (
        "it cannot replay 5 of the 9 runs that would move to it: run r0 (nondeterminism: [TMPRL1100] Local activity "
        "marker was unexpectedly found), also r1, r2, r3 and 1 more; see it with `rein replay --query "
        "'WorkflowId=\"r0\"'`")
    assert Check(runs, 8).refusal(300) == ("it replayed 8 of the 9 runs that would move to it within 300 s "
                                          "(REIN_PROMOTE_TIMEOUT_S)")
    assert Check(runs, 9, check.left).refusal(300) is None

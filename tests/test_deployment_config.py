"""Which deployment version a rein worker is (REIN_DEPLOYMENT, REIN_BUILD_ID, the default build id)."""

from __future__ import annotations

import pytest
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

from rein.temporal import deployment
from rein.temporal.deployment import default_build_id, deployment_config, with_default_behavior, worker_version


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


def test_rein_runs_are_pinned_unless_the_worker_says_otherwise():
    version = WorkerDeploymentVersion("pay", "b1")
    assert deployment_config(version).default_versioning_behavior == VersioningBehavior.PINNED
    own = WorkerDeploymentConfig(version=version, use_worker_versioning=True)
    assert with_default_behavior(own).default_versioning_behavior == VersioningBehavior.PINNED
    auto = WorkerDeploymentConfig(version, True, VersioningBehavior.AUTO_UPGRADE)
    assert with_default_behavior(auto) is auto

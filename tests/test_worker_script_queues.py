"""`python worker.py` polls the queues its docstring says (issue 34): each agent's own queue
`rein.<agent>` and the shared queue, versioned by default as the deployment named after it; one given a deployment name of its
own only its agents' own queues
unless given a queue (--task-queue or REIN_TASK_QUEUE). Real worker processes on a dev server; the
queues are read from the worker's serving line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.processes import ROOT, WorkerProcess


@pytest.fixture
def server(private_server):
    return private_server


def _serving_queues(log: Path) -> str:
    line = next(line for line in log.read_text().splitlines() if "serving:" in line)
    return line.split(" queues ", 1)[1].split(", version ", 1)[0]


def test_worker_script_polls_the_queues_its_docstring_names(server, tmp_path: Path) -> None:
    doc = " ".join((ast.get_docstring(ast.parse((ROOT / "worker.py").read_text())) or "").split())
    assert "as one version of the application's Worker Versioning deployment (`rein`)" in doc
    assert "Given a deployment name of its own (--deployment / REIN_DEPLOYMENT) it polls only its agents' own" in doc
    assert "`--deployment none` turns versioning off" in doc

    cases = {
        "default": ({}, "rein, rein.mycalc"),
        "unversioned": ({"REIN_DEPLOYMENT": "none"}, "rein, rein.mycalc"),
        "versioned": ({"REIN_DEPLOYMENT": "pay", "REIN_BUILD_ID": "v1"}, "rein.mycalc"),
        "versioned, given a queue": ({"REIN_DEPLOYMENT": "pay", "REIN_BUILD_ID": "v1", "REIN_TASK_QUEUE": "team-q"},
                                     "team-q, rein.mycalc"),
    }
    seen = {}
    for name, (env, _) in cases.items():
        worker = WorkerProcess(server.address, ["tests.agents.queues:mycalc"], "unused", tmp_path / f"{name}.log")
        del worker.args[2:4]  # `python worker.py --agent ...` with no --task-queue
        worker.env.update(env)
        try:
            worker.start()
        finally:
            worker.stop()
        seen[name] = _serving_queues(worker.log)
    assert seen == {name: queues for name, (_, queues) in cases.items()}
    assert ", version rein.rein-" in (tmp_path / "default.log").read_text()  # the application's deployment
    assert ", version unversioned," in (tmp_path / "unversioned.log").read_text()

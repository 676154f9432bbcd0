"""The previous landed rein build, taken from git, run beside this one (tests/test_compat.py).

No network: `git archive <commit>` of the checkout's own history, unpacked into a folder laid out
like the old build's installed package (its pyproject maps the top-level `workflows/` and
`activities/` folders to `rein.workflows` / `rein.activities`, so they move under `rein/`). A
process started with that folder first on its path imports the old rein; the agents' modules
(`tests.agents...`, the user's application) still come from this checkout, as in a real deploy
where only rein changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.processes import ROOT, WorkerProcess

OLD_BUILD = "27084f6"
"""The previous landed build: the one a deploy of this build upgrades from or rolls back to."""
OLDER_BUILD = "4c3b4a4"
"""A landed build from before lean starts were the default (rein.workflows.start): a queue that still has
one of its workers when this build starts runs (tests/test_compat.py, mixed builds)."""

REPLAY_SCRIPT = Path(__file__).with_name("replay_check.py")


BUILD_HISTORIES = ROOT / "tests" / "histories" / "builds"
"""One folder per landed build (its short sha): the histories its own make_histories.py recorded."""


def unpack_old_build(dest: Path, commit: str = OLD_BUILD) -> Path:
    """`dest` with the old build's rein package (and its worker.py); fails clearly without git history."""
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                           capture_output=True, text=True, check=False)
    if found.returncode != 0:
        raise AssertionError(
            f"the old rein build {commit} is not in this checkout's git history ({found.stderr.strip()}); "
            "the compatibility tests need a full clone (git fetch --unshallow)")
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "rein", "workflows", "activities",
                              "worker.py"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    for folder in ("workflows", "activities"):  # the old pyproject's package-dir
        (dest / folder).rename(dest / "rein" / folder)
    (dest / REPLAY_SCRIPT.name).write_bytes(REPLAY_SCRIPT.read_bytes())
    return dest


def old_env(old: Path) -> dict[str, str]:
    """The environment of a process that runs the old build (its script's folder comes first)."""
    env = {k: v for k, v in os.environ.items() if k not in ("REIN_TASK_QUEUE", "TEMPORAL_NAMESPACE",
                                                              "REIN_DEPLOYMENT", "REIN_BUILD_ID")}
    env["PYTHONPATH"] = os.pathsep.join([str(old), str(ROOT)])
    return env


class OldWorkerProcess(WorkerProcess):
    """The old build's own `python worker.py --agent ... --task-queue Q` (its flags then)."""

    def __init__(self, old: Path, address: str, agents: list[str], task_queue: str, log: Path, **env: str):
        super().__init__(address, agents, task_queue, log, **env)
        self.args[1] = str(old / "worker.py")
        self.env["PYTHONPATH"] = old_env(old)["PYTHONPATH"]
        for name in ("REIN_DEPLOYMENT", "REIN_BUILD_ID"):
            if name not in env:  # this process's own, not the old build's
                self.env.pop(name, None)


def unversioned(commit: str) -> dict[str, str]:
    """The environment that runs a landed build's `worker.py` without Worker Versioning: builds from the one
    that made workers versioned by default know `REIN_DEPLOYMENT=none`; earlier ones are unversioned unless given
    a deployment name (to them "none" is one)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:rein/temporal/deployment.py"],
                            capture_output=True, text=True, check=False).stdout
    return {"REIN_DEPLOYMENT": "none"} if "VERSIONING_OFF" in source else {}


def rein_file(old: Path | None) -> str:
    """Where `import rein` resolves in a process of that build (None: this build)."""
    env = old_env(old) if old is not None else {k: v for k, v in os.environ.items()}
    where = "import importlib.util as u; print(u.find_spec('rein.workflows').origin)"
    proc = subprocess.run([sys.executable, "-c", where], cwd=str(old or ROOT), env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return proc.stdout.strip()


def replay_in_build(old: Path | None, histories: dict[str, dict], imports: tuple[str, ...] = ()) -> dict[str, str | None]:
    """Replay JSON histories (workflow id -> history) in a fresh process of the old build (None: of this
    build), after importing `imports`: workflow id -> failure or None. A fresh process: the sandbox of one
    that imported much is slow."""
    work = old or Path(tempfile.mkdtemp(prefix="rein-replay-"))
    path, out = work / "histories-to-replay.json", work / "replay-failures.json"
    path.write_text(json.dumps(histories))
    script = old / REPLAY_SCRIPT.name if old is not None else REPLAY_SCRIPT
    env = {**(old_env(old) if old is not None else os.environ), "REPLAY_IMPORTS": ",".join(imports)}
    proc = subprocess.run([sys.executable, str(script), str(path), str(out)], cwd=str(old or ROOT),
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def record_build_histories(commit: str = OLD_BUILD) -> Path:
    """Run a landed build's own make_histories.py and keep what it wrote in tests/histories/builds/<commit>/."""
    target = BUILD_HISTORIES / commit
    with tempfile.TemporaryDirectory(prefix="rein-build-") as tmp:
        old = unpack_old_build(Path(tmp) / "old", commit)
        recorder = Path(tmp) / "recorder"
        recorder.mkdir()
        script = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:tests/histories/make_histories.py"],
                                capture_output=True, check=True)
        (recorder / "make_histories.py").write_bytes(script.stdout)
        subprocess.run([sys.executable, str(recorder / "make_histories.py")], cwd=str(recorder),
                       env={**old_env(old), "REIN_HOME": tmp}, check=True, timeout=600)
        target.mkdir(parents=True, exist_ok=True)
        for path in recorder.glob("agent_*.json"):  # agent_cancel_signal_v1.json -> cancel_signal_v1.json
            (target / path.name.removeprefix("agent_")).write_bytes(path.read_bytes())
    return target


if __name__ == "__main__":  # python -m tests.support.old_build [COMMIT]: store a landed build's histories
    print(record_build_histories(*sys.argv[1:2]))

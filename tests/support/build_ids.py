"""The default build ids (rein.temporal.deployment.default_build_id) landed commits report, for the table in
rein.workflows.lineage: how each build's runs started, read back from the build id in their history.

    python -m tests.support.build_ids 39e2702 main     # prints the table's entries

The digest covers the files of rein's workflow-side modules in the order their paths sort, so a commit has
two: installed as a wheel (rein/workflows/...) and as an editable checkout (workflows/... beside rein/, how
this repository's own histories were recorded). Each is computed by that commit's own default_build_id in a
fresh process that imports the commit's tree laid out that way.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.old_build import unpack_old_build
from tests.support.processes import ROOT

EDITABLE = '''
import importlib.util, sys
from importlib.machinery import PathFinder
from pathlib import Path
ROOT = Path(sys.argv[1])
MAPPING = {"rein": ROOT / "rein", "rein.workflows": ROOT / "workflows", "rein.activities": ROOT / "activities"}
class Finder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname in MAPPING:
            return importlib.util.spec_from_file_location(fullname, MAPPING[fullname] / "__init__.py")
        parent, _, _ = fullname.rpartition(".")
        if parent in MAPPING:
            return PathFinder.find_spec(fullname, path=[str(MAPPING[parent])])
        return None
sys.meta_path.insert(0, Finder)
'''
DIGEST = "from rein.temporal.deployment import default_build_id; print(default_build_id())"


def era(commit: str) -> str:
    """How the commit's new conversations start: `asked` (describe first, no marker), `flagged` (lean or
    not, as a private SDK flag), `marked` (asked first records rein-described-first) or `lean` (always)."""
    start = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:workflows/start.py"], capture_output=True,
                           text=True, check=False).stdout
    if not start:
        return "asked"
    if "logic_flag(" in start:
        return "flagged"
    if "workflow.patched(PATCH_DESCRIBED_FIRST)" in start:
        return "marked"
    return "lean"


def digests(commit: str) -> tuple[str, str]:
    """(wheel layout, editable layout) default build ids of `commit`."""
    with tempfile.TemporaryDirectory(prefix="rein-digest-") as tmp:
        wheel = unpack_old_build(Path(tmp) / "wheel", commit)
        editable = Path(tmp) / "editable"
        editable.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "rein", "workflows", "activities"],
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(editable)], input=archive.stdout, check=True)
        return (_run(["-c", DIGEST], wheel, {"PYTHONPATH": str(wheel)}),
                _run(["-c", EDITABLE + DIGEST, str(editable)], editable, {}))


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    import os

    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | env
    proc = subprocess.run([sys.executable, *args], cwd=str(cwd), env=environ, capture_output=True, text=True,
                          check=True, timeout=120)
    return proc.stdout.strip().splitlines()[-1]


def main(since: str, until: str) -> None:
    commits = subprocess.run(["git", "-C", str(ROOT), "rev-list", "--reverse", f"{since}^..{until}"],
                             capture_output=True, text=True, check=True).stdout.split()
    for commit in commits:
        kind = era(commit)
        if kind in ("asked", "marked"):  # the eras the table names (a flagged era's run is taken as lean)
            for digest in sorted(set(digests(commit))):
                print(f'    "{digest}": "{kind}",  # {commit[:7]}')
            sys.stdout.flush()


if __name__ == "__main__":
    main(*sys.argv[1:3])

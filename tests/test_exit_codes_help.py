"""`rein --help` lists every exit code the CLI documents (issue 34: 11, a decision queued, was
missing): the codes in its epilog are docs/cli.md's table, and the queued decision's code is one
of them. Through the real console script."""

from __future__ import annotations

import re

from rein.cli.decisions import EXIT_QUEUED
from tests.test_cli import ROOT, rein_cli


def test_rein_help_lists_the_documented_exit_codes() -> None:
    proc = rein_cli("--help", COLUMNS="200")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.replace("│", " ").split())
    epilog = text.split("Exit codes: ", 1)[1].split(". Add --debug", 1)[0]
    listed = [int(code) for code in re.findall(r"(?:^|· )(\d+) ", epilog)]
    table = [int(code) for code in re.findall(r"^\| (\d+) \|", (ROOT / "docs" / "cli.md").read_text(), re.M)]
    assert listed == table, (listed, table)
    assert EXIT_QUEUED == 11 and f"· {EXIT_QUEUED} queued: the decision was sent" in epilog

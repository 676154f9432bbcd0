"""Every `rein <command>` the docs name is a real command of the CLI (a newcomer met `rein waiting`)."""

from __future__ import annotations

import re
from pathlib import Path

from typer.main import get_command

from rein.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
NOT_COMMANDS = {("differences.md", "dev")}
"""Named as what rein does *not* have (the predecessor's `rein dev` file watcher)."""
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_rein_command_in_the_docs_exists() -> None:
    import rein.cli  # noqa: F401  (registers every command group on `app`)

    commands = set(get_command(app).commands)  # type: ignore[attr-defined]
    named = {(page.name, m) for page in PAGES
             for m in re.findall(r"`rein ([a-z][a-z-]*)", page.read_text())}
    unknown = sorted((page, word) for page, word in named if word not in commands and (page, word) not in NOT_COMMANDS)
    assert not unknown, f"docs name rein commands that do not exist: {unknown} (commands: {sorted(commands)})"

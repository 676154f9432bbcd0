"""`rein new`: a new agent project from a template.

`create_project(name, template="minimal", target_dir=".")` writes five files
into `target_dir/name`:

    main.py              the agent (from the template)
    .env.example         REIN_MODEL, vendor keys and TEMPORAL_ADDRESS, commented out
    README.md            how to run, test and serve it
    .gitignore
    tests/test_agent.py  the agent as a durable workflow on Temporal's time-skipping test server

The `minimal` template runs offline (a scripted MockProvider stands in for the
model unless REIN_MODEL is set); `coder` is an interactive coding assistant
whose tool calls need approval and which needs a real model.
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

__all__ = ["available_templates", "create_project"]

# The templates are package data under rein/templates/: one folder per template (main.py,
# tests/test_agent.py and the README's run note) and common/ for the files every project gets.
# Placeholders are replaced with plain str.replace, so the templates' own braces need no escaping.
_AGENT_NAME = "__REIN_AGENT_NAME__"  # a Python string literal: the agent's name
_SLUG = "__REIN_SLUG__"  # the agent's name, inside docstrings and comments
_TITLE = "__REIN_TITLE__"  # the project name as the user typed it (Markdown only)
_TEMPLATE = "__REIN_TEMPLATE__"  # the template's name (Markdown only)
_RUN_NOTE = "__REIN_RUN_NOTE__"  # the template's run_note.md (Markdown only)
_COMMON = "common"


def _templates() -> Traversable:
    return resources.files("rein") / "templates"


def available_templates() -> list[str]:
    """The template names `create_project` accepts, the default ("minimal") first."""
    names = [d.name for d in _templates().iterdir() if d.is_dir() and d.name != _COMMON]
    return sorted(names, key=lambda n: (n != "minimal", n))


def _slug(name: str) -> str:
    """The agent name for a project name: lowercase letters, digits, '-' and '_'."""
    return re.sub(r"[^a-z0-9_]+", "-", name.lower()).strip("-_") or "agent"


def create_project(name: str, template: str = "minimal", target_dir: str | Path = ".") -> Path:
    """Create `target_dir/name` with a new agent project; returns its path.

    Raises ValueError for an unknown template or an unusable name, and
    FileExistsError when the target exists (nothing is ever overwritten).
    """
    if template not in available_templates():
        raise ValueError(f"Unknown template {template!r}. Available: {', '.join(available_templates())}")
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(
            f"Invalid project name {name!r}: it must be a single directory name "
            "(not empty, no '/' or '\\', not '.' or '..')"
        )
    target = Path(target_dir) / name
    if target.exists():
        raise FileExistsError(f"{target} already exists; not overwriting it")

    slug = _slug(name)
    own, common = _templates() / template, _templates() / _COMMON
    run_note = (own / "run_note.md").read_text(encoding="utf-8").strip()
    files = {
        "main.py": (own / "main.py.tmpl").read_text(encoding="utf-8").replace(_AGENT_NAME, repr(slug)).replace(_SLUG, slug),
        ".env.example": (common / "env.example").read_text(encoding="utf-8"),
        "README.md": (common / "README.md.tmpl")
        .read_text(encoding="utf-8")
        .replace(_TITLE, name)
        .replace(_TEMPLATE, template)
        .replace(_RUN_NOTE, run_note),
        ".gitignore": (common / "gitignore").read_text(encoding="utf-8"),
        "tests/test_agent.py": (own / "test_agent.py.tmpl").read_text(encoding="utf-8"),
    }
    target.mkdir(parents=True)
    for relative, text in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target

"""Discover extensions that other packages publish under the `rein.plugins` entry-point group."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

GROUP = "rein.plugins"


def load_plugins(group: str = GROUP) -> dict[str, Any]:
    """Load every plugin; one that fails to load is returned as its exception, not raised."""
    loaded: dict[str, Any] = {}
    for ep in entry_points(group=group):
        try:
            loaded[ep.name] = ep.load()
        except Exception as exc:  # a broken plugin must not break the application
            loaded[ep.name] = exc
    return loaded


def plugin_names(group: str = GROUP) -> list[str]:
    return [ep.name for ep in entry_points(group=group)]

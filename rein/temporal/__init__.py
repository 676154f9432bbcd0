"""rein's Temporal integration: the plugin users install into their own Client and Worker.

Names load lazily, so importing this package (or a pure module next to it) from a
workflow pulls in nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ReinPlugin": "rein.temporal.plugin",
    "publish_event": "rein.temporal.streaming",
    "run_agent": "rein.temporal.child",
    "start_agent": "rein.temporal.child",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rein.temporal' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from rein.temporal.child import run_agent, start_agent
    from rein.temporal.plugin import ReinPlugin
    from rein.temporal.streaming import publish_event

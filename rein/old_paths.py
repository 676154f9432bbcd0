"""The module paths of earlier releases, kept as aliases of the modules that hold their code today.

rein-agent 0.2.0 and rein before its layered folders (docs/layout.md) had flat modules: `rein.ir`,
`rein.providers.fallback`, `rein.llm`, ... Importing one imports its home and registers that very module
object under the old name too, so `rein.ir.Message is rein.core.ir.Message`, and classes keep their home in
`__module__` (pickles name the home; pickles naming an old path still load). A package's submodules follow it
(`rein.providers.fallback` is `rein.blueprint.providers.fallback`). `rein/__init__.py` installs the finder:
nothing is imported until an old path is. docs/differences.md lists the table for users.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

OLD_PATHS: dict[str, str] = {
    # rein-agent 0.2.0's modules (and rein's own before the layers) ...
    "rein.a2a": "rein.web.a2a",
    "rein.agent": "rein.blueprint.agent",
    "rein.circuit": "rein.core.circuit",
    "rein.compaction": "rein.core.compaction",
    "rein.config": "rein.core.config",
    "rein.ir": "rein.core.ir",
    "rein.log": "rein.core.log",
    "rein.loop": "rein.local.loop",
    "rein.middleware": "rein.blueprint.middleware",
    "rein.otel": "rein.tracing.export",
    "rein.providers": "rein.blueprint.providers",
    "rein.result": "rein.core.result",
    "rein.runtime": "rein.blueprint.runtime",
    "rein.runtime.base": "rein.blueprint.runtime",  # rein-agent's runtime was a package; rein's is one module
    "rein.runtime.docker": "rein.blueprint.runtime",
    "rein.runtime.local": "rein.blueprint.runtime",
    "rein.scaffold": "rein.ops.scaffold",
    "rein.session": "rein.core.session",
    "rein.store": "rein.blueprint.store",
    "rein.tools": "rein.blueprint.tools",
    # ... and rein's own public modules before the layers (0.3), under their old names
    "rein.cli.server": "rein.cli.server_command",
    "rein.cli.worker": "rein.cli.worker_command",
    "rein.contract": "rein.core.contract",
    "rein.delivery": "rein.durable.delivery",
    "rein.digest": "rein.core.digest",
    "rein.engine": "rein.durable.engine",
    "rein.errors": "rein.core.errors",
    "rein.events": "rein.core.events",
    "rein.failures": "rein.core.failures",
    "rein.fleet": "rein.durable.fleet",
    "rein.fork": "rein.durable.fork",
    "rein.fork_edits": "rein.core.fork_edits",
    "rein.human": "rein.blueprint.human",
    "rein.identity": "rein.core.agent_identity",
    "rein.llm": "rein.blueprint.llm",
    "rein.machine": "rein.core.machine",
    "rein.mcp": "rein.blueprint.mcp",
    "rein.output": "rein.blueprint.output",
    "rein.prices": "rein.core.prices",
    "rein.replay": "rein.ops.replay",
    "rein.rewind": "rein.durable.rewind",
    "rein.runs": "rein.ops.runs",
    "rein.search_names": "rein.core.search_names",
    "rein.secrets": "rein.blueprint.secrets",
    "rein.server": "rein.durable.embedded_server",
    "rein.serving": "rein.ops.worker_lookup",
    "rein.signature": "rein.blueprint.signature",
    "rein.stuck": "rein.ops.stuck",
    "rein.summaries": "rein.core.summaries",
    "rein.sync": "rein.blueprint.sync",
    "rein.ui_links": "rein.ops.ui_links",
    "rein.worker": "rein.durable.temporal_worker",
    # ... and the web surfaces before rein/web/ (0.4)
    "rein.ops.agui": "rein.web.agui",
    "rein.ops.agui_events": "rein.web.agui_events",
    "rein.ops.agui_hub": "rein.web.hub",
    "rein.ops.agui_input": "rein.web.agui_input",
    "rein.ops.inbox_page": "rein.web.inbox_page",
    "rein.ops.inbox_web": "rein.web.inbox",
    "rein.ops.web": "rein.web.app",
    "rein.ops.web_auth": "rein.web.auth",
    # ... and the deploy path before it was made smaller (0.5)
    "rein.temporal.replay_check": "rein.temporal.promotion",
    "rein.workflows.earlier_rules": "rein.workflows.window",
    # ... and what rein.client calls, moved beneath it out of rein/ops/ (0.5: no import circle)
    "rein.ops.evals": "rein.durable.evals",
    "rein.ops.fork": "rein.durable.fork",
    "rein.ops.rewind": "rein.durable.rewind",
    # ... and the A2A server, a web surface behind rein.web.guard like the others (0.6)
    "rein.ops.a2a": "rein.web.a2a",
}


def home_of(name: str) -> str | None:
    """The module an old path stands for: its entry, or the same submodule of an aliased package's home."""
    if name in OLD_PATHS:
        return OLD_PATHS[name]
    parent, _, child = name.rpartition(".")
    home = home_of(parent) if parent.startswith("rein.") else None
    return f"{home}.{child}" if home else None


class OldPathFinder:
    """A `sys.meta_path` finder and loader that answers old paths with their homes' module objects.

    It sits first on `sys.meta_path`: an aliased package's `__path__` is its home's folder, where the path
    finder would otherwise load a submodule a second time under the old name."""

    @classmethod
    def find_spec(cls, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> ModuleSpec | None:
        home = home_of(name) if name.startswith("rein.") else None
        if home is None:
            return None
        import importlib.util  # here: only an old path's import pays for it

        if importlib.util.find_spec(home) is None:  # rein.providers.nothing: "No module named 'rein.providers.nothing'"
            return None
        return ModuleSpec(name, cls)  # type: ignore[arg-type]  # a Loader by its methods: importlib.abc costs ~13 ms to import

    @staticmethod
    def create_module(spec: ModuleSpec) -> ModuleType:
        home = importlib.import_module(home_of(spec.name))  # type: ignore[arg-type]  # find_spec checked it
        spec.loader_state = home.__spec__  # the import system is about to set the alias's spec on it
        return home

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        """Give the home back its own spec (reload and pickle read it). A home that is no package cannot
        hold submodules, so the old paths inside it (rein-agent's `rein.runtime.local`) are registered here."""
        alias = module.__spec__
        assert alias is not None and alias.loader_state is not None
        module.__spec__ = alias.loader_state
        if not hasattr(module, "__path__"):
            for old in [old for old in OLD_PATHS if old.rpartition(".")[0] == alias.name]:
                sys.modules.setdefault(old, importlib.import_module(OLD_PATHS[old]))


def install() -> None:
    """Put the finder first on `sys.meta_path`, once per process: also when this module runs again (a reload)."""
    if not any(getattr(finder, "__qualname__", None) == "OldPathFinder" and finder.__module__ == __name__ for finder in sys.meta_path):
        sys.meta_path.insert(0, OldPathFinder)  # type: ignore[arg-type]

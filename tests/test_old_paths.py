"""Earlier releases' module paths (rein-agent 0.2.0's `rein.ir`, ..., rein's own `rein.llm`, ...) import the very
objects of their homes today (rein.old_paths), and `import rein` imports none of those homes.

Each check runs in a fresh interpreter: this process has imported most of rein already.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rein.old_paths import OLD_PATHS

ROOT = Path(__file__).resolve().parent.parent

# rein-agent 0.2.0's public names by module (the reference's module map), each found at the old path as the
# very object its home holds.
REIN_AGENT_NAMES = {
    "rein.ir": "ToolCall ToolResult Message Usage Completion ToolSpec StreamChunk",
    "rein.config": "LoopConfig",
    "rein.session": "Stage Session",
    "rein.result": "Step Interrupt RunResult",
    "rein.circuit": "signature check_circuit",
    "rein.loop": "step arun run astream aresume",
    "rein.agent": "tool Agent Chat",
    "rein.tools": "build_schema serialize_result Tool ToolRegistry",
    "rein.providers": "Provider MockProvider LiteLLMProvider FallbackProvider",
    "rein.providers.base": "Provider",
    "rein.providers.mock": "MockProvider",
    "rein.providers.fallback": "is_retryable FallbackProvider",
    "rein.providers.litellm": "LiteLLMProvider _extract_cost",
    "rein.compaction": "estimate_tokens CompactionStrategy SlidingWindow SummarizeCompaction",
    "rein.store": "SessionStore MemorySessionStore FileSessionStore",
    "rein.middleware": "StepContext Middleware CoreStep dispatch",
    "rein.log": "logger JsonFormatter enable_logging disable_logging",
    "rein.a2a": "A2AServer serve_a2a",
    "rein.runtime": "Runtime LocalRuntime DockerRuntime",
    "rein.runtime.base": "Runtime",
    "rein.runtime.local": "LocalRuntime",
    "rein.runtime.docker": "DockerRuntime",
    "rein.scaffold": "available_templates create_project",
    "rein.otel": "export_run",
    "rein.llm": "LlmBackend StreamChunk ToolCall Message",
}
# rein-agent's top level, all 48 names of its __all__ (now lazy exports of rein)
REIN_AGENT_ALL = (
    "__version__ Agent Chat tool Message ToolCall ToolResult ToolSpec Usage Completion StreamChunk LoopConfig Session "
    "Stage RunResult Step Interrupt Tool ToolRegistry SessionStore MemorySessionStore FileSessionStore CompactionStrategy "
    "SlidingWindow SummarizeCompaction estimate_tokens enable_logging disable_logging StepContext load_plugins "
    "plugin_names create_project available_templates export_run serve_a2a A2AServer Provider MockProvider LiteLLMProvider "
    "FallbackProvider Runtime LocalRuntime DockerRuntime step arun run astream aresume"
).split()


def fresh(code: str) -> dict:
    """Run `code` in a new interpreter; it prints one JSON object as its last line."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_import_rein_imports_no_old_path_nor_its_home() -> None:
    found = fresh("""
        import json, sys
        import rein
        from rein.old_paths import OLD_PATHS
        print(json.dumps({"loaded": sorted(m for m in sys.modules if m in OLD_PATHS or m in OLD_PATHS.values())}))
    """)
    assert found["loaded"] == []


@pytest.fixture(scope="module")
def every_old_path() -> dict:
    """One interpreter imports every old path (and so every home: the CLI, A2A, the engine, ...)."""
    return fresh(f"""
        import importlib, json, sys
        import rein
        from rein.old_paths import OLD_PATHS
        wrong = {{}}
        for old, home in OLD_PATHS.items():
            module = importlib.import_module(old)
            if module is not importlib.import_module(home) or sys.modules[old] is not module:
                wrong[old] = module.__name__
        names = {REIN_AGENT_NAMES!r}
        different = []
        for old, listed in names.items():
            module = importlib.import_module(old)
            home = importlib.import_module(module.__name__)
            for name in listed.split():
                if getattr(module, name, None) is None or getattr(module, name) is not getattr(home, name):
                    different.append(f"{{old}}.{{name}}")
        missing = [name for name in {REIN_AGENT_ALL!r} if not hasattr(rein, name)]
        print(json.dumps({{"wrong": wrong, "different": different, "missing": missing}}))
    """)


def test_every_old_path_is_its_homes_module_object(every_old_path: dict) -> None:
    assert every_old_path["wrong"] == {}


def test_rein_agents_names_are_the_same_objects_at_the_old_paths(every_old_path: dict) -> None:
    assert every_old_path["different"] == []
    assert every_old_path["missing"] == []


def test_the_seeds_import_and_identities() -> None:
    found = fresh("""
        import json
        from rein.providers.fallback import is_retryable
        from rein.ir import Message
        import rein.core.ir, rein.blueprint.providers.fallback
        print(json.dumps({"retryable": is_retryable is rein.blueprint.providers.fallback.is_retryable,
                          "message": Message is rein.core.ir.Message, "home": Message.__module__}))
    """)
    assert found == {"retryable": True, "message": True, "home": "rein.core.ir"}


def test_a_submodule_of_an_old_package_is_one_module_reached_every_way() -> None:
    """`import rein.providers.fallback` then attribute access, in either order with the home, and no second copy
    of a module loaded under an old name (the path finder would load one from the home's folder)."""
    found = fresh("""
        import json, sys
        import rein.providers.fallback
        attribute = rein.providers.fallback.is_retryable
        import rein.blueprint.providers.fallback as home
        import rein.blueprint.providers.mock
        import rein.providers.mock
        files = {}
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if name.startswith("rein") and path:
                files.setdefault(path, set()).add(id(module))
        import rein.runtime.local
        from rein.runtime.docker import DockerRuntime
        print(json.dumps({"attribute": attribute is home.is_retryable,
                          "mock": rein.providers.mock is rein.blueprint.providers.mock,
                          "copies": sorted(p for p, ids in files.items() if len(ids) > 1),
                          "runtime": sys.modules["rein.runtime.local"] is sys.modules["rein.blueprint.runtime"],
                          "docker": DockerRuntime is rein.blueprint.runtime.DockerRuntime,
                          "lazy": rein.loop is sys.modules["rein.local.loop"]}))
    """)
    assert found == {"attribute": True, "mock": True, "copies": [], "runtime": True, "docker": True, "lazy": True}


def test_reload_pickle_and_star_import_behave_as_on_the_home() -> None:
    found = fresh("""
        import importlib, json, pickle, sys
        import rein.ir, rein.core.ir
        spec = rein.ir.__spec__.name
        message = rein.ir.Message(role="user", content="hi")
        dumped = pickle.dumps(message)
        importlib.reload(rein.ir)
        namespace = {}
        exec("from rein.ir import *", namespace)
        print(json.dumps({"spec": spec, "same": sys.modules["rein.ir"] is sys.modules["rein.core.ir"],
                          "reloaded": rein.ir.Message is sys.modules["rein.core.ir"].Message,
                          "names_home": b"rein.core.ir" in dumped, "loads": pickle.loads(dumped).content,
                          "star": namespace["Message"] is rein.core.ir.Message}))
    """)
    assert found == {"spec": "rein.core.ir", "same": True, "reloaded": True, "names_home": True, "loads": "hi",
                     "star": True}


def test_an_unknown_path_still_fails_and_real_packages_are_untouched() -> None:
    found = fresh("""
        import json
        errors = []
        for name in ("rein.nothing", "rein.ir.nothing", "rein.providers.nothing"):
            try:
                __import__(name)
            except ModuleNotFoundError as e:
                errors.append(e.name)
        import rein.workflows, rein.activities
        print(json.dumps({"errors": errors, "workflows": rein.workflows.__spec__.name,
                          "activities": rein.activities.__file__.endswith("activities/__init__.py")}))
    """)
    assert found == {"errors": ["rein.nothing", "rein.ir.nothing", "rein.providers.nothing"],
                     "workflows": "rein.workflows", "activities": True}


def test_no_old_path_is_a_file_and_each_home_is_one() -> None:
    """The table shadows no real module (and no shim file per old module crept back), and points at real ones."""
    def exists(module: str) -> bool:  # rein.workflows and rein.activities are the top-level folders (package-dir)
        parts = module.split(".")
        path = ROOT / Path(*(parts[1:] if parts[:2] in (["rein", "workflows"], ["rein", "activities"]) else parts))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    assert [old for old in OLD_PATHS if exists(old)] == []
    assert [home for home in OLD_PATHS.values() if not exists(home)] == []


def test_docs_list_every_old_path_with_its_home() -> None:
    text = (ROOT / "docs" / "differences.md").read_text()
    listed = dict(re.findall(r"^ *\| `(rein\.[\w.]+)` \| `(rein\.[\w.]+)` \|", text, re.MULTILINE))
    assert listed == OLD_PATHS

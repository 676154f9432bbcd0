"""The house rules, checked: no import cycles, the layers point one way, docs/layout.md names every module and
its floors, and no module or function grows past its size without a reason written at its top.

Every import counts: at module level, inside functions, and under `if TYPE_CHECKING:` (it never runs, but it says
the module depends on the other: a circle there is a circle in the design). `python -m tests.test_layers` prints
the floors table docs/layout.md holds.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("rein", "workflows", "activities")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
REASON = "long by design"

CORE = {"rein.core.ir", "rein.core.config", "rein.core.session", "rein.core.machine", "rein.core.contract",
        "rein.blueprint.tools", "rein.blueprint.signature"}
BLUEPRINT = {"rein.blueprint.agent"}
RUNNERS = {
    "rein.local.loop", "rein.durable.engine", "rein.client", "rein.durable.temporal_worker", "rein.durable.embedded_server",
    "rein.temporal.plugin",
}
APPLICATIONS = ("rein.cli", "rein.web.a2a")


def is_application(module: str) -> bool:
    return any(module == a or module.startswith(a + ".") for a in APPLICATIONS)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in ("workflows", "activities"):
        parts = ["rein", *parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for d in SOURCES for p in (ROOT / d).rglob("*.py")}


def imported(tree: ast.AST, name: str, package: str, mods: Collection[str]) -> set[str]:
    """The rein modules `name` (in `package`) imports anywhere in its `tree`: module level, in functions, under
    TYPE_CHECKING; `from x import y` names module x.y when that is a module, else x."""
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        for target in targets:
            while target and target not in mods:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            if target and target != name:
                found.add(target)
    return found


def import_graph(mods: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """module -> the rein modules it imports (every import: see `imported`); rein's own when `mods` is None."""
    if mods is None:
        return {name: set(targets) for name, targets in _rein_graph().items()}
    return {name: imported(ast.parse(path.read_text()), name,
                           name if path.name == "__init__.py" else name.rsplit(".", 1)[0], mods)
            for name, path in mods.items()}


@functools.cache
def _rein_graph() -> dict[str, frozenset[str]]:
    """rein's graph, parsed once per test process (the checks below each walk it)."""
    return {name: frozenset(targets) for name, targets in import_graph(modules()).items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_check_sees_imports_in_functions_and_under_type_checking(tmp_path: Path) -> None:
    """Two modules that import each other only inside a function and under TYPE_CHECKING are a circle."""
    (tmp_path / "a.py").write_text("def f():\n    from pkg import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n")
    (tmp_path / "c.py").write_text("import pkg.b\n")
    graph = import_graph({f"pkg.{m}": tmp_path / f"{m}.py" for m in "abc"})
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.b"}}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_core_imports_nothing_above_it() -> None:
    graph = import_graph()
    above = BLUEPRINT | RUNNERS
    for module in CORE:
        reached = reaches(graph, module)
        assert not reached & above, f"{module} reaches {sorted(reached & above)}"
        assert not [m for m in reached if is_application(m)], module


def test_the_blueprint_imports_no_runner_or_application() -> None:
    reached = reaches(import_graph(), "rein.blueprint.agent")
    assert not reached & RUNNERS, sorted(reached & RUNNERS)
    assert not [m for m in reached if m.startswith(("rein.workflows", "rein.activities")) or is_application(m)]


def test_runners_import_no_application() -> None:
    graph = import_graph()
    for module in sorted(RUNNERS) + [m for m in graph if m.startswith(("rein.workflows", "rein.activities"))]:
        bad = [m for m in reaches(graph, module) if is_application(m)]
        assert not bad, f"{module} reaches {bad}"


def _has_reason(node: ast.AST) -> bool:
    doc = ast.get_docstring(node) or ""  # type: ignore[arg-type]
    return REASON in doc.lower()


def test_no_module_or_function_too_long_without_a_reason() -> None:
    too_long: list[str] = []
    for name, path in modules().items():
        source = path.read_text()
        tree = ast.parse(source)
        if len(source.splitlines()) > MAX_MODULE_LINES and not _has_reason(tree):
            too_long.append(f"{name}: {len(source.splitlines())} lines")
        lines = source.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                top = "\n".join(lines[node.lineno - 1 : node.body[0].lineno]).lower()  # up to its first statement
                if length > MAX_FUNCTION_LINES and not (_has_reason(node) or REASON in top):
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []


def test_workflow_code_reaches_only_pure_modules() -> None:
    """The whole workflows/ package passes through the sandbox (imported once per worker), so nothing it
    imports is re-checked per run: everything it reaches must be one of rein's listed pure modules."""
    from rein.temporal.sandbox import PURE_MODULES

    def pure(module: str) -> bool:
        return module == "rein" or any(module == p or module.startswith(p + ".") for p in PURE_MODULES)

    graph = import_graph()
    for module in [m for m in graph if m.startswith("rein.workflows")]:
        impure = sorted(m for m in reaches(graph, module) if not pure(m))
        assert not impure, f"{module} reaches modules that are not pure (rein.temporal.sandbox): {impure}"


MUTABLE = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def workflow_reads_beyond_history(source: str) -> list[str]:
    """What in a workflows/ module reads something other than the run's history and input: a branch on
    `is_replaying()` (live and replayed code would differ), or a module-level mutable container or `global`
    (a process-wide registry some worker fills and workflow code reads)."""
    tree = ast.parse(source)
    found = [f"line {n.lineno}: is_replaying" for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and n.attr == "is_replaying"]
    found += [f"line {n.lineno}: global" for n in ast.walk(tree) if isinstance(n, ast.Global)]
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            continue  # the package's exports
        if isinstance(value, MUTABLE) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                                          and value.func.id in ("dict", "list", "set", "defaultdict", "OrderedDict")):
            found.append(f"line {node.lineno}: a module-level mutable container")
    return found


def test_workflow_code_reads_only_its_history_and_input() -> None:
    """Issue 43: what a worker can do is decided when the run starts, recorded, and read back from history."""
    found = {path.name: hits for path in sorted((ROOT / "workflows").glob("*.py"))
             if (hits := workflow_reads_beyond_history(path.read_text()))}
    assert found == {}


def test_the_history_only_check_sees_each_form() -> None:
    source = ("from temporalio import workflow\n_served: dict[str, int] = {}\nCACHE = dict()\nOK = frozenset({1})\n"
              "def f():\n    global CACHE\n    if workflow.unsafe.is_replaying():\n        pass\n")
    assert workflow_reads_beyond_history(source) == [
        "line 7: is_replaying", "line 6: global", "line 2: a module-level mutable container",
        "line 3: a module-level mutable container"]


PRIVATE_REACHES = "rein.temporal.sdk_private"
DOCUMENTED_UNDERSCORES = {"os._exit", "sys._getframe"}  # public despite the underscore


def private_reaches(tree: ast.AST) -> list[str]:
    """Where code reaches into another package's private names: `from x._y import z`, `from x import _z`,
    or `module._name` on a module it imported (its own `_names` and dunders are not counted)."""
    external = {"__future__"}
    modules_bound: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module not in external:
            if node.module.split(".")[0] in ("rein", "workflows", "activities"):
                continue
            private = [a.name for a in node.names if a.name.startswith("_")]
            if any(part.startswith("_") for part in node.module.split(".")) or private:
                found.append(f"from {node.module} import {', '.join(a.name for a in node.names)}")
            modules_bound.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("rein", "workflows", "activities"):
                    continue
                if any(part.startswith("_") for part in alias.name.split(".")):
                    found.append(f"import {alias.name}")
                modules_bound.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in modules_bound
                and f"{node.value.id}.{node.attr}" not in DOCUMENTED_UNDERSCORES):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_private_sdk_internals_only_in_one_module() -> None:
    """temporalio's (or the standard library's) private names are reached in rein.temporal.sdk_private
    only, so an upgrade that moves one breaks one known place."""
    reaches = {name: private_reaches(ast.parse(path.read_text())) for name, path in modules().items()
               if name != PRIVATE_REACHES}
    assert {name: found for name, found in reaches.items() if found} == {}
    assert private_reaches(ast.parse(modules()[PRIVATE_REACHES].read_text()))  # the check sees them there


def test_the_private_reach_check_sees_each_form() -> None:
    source = ("from temporalio.contrib.opentelemetry._context import attached_context\n"
              "from temporalio.worker import _runner\n"
              "import threading\nthreading._register_atexit(print)\n"
              "from temporalio import workflow\nworkflow._Definition\n"
              "from rein.core.machine import _private_ok\nworkflow.__name__\n")
    assert sorted(private_reaches(ast.parse(source + "import os\nos._exit(0)\n"))) == [
        "from temporalio.contrib.opentelemetry._context import attached_context",
        "from temporalio.worker import _runner", "threading._register_atexit", "workflow._Definition"]


def test_no_private_reach_in_workflow_code_or_on_the_task_path() -> None:
    """Workflow modules, activities and what a worker runs per task import nothing from
    rein.temporal.sdk_private: its reaches are made by a client (a replayed history's queries) or at exit."""
    task_path = [name for name in modules() if name.startswith(("rein.workflows", "rein.activities"))
                 or name in ("rein.temporal.plugin", "rein.temporal.sandbox", "rein.temporal.converter",
                             "rein.temporal.streaming", "rein.tracing.workflow_spans", "rein.tracing.activity_spans")]
    used: set[str] = set()
    for name in task_path:
        for node in ast.walk(ast.parse(modules()[name].read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == PRIVATE_REACHES:
                used.update(alias.name for alias in node.names)
    assert used == set()


def test_each_private_reach_is_still_there() -> None:
    """Each private name rein.temporal.sdk_private uses exists in the temporalio (and Python) installed: an
    upgrade that removes one fails here, not at a worker's start or while it replays runs in flight."""
    import inspect
    import threading

    from temporalio import runtime, workflow
    from temporalio.contrib.workflow_streams import WorkflowStream

    assert callable(workflow._Definition.must_from_class)  # query_handler
    assert hasattr(runtime._runtime_ref, "_default_runtime")  # forget_default_runtime
    assert callable(threading._register_atexit)  # at_exit_before_threads_join
    stream = inspect.getsource(WorkflowStream.__init__)
    assert "self._log" in stream and "self._base_offset" in stream  # stream_log


def test_temporalio_is_bounded_to_the_releases_the_suite_ran() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    [temporalio] = [d for d in pyproject["project"]["dependencies"] if d.startswith("temporalio")]
    assert "<" in temporalio, temporalio


# The folders are the layers (docs/layout.md), lowest first: a module imports its own layer and the layers
# below it. Modules at rein/'s top level keep their public import paths (rein.client, rein.testing, ...).
LAYER_OF = (
    ("rein.core", 0), ("rein.plugins", 0),
    ("rein.settings", 0),  # reads the environment and the settings file; imports no rein module
    ("rein.old_paths", 0),  # imports no rein module: it imports an old path's home by name, when the old path is imported
    ("rein.blueprint", 1),
    ("rein.local", 2),
    ("rein.durable", 3), ("rein.temporal", 3), ("rein.tracing", 3), ("rein.workflows", 3), ("rein.activities", 3),
    ("rein.client", 3),
    ("rein.ops", 4), ("rein.testing", 4),
    ("rein.web", 5),
    ("rein.cli", 6),
)
LAYER_NAMES = ("core", "blueprint", "local", "durable", "ops", "web", "cli")
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()
"""Imports allowed to point up a layer: none. (ReinClient.fork/rewind/eval once called rein/ops/; what they call
is rein.durable's fork, rewind and evals now, beneath the client.)"""


def layer_of(module: str) -> int | None:
    if module == "rein":
        return len(LAYER_NAMES)  # the package root: lazy exports of every layer; registers the runners
    found = [(len(p), n) for p, n in LAYER_OF if module == p or module.startswith(p + ".")]
    return max(found)[1] if found else None


def test_every_module_sits_in_a_layer_folder() -> None:
    assert [m for m in modules() if layer_of(m) is None] == []


def test_the_folders_point_down() -> None:
    up = sorted(f"{a} ({LAYER_NAMES[layer_of(a)] if layer_of(a) < len(LAYER_NAMES) else 'rein'}) -> {b} "
                f"({LAYER_NAMES[layer_of(b)]})"
                for a, targets in import_graph().items() for b in targets
                if layer_of(b) > layer_of(a) and (a, b) not in KNOWN_UPWARD)  # type: ignore[operator]
    assert up == []


def test_the_client_imports_no_ops_and_nothing_beneath_it_imports_it() -> None:
    """ReinClient's fork, rewind, eval and policy call code beneath it (rein.durable), which takes a ReinClient by its
    shape (rein.durable.runs_client): nothing the client reaches is above it or imports it back."""
    graph = import_graph()
    beneath = reaches(graph, "rein.client")
    assert sorted(m for m in beneath if layer_of(m) > layer_of("rein.client")) == []  # type: ignore[operator]
    assert sorted(m for m in beneath if "rein.client" in graph[m]) == []


def test_tracing_imports_nothing_from_temporal() -> None:
    """rein.temporal wires tracing in (its plugin's interceptors); tracing reaches no rein.temporal module back."""
    graph = import_graph()
    reached = {m: sorted(t for t in reaches(graph, m) if t.startswith("rein.temporal")) for m in graph
               if m == "rein.tracing" or m.startswith("rein.tracing.")}
    assert len(reached) > 5
    assert {m: found for m, found in reached.items() if found} == {}


LAYOUT = ROOT / "docs" / "layout.md"


def layout_entries(text: str) -> dict[str, str]:
    """docs/layout.md's folder entries: each paragraph or list item that starts with a folder in bold
    (`**rein/durable/**`), by folder, with its text up to the next entry or blank line."""
    parts = re.split(r"^[ \t]*(?:\d+\.[ \t]+|-[ \t]+)?\*\*([\w/]+/)\*\*", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1].split("\n\n")[0] for i in range(1, len(parts) - 1, 2)}


def test_the_layout_names_every_module() -> None:
    """Each module is named (`stem`) in its folder's entry in docs/layout.md; a package is its folder's entry."""
    entries = layout_entries(LAYOUT.read_text())
    missing = []
    for name, path in sorted(modules().items()):
        folder = str(path.parent.relative_to(ROOT)) + "/"
        if folder not in entries:
            missing.append(f"{name}: no entry **{folder}**")
        elif path.name != "__init__.py" and f"`{path.stem}`" not in entries[folder]:
            missing.append(f"{name}: `{path.stem}` is not in **{folder}**")
    assert missing == []


def test_the_layout_check_reads_entries() -> None:
    text = ("1. **rein/core/** The core: `ir`, `config`.\n   - **rein/core/x/** more: `y`.\n**workflows/** `agent`\n\n"
            "`loop` is not in an entry.\n")
    assert layout_entries(text) == {"rein/core/": " The core: `ir`, `config`.\n", "rein/core/x/": " more: `y`.\n",
                                    "workflows/": " `agent`"}


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """A module's floor: the longest chain of rein imports under it (0: it imports none). The graph has no cycle."""
    floor: dict[str, int] = {}

    def of(module: str) -> int:
        if module not in floor:
            floor[module] = 1 + max((of(t) for t in graph[module]), default=-1)
        return floor[module]

    for module in graph:
        of(module)
    return floor


def floors_table(graph: dict[str, set[str]]) -> str:
    """The table docs/layout.md shows: each floor and its modules (without `rein.`), wrapped."""
    by_floor: dict[int, list[str]] = {}
    for module, floor in floors(graph).items():
        by_floor.setdefault(floor, []).append(module if module == "rein" else module.removeprefix("rein."))
    return "\n".join(textwrap.fill(" ".join(sorted(names)), width=112, initial_indent=f"{floor:2}  ",
                                   subsequent_indent="    ", break_on_hyphens=False)
                     for floor, names in sorted(by_floor.items()))


def test_the_layout_shows_the_floors_as_they_are() -> None:
    graph = import_graph()
    assert cycles(graph) == []  # floors need a graph without a circle
    shown = LAYOUT.read_text().split("## Floors", 1)[1].split("```")[1].strip("\n")
    assert shown == floors_table(graph), "docs/layout.md's floors are stale: python -m tests.test_layers prints them"


def test_floors_count_the_longest_chain() -> None:
    assert floors({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == {"a": 2, "b": 1, "c": 0}


def test_the_workflow_is_a_loop_over_collaborators_not_a_diamond_of_mixins() -> None:
    """AgentWorkflow → AgentLoop → AgentHandlers → RunParts → RunState, one line; each concern is an object
    RunParts holds over the state, and none reaches into the run's private members (or another collaborator's)."""
    from rein.workflows import AgentWorkflow

    assert [c.__name__ for c in AgentWorkflow.__mro__] == ["AgentWorkflow", "AgentLoop", "AgentHandlers", "RunParts", "RunState", "object"]
    reaching = []
    for path in sorted((ROOT / "workflows").glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\brun\.(\w+\.)?_[a-z]", line):
                reaching.append(f"{path.name}:{number}: {line.strip()}")
    assert reaching == []


if __name__ == "__main__":
    print(floors_table(import_graph()))  # docs/layout.md's floors table

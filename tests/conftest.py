"""Fixtures shared by the test modules.

The whole session uses a temporary REIN_HOME (never the user's ~/.rein): the embedded
server every engine, worker and CLI call without an address shares lives there, and it
is stopped when the session ends, so no server outlives the tests.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

_HOME = tempfile.mkdtemp(prefix="rein-home-")
os.environ["REIN_HOME"] = _HOME  # at import: before any test module or subprocess reads it


def _write_bytecode() -> None:
    """Compile the project's sources to __pycache__ once. Under PYTHONDONTWRITEBYTECODE=1 (this
    machine's environment) nothing writes them, so every `rein` subprocess a test starts (hundreds a
    run) compiled each rein module it imports again: ~0.1 s of CPU a command (bench/README.md).
    Python still checks each cached file against its source, so an edited module is never stale."""
    if not sys.dont_write_bytecode:
        return  # Python writes them itself
    import compileall

    root = Path(__file__).resolve().parent.parent
    for folder in ("rein", "workflows", "activities", "examples", "tests"):
        compileall.compile_dir(root / folder, quiet=2)


_write_bytecode()


def _patient_browser_checks() -> None:
    """Playwright's `expect` waits 30 s, not 5: on a loaded 2-core CI machine a live page can take more than 5 s
    to show what a run did (a rule reaching a waiting run goes through an activity, a signal and a stream)."""
    from playwright.async_api import expect

    expect.set_options(timeout=30_000)


_patient_browser_checks()


SLOWEST_FIRST = (
    "test_deploy_outage.py",  # 3+ minutes of a killed build: first, beside everything else (it mostly waits)
    "test_tracing.py", "test_cli.py", "test_ui_browser.py", "test_a2a.py", "test_mcp.py", "test_cli_one_line.py",
    "test_embedded.py", "test_compat.py", "test_engines.py", "test_safe_deploys.py", "test_upgrades.py", "test_fleet.py",
    "test_identity.py", "test_inbox.py", "test_providers.py", "test_middleware_durable.py", "test_fault_suite.py",
    "test_lean.py",
    "test_readme.py", "test_fork.py", "test_fork_model.py", "test_live_text.py", "test_workflow.py",
    "test_model_faults.py", "test_workflow_devserver.py",
)
"""Modules by wall time, longest first (the sum of --durations=0 per module over a whole-suite run)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest modules first. CI runs `pytest -n 4 --dist loadfile --no-loadscope-reorder`: a module
    runs whole on one worker, so starting the long ones first lets the workers finish at about the same
    time (without --no-loadscope-reorder, xdist reorders modules by their number of tests).
    The sort is stable: each module's tests keep their order, the other modules theirs."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_unconfigure(config: pytest.Config) -> None:
    from rein.durable import engine
    from rein.durable.embedded_server import release_embedded, stop_embedded

    if engine.Engine._instance is not None:
        engine.Engine._instance.close()
    release_embedded()
    stop_embedded()
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture
def ids(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(task queue, workflow id), unique per test."""
    suffix = uuid.uuid4().hex[:8]
    name = request.node.name.replace("[", "-").replace("]", "")
    return f"tq-{name}-{suffix}", f"wf-{name}-{suffix}"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env():
    """A time-skipping test server (rein's data converter), one per test module."""
    from rein.testing import start_time_skipping

    environment = await start_time_skipping()
    try:
        yield environment
    finally:
        await environment.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev():
    """A real Temporal dev server (rein.testing.start_local), one per session (per xdist worker).

    Shared safely: every test uses its own task queue and workflow ids (the `ids` fixture or
    uuids), and visibility checks look for their own runs. The time-skipping `env` stays one
    per module: its clock is the whole server's, so timers of runs one module leaves open
    would share it with the next module's tests.
    """
    from rein.testing import start_local

    environment = await start_local()
    try:
        yield environment
    finally:
        await environment.shutdown()


@pytest.fixture
def private_server(tmp_path: Path):
    """A dev server of this test's own (rein's tuned settings), for tests whose processes must not share one."""
    from rein.durable.embedded_server import start_dev_server

    server = start_dev_server(log_path=tmp_path / "server.log")
    try:
        yield server
    finally:
        server.stop()

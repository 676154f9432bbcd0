"""Fixtures shared by the test modules.

The whole session uses a temporary REIN_HOME (never the user's ~/.rein): the embedded
server every engine, worker and CLI call without an address shares lives there, and it
is stopped when the session ends, so no server outlives the tests.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid

import pytest
import pytest_asyncio

_HOME = tempfile.mkdtemp(prefix="rein-home-")
os.environ["REIN_HOME"] = _HOME  # at import: before any test module or subprocess reads it


def pytest_unconfigure(config: pytest.Config) -> None:
    from rein import engine
    from rein.server import release_embedded, stop_embedded

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


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def dev():
    """A real Temporal dev server (rein.testing.start_local), one per test module."""
    from rein.testing import start_local

    environment = await start_local()
    try:
        yield environment
    finally:
        await environment.shutdown()

"""Fixtures shared by the workflow test modules."""

from __future__ import annotations

import os
import tempfile
import uuid

import pytest

# Every client and worker rein builds offloads large payloads under REIN_HOME: never the real ~/.rein.
os.environ["REIN_HOME"] = tempfile.mkdtemp(prefix="rein-home-tests-")


@pytest.fixture
def ids(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(task queue, workflow id), unique per test."""
    suffix = uuid.uuid4().hex[:8]
    name = request.node.name.replace("[", "-").replace("]", "")
    return f"tq-{name}-{suffix}", f"wf-{name}-{suffix}"

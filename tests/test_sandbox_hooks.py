"""A worker process with an import hook installed starts runs without importing the hook's library again.

beartype's claw (`beartype_this_package`, which fastmcp's key-value store calls at import, so any
worker that uses fastmcp has it) loads every module through its own loader, and that loader imports
beartype. Temporal's sandbox re-imports a workflow's module for every new run, on the worker's event
loop thread: AgentWorkflow's package passes through (imported once per worker), but a workflow of the
user's own on a rein worker is re-imported per run. Without beartype in rein's passthrough list each
such run imported all of beartype (and what it imports) again: seconds per run start when 60 runs
started at once.
"""

from __future__ import annotations

import sys
import uuid

from beartype.claw import beartype_package
from temporalio import workflow

import rein

_executed: list[str] = []
_recording = False


@workflow.defn(name="HooksEcho")
class EchoWorkflow:
    """A workflow of the user's own, served by a rein worker beside AgentWorkflow."""

    @workflow.run
    async def run(self, text: str) -> str:
        return text


def _audit(event: str, args: tuple) -> None:
    """Every module body the sandbox runs is an `exec` of its code object (importlib's loader)."""
    if _recording and event == "exec":
        _executed.append(getattr(args[0], "co_filename", ""))


async def test_new_runs_do_not_import_beartype_again(dev):
    global _recording
    beartype_package("rein_tests_no_such_package")  # installs the claw's path hook, as fastmcp does
    sys.addaudithook(_audit)  # audit hooks stay for the process; `_recording` turns this one off
    queue = f"hooks-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[], task_queue=queue, workflows=[EchoWorkflow]):
        _recording = True
        try:
            for text in ("a", "b", "c"):  # each a new run: a new sandbox that imports this module again
                assert await dev.client.execute_workflow("HooksEcho", text, id=f"{queue}-{text}", task_queue=queue) == text
        finally:
            _recording = False
    assert any(path.endswith("test_sandbox_hooks.py") for path in _executed)  # the sandbox did import per run
    assert [path for path in _executed if "/beartype/" in path] == []

"""RunsClient: what the code beneath rein.client (fork, rewind, what-ifs, rules) uses of a ReinClient.

Those modules take a ReinClient from their callers, but rein.client imports them (`ReinClient.fork`, `rewind`,
`eval`, `policy`), so they name it by its shape: importing rein.client would close a circle (docs/layout.md).
"""

from __future__ import annotations

from typing import Any, Protocol

from temporalio.client import Client, WorkflowHandle

from rein.core.contract import RunOutcome
from rein.core.result import RunResult, Step


class RunsClient(Protocol):
    """A ReinClient as the code beneath it sees one: its temporalio client, its task queue and its run readers."""

    client: Client
    task_queue: str

    def handle(self, run_id: str, run: str | None = None) -> WorkflowHandle[Any, RunOutcome]: ...

    async def steps(self, run_id: str, start: int = 0, *, serving: bool | None = None) -> list[Step]: ...

    async def result(self, run_id: str) -> RunResult: ...

    async def outcome(self, handle: WorkflowHandle[Any, RunOutcome]) -> RunOutcome: ...

    async def full_result(self, run_id: str, outcome: RunOutcome, steps_from: int = 0) -> RunResult: ...

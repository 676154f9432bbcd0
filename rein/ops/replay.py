"""The replay gate: replay recorded run histories against the code installed here.

A deploy that changes the command sequence AgentWorkflow produces for a run in flight
strands that run (a nondeterminism error on its next workflow task). Replaying the
histories of recent runs with the new build, before deploying it, finds that in CI:
`rein replay --since 7d` (from a server), `rein replay FILE...` (exported histories,
`rein history export`), or `rein.testing.replay(histories)` in pytest.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from rein.core.contract import WORKFLOW_TYPE

HistorySource = WorkflowHistory | str | Path | dict[str, Any]
"""A WorkflowHistory, a path to an exported history (JSON), or that JSON as text or a dict."""


@dataclass
class Replayed:
    """One history's verdict: `error` is None when the code replays it exactly."""

    workflow_id: str
    run_id: str
    error: str | None = None
    reset_from: str | None = None
    """This run is a reset (`rein rewind`) of that run of the same workflow id."""
    reset_to: str | None = None
    """This run was reset: that run, replayed here too, replaced it."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class ReplayReport:
    """Every history's verdict. Awaiting it gives itself, so `await rein.testing.replay(...)` works too."""

    results: list[Replayed] = field(default_factory=list)

    @property
    def failures(self) -> list[Replayed]:
        return [r for r in self.results if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.failures

    def __await__(self) -> Any:
        if False:  # a generator that returns at once
            yield
        return self


class ReplayFailed(AssertionError):
    """Some histories do not replay with this code: deploying it would strand those runs."""

    def __init__(self, report: ReplayReport):
        self.report = report
        lines = [f"{r.workflow_id} ({r.run_id}): {r.error}" for r in report.failures]
        super().__init__(
            f"{len(report.failures)} of {len(report.results)} histories do not replay with this code:\n  "
            + "\n  ".join(lines)
        )


def load_history(source: HistorySource) -> WorkflowHistory:
    """A WorkflowHistory from any HistorySource (Temporal's history JSON, as `rein history export`,
    `temporal workflow show --output json` and the UI's download write it). A file's workflow id
    is its stem (the id only shows in `workflow.info()`; replay does not depend on it)."""
    if isinstance(source, WorkflowHistory):
        return source
    name = "replayed"
    if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("{")):
        path = Path(source)
        try:
            text = path.read_text()
        except OSError as err:
            raise ValueError(f"cannot read history file {str(path)!r}: {err.strerror or err}") from None
        name, source = path.stem, text
    try:
        data = json.loads(source) if isinstance(source, str) else source
    except json.JSONDecodeError as err:
        raise ValueError(f"history {name!r} is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"history {name!r} is not a Temporal history (expected a JSON object)")
    if not isinstance(data.get("events"), list) or not data["events"]:
        raise ValueError(f"history {name!r} has no events (expected Temporal's history JSON)")
    try:
        return WorkflowHistory.from_json(name, data)
    except Exception as err:
        raise ValueError(f"history {name!r} cannot be read: {err}") from None


def replayer(*, data_converter: Any = None, workflows: Sequence[type] = (), plugins: Sequence[Any] = (),
             namespace: str = "default") -> Replayer:
    """A Replayer with AgentWorkflow and rein's converter (the codec from REIN_CODEC_KEY), like a worker."""
    from rein.temporal.connection import core_runtime, free_core_at_exit
    from rein.temporal.plugin import ReinPlugin

    free_core_at_exit()  # a process that only replays starts the core too
    extra: dict[str, Any] = {"data_converter": data_converter} if data_converter is not None else {}
    # rein's Runtime: a history that does not replay logs each failing task as the core's warning; the
    # report says it once (the warnings with --debug / REIN_DEBUG=1).
    return Replayer(workflows=list(workflows), plugins=[ReinPlugin(agents=[]), *plugins], namespace=namespace,
                    runtime=core_runtime(), **extra)


async def replay_all(histories: AsyncIterator[WorkflowHistory] | Iterable[WorkflowHistory], **options: Any) -> ReplayReport:
    """Replay every history; the report says which do not replay and why."""
    report = ReplayReport()
    async with replayer(**options).workflow_replay_iterator(_aiter(histories)) as results:
        async for result in results:
            failure = result.replay_failure
            run_id, reset_from = history_run(result.history)
            report.results.append(Replayed(
                workflow_id=result.history.workflow_id,
                run_id=run_id,
                error=None if failure is None else _short(failure),
                reset_from=reset_from,
            ))
    replaced = {(r.workflow_id, r.reset_from): r.run_id for r in report.results if r.reset_from}
    for r in report.results:
        r.reset_to = replaced.get((r.workflow_id, r.run_id))
    return report


def history_run(history: WorkflowHistory) -> tuple[str, str | None]:
    """A history's own run id, and the run it is a reset of (None when it is not one).

    A reset run's history starts with a copy of its base run's events, first event included, so
    temporalio's `WorkflowHistory.run_id` (the first event's) names the base run. The workflow task
    the reset failed (cause RESET_WORKFLOW) names both; the last such event is this run's own."""
    run_id, reset_from = history.run_id, None
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            continue
        failed = event.workflow_task_failed_event_attributes
        if failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW and failed.new_run_id:
            run_id, reset_from = failed.new_run_id, failed.base_run_id or None
    return run_id, reset_from


def _short(failure: Exception) -> str:
    """The core's failure message without its Rust debug wrapping."""
    text = " ".join(str(failure).split())
    inner = re.search(r'message: "(.*?)", source:', text)
    return (inner[1] if inner else text)[:2000] or type(failure).__name__


def server_query(since: timedelta | None, query: str | None) -> str:
    """The visibility query for the runs to replay: AgentWorkflow runs started within `since`, and `query`."""
    parts = [f'WorkflowType = "{WORKFLOW_TYPE}"']
    if since is not None:
        start = (datetime.now(UTC) - since).strftime("%Y-%m-%dT%H:%M:%SZ")
        parts.append(f'StartTime > "{start}"')
    if query:
        parts.append(f"({query})")
    return " AND ".join(parts)


async def server_histories(client: Client, since: timedelta | None, query: str | None,
                           limit: int) -> AsyncIterator[WorkflowHistory]:
    """The histories of the runs `server_query` finds, newest first, at most `limit`."""
    async for history in client.list_workflows(server_query(since, query), limit=limit).map_histories():
        yield history


async def _aiter(histories: AsyncIterator[WorkflowHistory] | Iterable[WorkflowHistory]) -> AsyncIterator[WorkflowHistory]:
    if hasattr(histories, "__aiter__"):
        async for history in histories:  # type: ignore[union-attr]
            yield history
    else:
        for history in histories:  # type: ignore[union-attr]
            yield history

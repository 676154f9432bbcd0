"""rein's status of a run as visibility lists it: the one rule every listing and reader applies."""

from __future__ import annotations

from temporalio.client import WorkflowExecution, WorkflowExecutionStatus

from rein.core.contract import PROBLEMS_KEY, SEARCH_KEYS

_STATUS = SEARCH_KEYS["ReinStatus"]
_CLOSED_STATUS = {
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
}


def status_of(execution: WorkflowExecution) -> str:
    """rein's status for a run: the workflow's closed state wins over a stale ReinStatus, and an open
    run whose workflow task keeps failing is `stuck` (its ReinStatus is where it stopped; see rein.ops.stuck)."""
    recorded = execution.typed_search_attributes.get(_STATUS)
    closed = _CLOSED_STATUS.get(execution.status) if execution.status is not None else None
    if closed:
        return closed
    if execution.status == WorkflowExecutionStatus.COMPLETED:
        return recorded if recorded in ("done", "cancelled") else "done"
    if execution.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
        return "continued"
    problems = execution.typed_search_attributes.get(PROBLEMS_KEY)
    if execution.status == WorkflowExecutionStatus.RUNNING and problems:
        return "stuck"
    return recorded or "running"

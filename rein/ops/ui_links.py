"""Ready links into the Temporal UI: the run lists an operator opens first (`rein server` prints them,
docs/ui.md explains them). Each is the UI's workflow list with a visibility query, URL-encoded."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote

from rein.core.contract import WORKFLOW_TYPE
from rein.ops.stuck import STUCK_QUERY

WAITING_QUERY = (f'WorkflowType="{WORKFLOW_TYPE}" AND ExecutionStatus="Running" AND '
                 'ReinStatus IN ("waiting_approval", "waiting_input", "waiting_retry")')
"""Runs waiting for a person: an approval, an answer, or a retry after an error."""


def failed_since_query(since: datetime) -> str:
    """Runs that failed (or timed out, or were terminated) since `since`."""
    stamp = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (f'WorkflowType="{WORKFLOW_TYPE}" AND ExecutionStatus IN ("Failed", "TimedOut", "Terminated") '
            f'AND CloseTime > "{stamp}"')


SCHEDULED_FAILED_QUERY = (f'WorkflowType="{WORKFLOW_TYPE}" AND TemporalScheduledById IS NOT NULL AND '
                          '(ExecutionStatus IN ("Failed", "TimedOut", "Terminated") OR ReinStatus="failed")')
"""Runs a schedule started (rein schedule) that failed, whenever."""


def list_url(ui: str, query: str, namespace: str = "default") -> str:
    return f"{ui.rstrip('/')}/namespaces/{quote(namespace, safe='')}/workflows?query={quote(query, safe='')}"


def ui_links(ui: str, namespace: str = "default", now: datetime | None = None) -> dict[str, str]:
    """{"waiting for a person", "stuck", "failed today", "scheduled runs that failed"}: UI links (today: since 00:00 UTC)."""
    midnight = (now or datetime.now(UTC)).astimezone(UTC).replace(
        hour=0, minute=0, second=0, microsecond=0)
    return {
        "waiting for a person": list_url(ui, WAITING_QUERY, namespace),
        "stuck": list_url(ui, STUCK_QUERY, namespace),
        "failed today": list_url(ui, failed_since_query(midnight), namespace),
        "scheduled runs that failed": list_url(ui, SCHEDULED_FAILED_QUERY, namespace),
    }


def run_url(ui: str, run_id: str, namespace: str = "default") -> str:
    """A run's page in the Temporal UI (its newest run of a continue-as-new chain)."""
    return f"{ui.rstrip('/')}/namespaces/{quote(namespace, safe='')}/workflows/{quote(run_id, safe='')}"

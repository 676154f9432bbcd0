"""Stuck runs: open runs that cannot go on without an operator. Those whose workflow task keeps failing (a bug in
workflow-side code, a nondeterminism error after a deploy: they lose nothing and wait for a fixed build), and those
that wait on a build no worker serves (`unserved`).

Temporal marks them itself: after `system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute`
failed attempts in a row (server >= 1.28) a run gets the search attribute
`TemporalReportedProblems` (e.g. `category=WorkflowTaskFailed`), cleared when a task completes.
The error comes from the run's last `WorkflowTaskFailed` event, the attempt from
DescribeWorkflowExecution's pending workflow task.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution as ExecutionRef
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    GetWorkflowExecutionHistoryReverseRequest,
)
from temporalio.client import Client, WorkflowExecution

from rein.core.contract import PROBLEMS, PROBLEMS_KEY, SEARCH_KEYS, WORKFLOW_TYPE
from rein.core.failures import REIN_BUG

STUCK_QUERY = (f'WorkflowType="{WORKFLOW_TYPE}" AND ExecutionStatus="Running" '
               f'AND ({PROBLEMS} IS NOT NULL OR ReinStatus="stuck")')
"""The visibility query (also for the Temporal UI's search box) of stuck rein runs: a workflow task that
keeps failing (Temporal's own attribute), or a bug in rein's activity code the run retries (rein.core.failures)."""
_AGENT = SEARCH_KEYS["ReinAgent"]
_STATUS = SEARCH_KEYS["ReinStatus"]
_EVENTS_SCANNED = 200


@dataclass
class StuckRun:
    """One stuck run: where it stopped (its last ReinStatus) and why its workflow task fails."""

    id: str
    agent: str
    last_status: str
    problems: list[str]
    attempt: int
    error: str
    started: datetime

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.id, "agent": self.agent, "status": "stuck", "last_status": self.last_status,
                "problems": self.problems, "attempt": self.attempt, "error": self.error,
                "started": self.started.isoformat()}


async def stuck_runs(client: Client, agent: str | None = None, limit: int = 50) -> list[StuckRun]:
    """Stuck rein runs, newest first, each with its workflow task's attempt and last error."""
    query = STUCK_QUERY + (f' AND ReinAgent="{agent}"' if agent else "")
    executions = [e async for e in client.list_workflows(query, limit=limit)]
    return list(await asyncio.gather(*(_stuck_run(client, e) for e in executions)))


async def _stuck_run(client: Client, execution: WorkflowExecution) -> StuckRun:
    ref = ExecutionRef(workflow_id=execution.id, run_id=execution.run_id)
    described, error = await asyncio.gather(
        client.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(namespace=client.namespace, execution=ref)),
        last_task_error(client, ref),
    )
    attributes = execution.typed_search_attributes
    attempt = described.pending_workflow_task.attempt
    if not attributes.get(PROBLEMS_KEY):  # held up by a bug in an activity: the call the run retries
        failing = [a for a in described.pending_activities if a.last_failure.message]
        if failing:  # retried now, by the activity's own policy
            error = f"{failing[0].last_failure.application_failure_info.type}: {failing[0].last_failure.message}"
            attempt = failing[0].attempt
    return StuckRun(
        id=execution.id,
        agent=attributes.get(_AGENT) or "",
        last_status=attributes.get(_STATUS) or "running",
        problems=list(attributes.get(PROBLEMS_KEY) or []),
        attempt=attempt,
        error=error,
        started=execution.start_time,
    )


async def last_task_error(client: Client, ref: ExecutionRef) -> str:
    """The message of the run's latest WorkflowTaskFailed event (later attempts repeat it unrecorded), or of
    its latest activity that failed on a bug in rein's code."""
    token = b""
    scanned = 0
    while scanned < _EVENTS_SCANNED:
        page = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=client.namespace, execution=ref, maximum_page_size=50, next_page_token=token))
        for event in page.history.events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                failure = event.workflow_task_failed_event_attributes.failure
                kind = failure.application_failure_info.type
                return f"{kind}: {failure.message}" if kind else failure.message
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                return "workflow task timed out (no worker completed it)"
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
                failure = event.activity_task_failed_event_attributes.failure
                if failure.application_failure_info.type == REIN_BUG:
                    return f"{REIN_BUG}: {failure.message}"
        scanned += len(page.history.events)
        token = page.next_page_token
        if not token:
            break
    return ""


async def unserved(client: Client, limit: int = 50) -> tuple[list[str], list[StuckRun]]:
    """Runs that wait on a build no worker serves (rein.ops.routing), and each such build's outage line."""
    from temporalio.api.workflowservice.v1 import ListWorkerDeploymentsRequest
    from temporalio.service import RPCError, RPCStatusCode

    from rein.ops.routing import deployment_state

    lines: list[str] = []
    rows: list[StuckRun] = []
    token = b""
    while True:
        try:
            page = await client.workflow_service.list_worker_deployments(ListWorkerDeploymentsRequest(
                namespace=client.namespace, next_page_token=token))
        except RPCError as err:
            if err.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
                return lines, rows  # no worker deployments on this namespace
            raise
        for summary in page.worker_deployments:
            state = await deployment_state(client, summary.name)
            for version in [v for v in state.versions if v.waiting and not v.polling] if state else []:
                assert state is not None
                lines.append(state.outage(version))
                why = f"waits for build {version.build_id} of deployment {state.name}: {version.workers()}"
                rows += [StuckRun(run.id, str((run.search_attributes.get("ReinAgent") or [""])[0]),
                                  str((run.search_attributes.get("ReinStatus") or ["running"])[0]), [], 0, why,
                                  run.start_time)
                         async for run in client.list_workflows(state.waiting_query(version), limit=limit)]
        token = page.next_page_token
        if not token:
            return lines, rows

"""Rewind a run in place: Temporal's reset of the same workflow id to the point after step N.

Unlike a fork (a new run with its own id, the original untouched), a rewind replaces the run:
its history is cut back to the workflow task that recorded step N, and everything after it
happens again, model calls and tools alike. rein refuses while tools ran after that point
unless the caller says they may run again (`rerun_tools`). Decisions (approvals, denials,
answers) sent after the point are not reapplied: the rewound run asks again.
"""

from __future__ import annotations

import uuid

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, ResetReapplyExcludeType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

from rein.core.fork_edits import ForkError
from rein.durable.fork import fork_point
from rein.durable.runs_client import RunsClient


async def rewind(
    client: RunsClient, run_id: str, *, to_step: int, reason: str = "", rerun_tools: bool = False, by: str | None = None
) -> str:
    """Reset `run_id` to just after step `to_step`; returns the Temporal run id of the rewound run."""
    point = await fork_point(client, run_id, to_step)
    last_of_batch = max(s.index for s in point.batch)
    if last_of_batch != to_step:
        raise ForkError(
            f"step {to_step} was recorded together with steps up to {last_of_batch}: rewind to step "
            f"{last_of_batch}, or fork at step {to_step} (a fork can split a batch)"
        )
    tools = [s for s in point.later_steps if s.kind == "tool"]
    if tools and not rerun_tools:
        raise ForkError(
            f"{len(tools)} tool step(s) ran after step {to_step} (first: step {tools[0].index}, {tools[0].summary}); "
            "a rewind may run such tools again. Say so with rerun_tools (CLI: --rerun-tools), or fork instead"
        )
    handle = client.client.get_workflow_handle(run_id, run_id=point.run)
    events = (await handle.fetch_history()).events
    finished = next(
        (e.event_id for e in events
         if e.event_id > point.task_started_event and e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
        None,
    )
    if finished is None:
        raise ForkError(f"step {to_step} of run {run_id} is not settled yet (its workflow task has not completed)")
    who = by if by is not None else client.client.identity
    response = await client.client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace=client.client.namespace,
        workflow_execution=WorkflowExecution(workflow_id=run_id, run_id=point.run),
        reason=f"rein rewind to step {to_step} by {who}" + (f": {reason}" if reason else ""),
        workflow_task_finish_event_id=finished,
        request_id=str(uuid.uuid4()),
        reset_reapply_exclude_types=[
            ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL,
            ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE,
        ],
        identity=who,
    ))
    return response.run_id

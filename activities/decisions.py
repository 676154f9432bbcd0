"""A decision passed from a parent run to its waiting agent-as-tool child (rein.workflows.decisions).

Workflow code cannot send an update to another run, so the parent's worker sends it: the child validates
and applies the decision as its own, and its answer, refusal or failure is what the parent's caller hears.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from rein.core.contract import PassDecisionInput


async def pass_decision(request: PassDecisionInput) -> Any:
    """The child's own update (activity PASS_DECISION, AgentActivities.pass_decision); a refusal or a child
    that cannot take it fails the activity for good."""
    handle = activity.client().get_workflow_handle(request.run_id)
    try:
        return await handle.execute_update(request.update, request.payload)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        message = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
        kind = cause.type if isinstance(cause, ApplicationError) else None
        raise ApplicationError(message, type=kind or "DecisionRefused", non_retryable=True) from None
    except RPCError as err:  # the child has ended, or is not there
        raise ApplicationError(f"could not take the decision: {err.message}", type="DecisionFailed",
                               non_retryable=True) from None

"""ReinScheduledMessage: what a schedule with a thread starts (rein.durable.schedules). It sends the schedule's
prompt to the thread as a `queue` message (the `rein.send` signal: a workflow cannot send an update), starting
the thread with it when the thread does not exist yet. Its message id is this run's, so a retry of it is taken
once."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from rein.core.contract import SCHEDULED_MESSAGE_TYPE, SEARCH_KEYS, WORKFLOW_TYPE, AgentInput, ScheduledMessage
    from rein.core.errors import validation_text
    from rein.core.threads import SEND_UPDATE, THREAD_MEMO, SendRequest


@workflow.defn(name=SCHEDULED_MESSAGE_TYPE)
class ScheduledMessageWorkflow:
    @workflow.run
    async def run(self, raw: Any) -> str:
        """`raw` is checked here, not by the converter: a malformed input fails this run with why, never a workflow
        task in a loop."""
        try:
            request = ScheduledMessage.model_validate(raw)
        except ValidationError as err:
            raise ApplicationError(f"Invalid ReinScheduledMessage input: {validation_text(err, 'payload')}",
                                   type="InvalidInput", non_retryable=True) from None
        info = workflow.info()  # two starts in one second share a workflow id (Temporal's is to the second)
        message = SendRequest(text=request.text, message_id=f"{info.workflow_id}/{info.run_id}", sender="schedule")
        try:
            await workflow.start_child_workflow(
                WORKFLOW_TYPE, AgentInput(agent=request.agent, thread=True), id=request.thread_id,
                parent_close_policy=ParentClosePolicy.ABANDON, memo={THREAD_MEMO: workflow.now().isoformat()},
                static_summary=f"thread · {request.agent}",
                search_attributes=TypedSearchAttributes([
                    SearchAttributePair(SEARCH_KEYS[name], value)
                    for name, value in request.attributes.items() if name in SEARCH_KEYS]),
            )
        except WorkflowAlreadyStartedError:
            pass  # the thread goes on
        await workflow.get_external_workflow_handle(request.thread_id).signal(SEND_UPDATE, message)
        return request.thread_id

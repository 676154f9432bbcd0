"""Agents used as tools: each call is a child AgentWorkflow; a child waiting for a person shows
through its parent, and decisions sent to the parent are passed on to it."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError, FailureError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from rein.contract import CHILD_SIGNAL, WORKFLOW_TYPE, AgentInput, RunStatusView
    from rein.ir import StreamChunk, ToolCall, ToolResult

from rein.workflows.options import failure_detail
from rein.workflows.visibility import Visibility

class Children(Visibility):
    """Child runs of agent-as-tool calls, and the parent link of a run that is one."""

    async def _run_child(self, call: ToolCall, agent: str) -> ToolResult:
        """An agent used as a tool: its run is a child workflow; its answer is the tool result."""
        prompt = call.arguments.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return ToolResult(tool_call_id=call.id, content=f"Agent tool '{call.name}' needs a 'prompt' string.", is_error=True)
        child_id = f"{workflow.info().workflow_id}/{call.id}"
        self.children[call.id] = child_id
        try:
            result = await workflow.execute_child_workflow(
                WORKFLOW_TYPE,
                AgentInput(agent=agent, prompt=prompt, stream=self.streaming, parent_call=call.id).model_dump(
                    mode="json", exclude_defaults=True
                ),
                id=child_id,
                static_summary=f"agent {agent} (tool call {call.id})",
            )
        except ChildWorkflowError as err:
            if isinstance(err.cause, CancelledError):  # closed CANCELED (AgentDescription.close_canceled)
                return ToolResult(tool_call_id=call.id, content=f"(agent '{agent}' ended: cancelled)", is_error=True)
            return ToolResult(tool_call_id=call.id, content=f"Agent '{agent}' failed: {failure_detail(err)}", is_error=True)
        finally:
            self.children.pop(call.id, None)
            if self.child_wait is not None and self.child_wait[0] == child_id:
                self._child_goes_on()
        stop = result.get("stop_reason") if isinstance(result, dict) else None
        output = result.get("output") if isinstance(result, dict) else None
        return ToolResult(
            tool_call_id=call.id,
            content=str(output or f"(agent '{agent}' ended: {stop})"),
            is_error=stop not in ("done", None),
        )

    @workflow.signal(name=CHILD_SIGNAL, description='From an agent-as-tool child run: {"call_id", "status"}')
    def child_status(self, payload: Any = None) -> None:
        try:
            call_id = payload["call_id"]
            view = RunStatusView.model_validate(payload["status"])
        except (KeyError, TypeError, ValidationError):
            self._ignore(CHILD_SIGNAL, "malformed child status")
            return
        child_id = self.children.get(call_id)
        if child_id is None:
            self._ignore(CHILD_SIGNAL, f"no child run for tool call {call_id!r}")
            return
        if view.status in ("waiting_approval", "waiting_input", "waiting_retry") and view.interrupt is not None:
            self.child_wait = (child_id, view)
            self.pause += 1  # a waiting client (rein.wait) sees the child's interrupt as this run's
            self._publish()
            self._emit(StreamChunk(
                type="interrupt", name=view.interrupt.type, data=view.interrupt.model_dump(mode="json"),
                finish_reason="interrupted", usage=self.session.usage,
            ))
        elif self.child_wait is not None and self.child_wait[0] == child_id:
            self._child_goes_on()

    def _child_goes_on(self) -> None:
        self.child_wait = None
        self._publish()

    def _for_child(self, name: str, payload: BaseModel) -> Any:
        """A decision sent to this run while its child waits: passed on to the child, unchanged."""
        assert self.child_wait is not None
        child = workflow.get_external_workflow_handle(self.child_wait[0])
        asyncio.ensure_future(child.signal(name, payload.model_dump(mode="json")))
        return [c.id for c in self.child_wait[1].pending_tool_calls]

    async def _tell_parent(self) -> None:
        """An agent-as-tool child run tells its parent run that it waits, or goes on."""
        parent = workflow.info().parent
        if self.parent_call is None or parent is None:
            return
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id, run_id=parent.run_id).signal(
                CHILD_SIGNAL, {"call_id": self.parent_call, "status": self._status_view().model_dump(mode="json")}
            )
        except (ApplicationError, FailureError) as err:  # the parent has ended: nothing to tell
            workflow.logger.warning("could not tell the parent run: %s", err)
        except asyncio.CancelledError:
            if not self._cancelled_natively():
                raise

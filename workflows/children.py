"""Agents used as tools: each call is a child AgentWorkflow; a child waiting for a person shows
through its parent, and decisions sent to the parent are passed on to it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError, FailureError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from rein.core.circuit import over_budget
    from rein.core.contract import (
        BUDGET_SIGNAL,
        CHILD_SIGNAL,
        WORKFLOW_TYPE,
        AgentInput,
        RunStatusView,
    )
    from rein.core.ir import StreamChunk, ToolCall, ToolResult, Usage

from rein.workflows.options import failure_detail
from rein.workflows.patches import PATCH_FAMILY_USAGE

if TYPE_CHECKING:
    from rein.workflows.publishing import Publisher
    from rein.workflows.state import RunState



class ChildRuns:
    """Child runs of agent-as-tool calls, and the parent link of a run that is one.

    Budgets cover the family: a parent with `max_cost_usd` gives each child what is left as the
    child's own `max_cost_usd`, each such child reports its usage after every model call, the
    parent counts it as its own, and once the family has spent the budget the parent tells its
    running children to stop (BUDGET_SIGNAL): they end with stop_reason `budget`, and so does it.
    Without a budget a child's usage reaches the parent only with its result (no extra events).
    A collaborator of the loop, on its state; the loop's CHILD_SIGNAL and BUDGET_SIGNAL handlers call it.
    """

    def __init__(self, run: RunState, publisher: Publisher) -> None:
        self.run = run
        self.publisher = publisher

    async def run_child(self, call: ToolCall, agent: str) -> ToolResult:
        """An agent used as a tool: its run is a child workflow; its answer is the tool result."""
        run = self.run
        prompt = call.arguments.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return ToolResult(tool_call_id=call.id, content=f"Agent tool '{call.name}' needs a 'prompt' string.", is_error=True)
        child_id = f"{workflow.info().workflow_id}/{call.id}"
        run.children[call.id] = child_id
        budget = self._budget_left()
        try:
            result = await workflow.execute_child_workflow(
                WORKFLOW_TYPE,
                AgentInput(
                    agent=agent, prompt=prompt, stream=run.streaming, parent_call=call.id,
                    config={"max_cost_usd": budget} if budget is not None else None,
                ).model_dump(mode="json", exclude_defaults=True),
                id=child_id,
                static_summary=f"agent {agent} (tool call {call.id})",
            )
        except ChildWorkflowError as err:
            if isinstance(err.cause, CancelledError):  # closed CANCELED (AgentDescription.close_canceled)
                return ToolResult(tool_call_id=call.id, content=f"(agent '{agent}' ended: cancelled)", is_error=True)
            return ToolResult(tool_call_id=call.id, content=f"Agent '{agent}' failed: {failure_detail(err)}", is_error=True)
        finally:
            run.children.pop(call.id, None)
            if run.child_wait is not None and run.child_wait[0] == child_id:
                self.child_goes_on()
        if isinstance(result, dict) and isinstance(result.get("usage"), dict):
            self._child_usage(call.id, Usage.model_validate(result["usage"]), final=True)
        stop = result.get("stop_reason") if isinstance(result, dict) else None
        output = result.get("output") if isinstance(result, dict) else None
        return ToolResult(
            tool_call_id=call.id,
            content=str(output or f"(agent '{agent}' ended: {stop})"),
            is_error=stop not in ("done", None),
        )

    def on_status(self, payload: Any = None) -> None:
        """CHILD_SIGNAL: a child run waits, goes on, or reports its spend."""
        run = self.run
        try:
            call_id = payload["call_id"]
            view = RunStatusView.model_validate(payload["status"])
        except (KeyError, TypeError, ValidationError):
            run.ignore(CHILD_SIGNAL, "malformed child status")
            return
        child_id = run.children.get(call_id)
        if child_id is None:
            if view.status != "running":  # else a spend report that crossed the child's result: counted
                run.ignore(CHILD_SIGNAL, f"no child run for tool call {call_id!r}")
            return
        self._child_usage(call_id, view.usage)
        if view.status in ("waiting_approval", "waiting_input", "waiting_retry") and view.interrupt is not None:
            run.child_wait = (child_id, view)
            run.carry.pause += 1  # a waiting client (rein.wait) sees the child's interrupt as this run's
            self.publisher.publish()
            run.emit(StreamChunk(
                type="interrupt", name=view.interrupt.type, data=view.interrupt.model_dump(mode="json"),
                finish_reason="interrupted", usage=run.session.usage,
            ))
        elif run.child_wait is not None and run.child_wait[0] == child_id:
            self.child_goes_on()

    def child_goes_on(self) -> None:
        self.run.child_wait = None
        self.publisher.publish()

    async def tell_parent(self) -> None:
        """An agent-as-tool child run tells its parent run that it waits, or goes on."""
        run = self.run
        parent = workflow.info().parent
        if run.parent_call is None or parent is None:
            return
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id, run_id=parent.run_id).signal(
                CHILD_SIGNAL, {"call_id": run.parent_call, "status": self.publisher.status_view().model_dump(mode="json")}
            )
        except (ApplicationError, FailureError) as err:  # the parent has ended: nothing to tell
            workflow.logger.warning("could not tell the parent run: %s", err)
        except asyncio.CancelledError:
            if not run.cancelled_natively():
                raise

    def _budget_left(self) -> float | None:
        """What the family may still spend (None: no budget); a child gets it as its own limit."""
        run = self.run
        limit = run.config.max_cost_usd if run.config is not None else None
        if limit is None:
            return None
        return max(limit - (run.session.usage.cost_usd or 0.0), 0.0)

    def _counts_children(self) -> bool:
        run = self.run
        if run.family_usage is None:
            run.family_usage = workflow.patched(PATCH_FAMILY_USAGE)
        return run.family_usage

    def _child_usage(self, call_id: str, usage: Usage, final: bool = False) -> None:
        """Count what a child has spent since it last reported as this run's own; stop the family
        once the budget is spent."""
        run = self.run
        if not self._counts_children():
            return
        seen = run.child_spend.pop(call_id, None) if final else run.child_spend.get(call_id)
        if not final:
            run.child_spend[call_id] = usage
        if seen is not None:
            usage = Usage(
                input_tokens=max(usage.input_tokens - seen.input_tokens, 0),
                output_tokens=max(usage.output_tokens - seen.output_tokens, 0),
                cost_usd=None if usage.cost_usd is None else max(usage.cost_usd - (seen.cost_usd or 0.0), 0.0),
            )
        run.session.usage = run.session.usage + usage
        if run.config is not None and over_budget(run.session, run.config):
            self.stop_children()

    def stop_children(self) -> None:
        """The family's budget is spent: every running child stops at its next step."""
        run = self.run
        for child_id in run.children.values():
            if child_id not in run.stopped_children:
                run.stopped_children.add(child_id)
                asyncio.ensure_future(self._signal_quietly(child_id, BUDGET_SIGNAL))

    async def _signal_quietly(self, workflow_id: str, name: str, payload: Any = None, run_id: str | None = None) -> None:
        try:
            await workflow.get_external_workflow_handle(workflow_id, run_id=run_id).signal(name, payload or {})
        except (ApplicationError, FailureError) as err:  # it has ended already
            workflow.logger.info("could not signal %s: %s", workflow_id, err)

    def on_budget_spent(self, payload: Any = None) -> None:
        """BUDGET_SIGNAL: the parent run says the family's budget is spent; this run stops."""
        run = self.run
        if run.parent_call is None:
            run.ignore(BUDGET_SIGNAL, "not a child run")
            return
        run.family_spent = True
        self.stop_children()

    def report_spend(self) -> None:
        """A child run with a budget tells its parent what it has spent, after each model call."""
        run = self.run
        parent = workflow.info().parent
        if run.parent_call is None or parent is None or run.config is None or run.config.max_cost_usd is None:
            return
        status = {"call_id": run.parent_call, "status": self.publisher.status_view().model_dump(mode="json")}
        asyncio.ensure_future(self._signal_quietly(parent.workflow_id, CHILD_SIGNAL, status, parent.run_id))

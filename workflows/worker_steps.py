"""AgentWorkflow's side of middleware and compaction: steps the worker runs whole.

For an agent with middleware, hooks or event handlers, each step is one activity
(`rein.call_model` at CALL_MODEL, `rein.run_tool` at RUN_TOOLS, including a step
that ends in an approval or input interrupt) that runs the middleware around the
work and sends back a StepOutcome; the workflow applies it to its Session. For
an agent with compaction, `rein.compact` runs before a model call whenever the
strategy's trigger (data recorded at the start of the run) is due.

Which path a run takes depends only on the AgentDescription recorded at its
start, so histories of agents without these extensions are unchanged.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from rein.core import machine, threads
    from rein.core.config import LoopConfig
    from rein.core.contract import (
        CALL_MODEL,
        COMPACT,
        RUN_TOOL,
        CompactResult,
        ModelCallInput,
        StepOutcome,
        StepRequest,
        ToolCallInput,
    )
    from rein.core.ir import Message, ToolResult
    from rein.core.result import Interrupt
    from rein.core.summaries import tool_summary

from rein.workflows.options import (
    TOOL_TIMEOUT,
    fail_if_final,
    failure_detail,
    heartbeat_timeout,
    model_retry,
    seconds,
    tool_retry,
)

if TYPE_CHECKING:
    from rein.workflows.agent_changes import AgentChanges
    from rein.workflows.decisions import Decisions
    from rein.workflows.stages import Stages
    from rein.workflows.state import RunState


class WorkerSteps:
    """Steps the worker runs whole (middleware), and compaction before a model call. A collaborator of the
    loop, on its state."""

    def __init__(self, run: RunState, agent_changes: AgentChanges, decisions: Decisions, stages: Stages) -> None:
        self.run = run
        self.agent_changes = agent_changes
        self.decisions = decisions
        self.stages = stages

    def _step_request(self, config: LoopConfig, elapsed_s: float) -> StepRequest:
        run = self.run
        info = workflow.info()
        return StepRequest(
            state=run.session.model_copy(update={"messages": []}),
            config=config,
            elapsed_s=elapsed_s,
            input_tools=sorted(run.answered_outside()),
            approval_tools=sorted(run.approval_tools),
            new_messages=run.session.messages[run.carry.sent_messages :],
            first_index=run.carry.sent_messages,
            total=len(run.session.messages),
            run_id=info.workflow_id,
            workflow_run_id=info.run_id,
            conversation=run.carry.conversation,
        )

    def _apply_step(self, outcome: StepOutcome) -> Interrupt | None:
        run = self.run
        if outcome.conversation:
            run.carry.conversation = outcome.conversation
        run.session = outcome.session_from(run.session)
        self.decisions.bind_batch()
        run.carry.sent_messages = len(run.session.messages)  # the worker holds the conversation as the step left it
        run.record_steps(outcome.steps)
        return outcome.interrupt

    async def worker_step(
        self, action: machine.CallModel | machine.RunTools | machine.Wait, config: LoopConfig, elapsed_s: float
    ) -> Interrupt | None:
        """Run one step (model call, tool batch, or the step before a wait) on the worker, middleware included."""
        request = self._step_request(config, elapsed_s)
        if isinstance(action, machine.CallModel):
            return await self._model_step(action, config, request)
        return await self._tool_step(action, request)

    async def _model_step(self, action: machine.CallModel, config: LoopConfig, request: StepRequest) -> Interrupt | None:
        run = self.run
        assert run.agent is not None
        info = workflow.info()
        model_request = ModelCallInput(
            agent=run.agent_key,
            new_messages=[],
            run_id=info.workflow_id,
            workflow_run_id=info.run_id,
            stream=run.live_text(),
            asked_stream=self.stages.asked_stream(run.live_text()),
            step=request,
            model=self.stages.model_override(),
            version=run.agent.version,
            tools=self.stages.client_tool_specs(),
        )
        options = self.stages.model_call_options(config, action.iteration)
        try:
            outcome = await run.unless_cancelled(self.stages.until_fixed("model step", lambda: workflow.execute_activity(
                CALL_MODEL, model_request, result_type=StepOutcome, **options)))
        except ActivityError as err:
            return self.stages.model_call_error(err)
        return self._apply_step(outcome) if outcome is not None else None

    async def _tool_step(self, action: machine.RunTools | machine.Wait, request: StepRequest) -> Interrupt | None:
        run = self.run
        assert run.agent is not None
        info = workflow.info()
        calls = run.session.pending_tool_calls
        infos = [t for t in run.agent.tools if any(c.name == t.spec.name for c in calls)]
        timeout = max(
            (timedelta(seconds=t.timeout_s) for t in infos if t.timeout_s), default=TOOL_TIMEOUT
        )
        summary = tool_summary(calls[0]) if len(calls) == 1 else ", ".join(tool_summary(c, 60) for c in calls)
        if isinstance(action, machine.Wait):
            summary = f"{summary} · before {action.interrupt.type}"
        # The calls travel in the step's state; `call` only names the first (arguments left out).
        tool_request = ToolCallInput(
            agent=run.agent_key,
            call=calls[0].model_copy(update={"arguments": {}}),
            run_id=info.workflow_id,
            step=request,
            version=run.agent.version,
        )
        try:
            outcome = await run.unless_cancelled(self.stages.until_fixed("tool step", lambda: workflow.execute_activity(
                RUN_TOOL,
                tool_request,
                result_type=StepOutcome,
                start_to_close_timeout=timeout,
                heartbeat_timeout=heartbeat_timeout(run.config, timeout),
                retry_policy=tool_retry(max((t.retries for t in infos), default=0)),
                summary=summary,
            )))
        except ActivityError as err:
            if self.agent_changes.taken(err) is not None:
                return None  # nothing ran: the next pass asks or runs under the agent's current definition
            fail_if_final(err, "Tool step", "StepError")
            detail = failure_detail(err)
            if isinstance(action, machine.Wait):
                return action.interrupt  # the middleware could not run; the person still decides
            results = [
                ToolResult(tool_call_id=c.id, content=f"Tool '{c.name}' did not complete: {detail}", is_error=True)
                for c in action.calls
            ]
            run.record_steps(machine.apply_tool_results(run.session, results))
            return None
        return self._apply_step(outcome) if outcome is not None else None

    async def compact_if_due(self, action: machine.CallModel, config: LoopConfig) -> None:
        """Before a model call: let the worker compact the conversation when the strategy's trigger is due."""
        run = self.run
        assert run.agent is not None
        trigger = run.agent.compaction
        if trigger is None or not trigger.due(run.session.messages):
            return
        info = workflow.info()
        unsent: list[Message | str] = list(run.session.messages[run.carry.sent_messages :])
        try:
            result = await run.unless_cancelled(self.stages.until_fixed("compaction", lambda: workflow.execute_activity(
                COMPACT,
                ModelCallInput(
                    agent=run.agent_key,
                    new_messages=unsent,
                    first_index=run.carry.sent_messages,
                    total=len(run.session.messages),
                    run_id=info.workflow_id,
                    workflow_run_id=info.run_id,
                    conversation=run.carry.conversation,
                ),
                result_type=CompactResult,
                start_to_close_timeout=seconds(config.model_timeout_s),
                heartbeat_timeout=heartbeat_timeout(config),
                retry_policy=model_retry(config),
                summary=f"compact {len(run.session.messages)} messages · iteration {action.iteration}",
            )))
        except ActivityError as err:
            fail_if_final(err, "Compaction", "CompactionError")
            workflow.logger.warning("Compaction failed; the model gets the whole conversation: %s", err.cause or err)
            return
        if result is None or result.messages is None:
            run.carry.sent_messages = len(run.session.messages)  # the worker has seen the whole conversation
            return
        if run.thread is not None:
            threads.compacted(run.thread, len(run.session.messages), len(result.messages))
        run.session.messages = result.messages
        run.carry.conversation = result.conversation
        run.carry.sent_messages = len(result.messages)

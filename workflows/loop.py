"""AgentLoop: the durable driver of rein's pure state machine (AgentWorkflow's body).

Each model call and each tool call is an activity; each interrupt is a wait for a decision (`approve`,
`deny`, `answer`, `retry`, `cancel`). Inputs, signals and queries are plain JSON validated on arrival,
so bad input from any client is a clear error or an ignored signal, never a failing workflow task.

The run's state is `RunState` (workflows/state.py); its message handlers are `AgentHandlers`
(workflows/handlers.py); the work is done by collaborators the state holds, each with public methods:
`publisher` (status, search attributes, details, outcome), `stages` (model and tool calls), `child_runs`
(agents as tools), `decisions`, `waiting` (for a person; a client's wait), `threads` (a conversation's
turns), `lean_start` (learning the agent), `worker_steps` (middleware and compaction), `agent_changes`,
`continuation` (continue-as-new) and `what_if` (rein eval). This module is the loop that drives them.

The workflow type itself is `rein.workflows.agent.AgentWorkflow`, a few lines: the sandbox
re-imports a workflow's module for every run, while these modules (pure, like everything the
workflow imports) are passed through and imported once per worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from rein.core import machine, threads
    from rein.core.config import LoopConfig
    from rein.core.contract import (
        CLOSE_CANCELED,
        AgentInput,
        CloseCanceledInput,
    )
    from rein.core.errors import validation_text
    from rein.core.ir import StreamChunk
    from rein.core.session import Session, Stage
    from rein.core.threads import SendRequest

from rein.workflows.handlers import AgentHandlers
from rein.workflows.options import DESCRIBE_TIMEOUT, describe_agent, final_error
from rein.workflows.patches import PATCH_FAILED_STATUS
from rein.workflows.what_if import WhatIf
from rein.workflows.window import closes_completed, first_start


class AgentLoop(AgentHandlers):
    """Everything of AgentWorkflow but its `@workflow.defn`, `@workflow.init` and `@workflow.run`."""

    def __init__(self, *args: Any) -> None:
        super().__init__(_valid_input(args))
        # A continuation takes over before any handler runs: signals and updates delivered with
        # its first task must find it as the predecessor left it (waiting, with its counters).
        if self.input is not None and self.input.carry is not None and self.input.session is not None:
            self.continuation.restore(self.input)

    # ---------------------------------------------------------------- the loop

    async def run(self, *args: Any) -> dict[str, Any]:
        """Only the run's own fault fails the run: invalid input, a non-retryable activity error (model,
        tool, describe_agent), a payload too large to record (all ApplicationError/FailureError here).
        Anything else raised in workflow code (a bug in rein or in code that runs here, a nondeterminism
        error) is left to Temporal: it fails the workflow TASK, the run stays open with nothing lost, and
        a fixed build carries it on (`rein list --stuck` shows it meanwhile; docs/deploys.md)."""
        try:
            return await self._run(*args)
        except ApplicationError as err:
            await self._fail()
            if err.non_retryable:
                raise
            raise ApplicationError(err.message, *err.details, type=err.type, non_retryable=True) from None
        except FailureError as err:  # an activity (e.g. describe_agent) that failed for good
            await self._fail()
            raise final_error(err) from None

    async def _fail(self) -> None:
        """Mark the run failed where ops look (ReinStatus, `status` query) before it closes."""
        self.status = "failed"
        self.interrupt = None
        self.ended = True
        self.carry.pause += 1
        try:
            if self.agent is None and workflow.patched(PATCH_FAILED_STATUS):
                self.agent = await describe_agent("", "search attributes for the failed status")
            self.publisher.publish()
            self.emit(StreamChunk(type="done", finish_reason="failed", usage=self.session.usage))
        except Exception:
            workflow.logger.exception("could not publish the failed status")
        self.readers.detach()
        await workflow.wait_condition(workflow.all_handlers_finished)

    async def _run(self, *args: Any) -> dict[str, Any]:
        config, started = await self._start(args)
        if self.start_interrupt is not None and self.what_if is not None:  # nobody would retry it
            self.what_if.settles(self.session, self.start_interrupt, self.first_step + len(self.steps), config,
                                 self.input_tools, self.approval_tools)
            self.start_interrupt = None
        if self.start_interrupt is not None:  # a lean start's first model call failed: as `_take` waits
            interrupt, self.start_interrupt = self.start_interrupt, None
            self.carry.active_s += workflow.time() - started
            await self.waiting.wait_for_human(interrupt, config)
            started = workflow.time()
        while True:
            if self.continuation.is_due():
                self.continuation.action_starts()
                self.carry.active_s += workflow.time() - started
                started = workflow.time()
                await self.continuation.continue_as_new()
            if self.thread is not None and not self.thread.open:
                if not await self.threads.open_turn():
                    break  # cancelled between turns: the thread ends
                started = workflow.time()
                continue
            self.threads.take_steering(None)
            self.threads.stop_if_thread_spent()
            elapsed = self.carry.active_s + (workflow.time() - started)
            config = self.config or config  # stricter once the agent changed under the run (workflows.agent_changes)
            action = machine.next_action(self.session, config, elapsed, self.answered_outside(), self.approval_tools,
                                         self.client_tools())
            if self.threads.stops(action):
                continue
            if (self.cancel_reason is not None or self.family_spent) and not isinstance(action, machine.Finish):
                self.session.done = True
                self.session.stop_reason = "cancelled" if self.cancel_reason is not None else "budget"
                continue
            if isinstance(action, machine.Finish):
                if self.thread is None or self.cancel_reason is not None or self.family_spent:
                    self.publisher.finishing()
                    break  # the last iteration's counters go with the final status (`_finish`)
                if not self.threads.take_steering(action.stop_reason):
                    self.carry.active_s += workflow.time() - started
                    self.threads.end_turn()
                started = workflow.time()
                continue
            self.continuation.action_starts()
            if await self._resume_wait(action, config):
                started = workflow.time()
                continue
            if await self._take(action, config, elapsed, started):
                started = workflow.time()
            self.publisher.progressed = True  # published as the next action starts (or with the final status)
        self.carry.active_s += workflow.time() - started
        return await self._finish()

    async def _start(self, args: Sequence[Any]) -> tuple[LoopConfig, float]:
        """Validate the input, learn the agent, build the Session; the loop's config and start time. First of
        all, which build started the run (rein.workflows.window): a run older than the support window fails
        this workflow task here, before any command, with the one line OutsideWindow says."""
        self.first = first_start()
        if len(args) != 1:
            raise ApplicationError(
                f"AgentWorkflow takes exactly one input, got {len(args)}. Expected JSON like "
                '{"agent": "<registered agent name>", "prompt": "..."}',
                type="InvalidInput",
                non_retryable=True,
            )
        raw_input = args[0]
        if isinstance(raw_input, dict) and raw_input.get("carry") is not None and workflow.info().continued_run_id is None:
            raise ApplicationError(
                "Invalid AgentWorkflow input: 'carry' is rein's own continue-as-new state; a client may not send it",
                type="InvalidInput",
                non_retryable=True,
            )
        # Read the clock and patches before the local activity: a local activity may resolve in a
        # different workflow task on replay, so nothing that must replay identically follows it.
        started = workflow.time()
        self.publisher.published_at_start()
        request = self.input if self.input is not None else self._parse_input(raw_input)
        self.request = request
        self.streaming = self.streaming or request.stream
        self.parent_call = request.parent_call if workflow.info().parent is not None else None
        self.agent_key = request.agent
        await self.lean_start.learn_agent(request)
        assert self.agent is not None and self.config is not None
        self.input_tools = frozenset(t.spec.name for t in self.agent.tools if t.asks_human)
        self.approval_tools = frozenset(t.spec.name for t in self.agent.tools if t.requires_approval)
        self.agent_changes.continued_with(request.carry)
        if request.eval is not None:
            self.what_if = WhatIf(request.eval, self.agent)
        config = self.config
        if request.carry is None:
            if request.thread:
                self._initial_thread(request)
            elif not self.lean:  # a lean start built it with its first model call
                self.session = self._initial_session(request)
            self.first_step = request.first_step  # a fork continues its original's step count
        self.session.run_id = workflow.info().workflow_id  # so a resume from any process finds this run
        self.prompt = next((m.content for m in reversed(self.session.messages) if m.role == "user"), "")
        self.publisher.publish()
        return config, started

    async def _resume_wait(self, action: machine.Action, config: LoopConfig) -> bool:
        """A continuation of a waiting run waits on (True), unless a decision already settled it."""
        resumed, self.resuming = self.resuming, None
        if resumed is None:
            return False
        if resumed.type == "error":
            action = machine.Wait(interrupt=resumed)  # still waiting for `retry`
        if isinstance(action, machine.Wait):
            interrupt = action.interrupt.model_copy(update={"wait": resumed.wait})  # the same wait, the same id
            await self.waiting.wait_for_human(interrupt, config, resumed=True)
            return True
        self.waiting.stop_waiting()  # a decision delivered as this run started settled the wait
        return False

    async def _take(
        self, action: machine.CallModel | machine.RunTools | machine.Wait, config: LoopConfig, elapsed: float, started: float
    ) -> bool:
        """Carry out one action; True when the run waited for a person (its active time restarts)."""
        assert self.agent is not None
        what_if, next_step = self.what_if, self.first_step + len(self.steps)
        if what_if is not None and what_if.ends_before(self.session, action, next_step):
            return False
        if isinstance(action, machine.CallModel) and self.agent.compaction is not None:
            await self.worker_steps.compact_if_due(action, config)
        interrupt = None
        if self.agent.middleware:
            interrupt = await self.worker_steps.worker_step(action, config, elapsed)
        elif isinstance(action, machine.Wait) and what_if is not None:
            what_if.settles(self.session, action.interrupt, next_step, config, self.input_tools, self.approval_tools)
            return False
        elif isinstance(action, machine.Wait):
            self.carry.active_s = elapsed
            await self.waiting.wait_for_human(action.interrupt, config)
            return True
        elif isinstance(action, machine.CallModel):
            interrupt = await self.stages.call_model(action, config)
        else:
            await self.stages.run_tools(action.calls)
        if interrupt is None:
            return False
        if what_if is not None:
            what_if.settles(self.session, interrupt, self.first_step + len(self.steps), config, self.input_tools,
                            self.approval_tools)
            return False
        self.carry.active_s = self.carry.active_s + (workflow.time() - started)
        await self.waiting.wait_for_human(interrupt, config)
        return True

    async def _finish(self) -> dict[str, Any]:
        """The run ended (done or cancelled): publish the final status, let handlers finish, return."""
        self.status = "cancelled" if self.session.stop_reason == "cancelled" else "done"
        self.interrupt = None
        self.final = self.publisher.outcome()
        self.carry.pause += 1
        self.ended = True
        self.publisher.publish()
        self.emit(StreamChunk(type="done", finish_reason=self.final.stop_reason, usage=self.session.usage))
        self.readers.detach()  # stream readers drain the rest once the run has closed
        await self._settle()
        if self.status == "cancelled" and self.agent is not None and not closes_completed(self):
            await self._close_canceled()  # f732bd2's cancelled runs closed COMPLETED (rein.workflows.window)
        return self.final.model_dump(mode="json")

    async def _close_canceled(self) -> None:
        """End the run as CANCELED (raises), so the UI's list and filters show Temporal's own status; the
        outcome stays readable through the `outcome` query. Ended by the `cancel` signal or update, the
        run first asks Temporal to cancel it (a local activity): Temporal closes a workflow as CANCELED
        only once cancellation was requested."""
        if workflow.cancellation_reason() is None:
            try:
                await workflow.execute_local_activity(
                    CLOSE_CANCELED,
                    CloseCanceledInput(reason=self.cancel_reason or ""),
                    start_to_close_timeout=DESCRIBE_TIMEOUT,
                    retry_policy=RetryPolicy(maximum_attempts=5),
                    summary="close as cancelled",
                )
                await workflow.wait_condition(lambda: workflow.cancellation_reason() is not None)
            except asyncio.CancelledError:
                if workflow.cancellation_reason() is None:
                    raise  # not the requested cancellation (cache eviction): not ours to handle
            except FailureError as err:  # could not ask: it closes COMPLETED
                workflow.logger.warning("could not close the run as cancelled: %s", err)
                return
        raise asyncio.CancelledError(self.cancel_reason or "cancelled")

    async def _settle(self) -> None:
        """Let signal and update handlers finish before the run returns."""
        try:
            await workflow.wait_condition(workflow.all_handlers_finished)
        except asyncio.CancelledError:
            if not self.cancelled_natively():
                raise
            await workflow.wait_condition(workflow.all_handlers_finished)

    def _parse_input(self, raw: Any) -> AgentInput:
        try:
            if isinstance(raw, BaseModel):
                raw = raw.model_dump()
            return AgentInput.model_validate(raw)
        except (ValidationError, ValueError, TypeError) as exc:
            raise ApplicationError(
                f"Invalid AgentWorkflow input: {validation_text(exc, 'payload')}. Expected JSON like "
                '{"agent": "<registered agent name>", "prompt": "..."}',
                type="InvalidInput",
                non_retryable=True,
            ) from None

    def _initial_thread(self, request: AgentInput) -> None:
        """A thread's conversation starts with the system prompt, or a given Session (a fork of a thread: one in
        the middle of a turn goes on with that turn); a `prompt` is its first message."""
        assert self.agent is not None and self.thread is not None
        self.session = request.session or Session(messages=machine.new_session("", self.agent.system).messages[:-1])
        if request.session is not None and workflow.info().continued_run_id is None:
            machine.forget_pending_decisions(self.session)
        if request.session is not None and not self.session.done and self.session.stage != Stage.DONE:
            self.thread.turns, self.thread.open = 1, True
            self.thread.turn_first_step = request.first_step
        else:
            self.session.done, self.session.stop_reason = True, "done"
        if request.state is not None:  # a fork's: the state its original held at the fork's step
            self.thread.state, self.thread.state_version = request.state, 1
        if request.prompt:
            threads.take(self.thread, SendRequest(text=request.prompt), str(workflow.uuid4()), workflow.info().workflow_id, 0)

    def _initial_session(self, request: AgentInput) -> Session:
        assert self.agent is not None
        if request.session is None:
            return machine.new_session(request.prompt or "", self.agent.system)
        session = request.session
        if workflow.info().continued_run_id is None:
            # Only this run's own continuation may carry decisions; a client's Session may not.
            machine.forget_pending_decisions(session)
        if request.prompt is not None:
            machine.prepare_turn(session, request.prompt)
        return session


def _valid_input(args: Sequence[Any]) -> AgentInput | None:
    """The run's one input as an AgentInput; None when it is not one (`run` then says why, failing the run)."""
    if len(args) != 1:
        return None
    raw = args[0]
    try:
        return AgentInput.model_validate(raw.model_dump() if isinstance(raw, BaseModel) else raw)
    except (ValidationError, ValueError, TypeError):
        return None

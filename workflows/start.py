"""How a run learns its agent: recorded with its first model call (a lean start), or asked first.

A run follows the agent's description as its worker recorded it, so a deploy that changes the agent
does not change a run's past. A lean start schedules the first model call at once, with options that
depend on the input alone (the run's own queue, LoopConfig's defaults under the client's overrides), and
the worker that takes it records the description with the reply (FirstReply), having checked the
client's input against it. Where the agent's own options differ (another timeout or retry, a model
queue of REIN_MODEL_QUEUES) or its first step is not a plain model call (middleware, compaction), that
worker answers with the description only and the loop makes the call: what the worker could do is
that activity's recorded result, never read from the replaying worker. Every new conversation starts
lean; a run given a Session, a continuation or a thread asks `describe_agent` first. Runs of earlier
builds start as those builds started them, read from the build id of their first task
(rein.workflows.window).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from rein.core import machine
    from rein.core.config import LoopConfig
    from rein.core.contract import (
        CALL_MODEL,
        AgentDescription,
        AgentInput,
        FirstCall,
        FirstReply,
        ModelCallInput,
        apply_overrides,
        run_config,
    )
    from rein.core.digest import EMPTY, extend, message_hash
    from rein.core.ir import Message
    from rein.core.summaries import first_call_summary

from rein.workflows.options import describe_agent, heartbeat_timeout, model_retry, seconds
from rein.workflows.patches import PATCH_DESCRIBED_FIRST, PATCH_INBOX, PATCH_WAITING_TIMER
from rein.workflows.window import Start

INPUT_ERRORS = ("InvalidInput", "UnknownAgent")
"""What the worker's first call raises for a client's mistake: the run fails with it, as it did when asked first."""

if TYPE_CHECKING:
    from rein.workflows.publishing import Publisher
    from rein.workflows.stages import Stages
    from rein.workflows.state import RunState


class LeanStart:
    """Learning the agent at a run's start. A collaborator of the loop, on its state."""

    def __init__(self, run: RunState, publisher: Publisher, stages: Stages) -> None:
        self.run = run
        self.publisher = publisher
        self.stages = stages

    def _starts_lean(self, request: AgentInput) -> bool:
        """Ask in the run's first activation, from the input and the build its first task recorded
        (`run.first`, rein.workflows.window): a new conversation starts lean, unless an earlier build
        started it by asking its agent first (with no marker, or recorded as PATCH_DESCRIBED_FIRST)."""
        run = self.run
        if request.carry is not None or request.session is not None or request.thread:
            run.lean = False  # a thread's first turn opens with its first message, once the agent is known
        elif run.first is Start.MARKED:
            run.lean = not workflow.patched(PATCH_DESCRIBED_FIRST)  # that build's run recorded it or not
        else:
            run.lean = run.first is Start.LEAN
        return run.lean

    async def learn_agent(self, request: AgentInput) -> None:
        """Set `agent` and `config`; a lean start has made the first model call too, when the worker could."""
        run = self.run
        if not self._starts_lean(request):
            run.agent = await self._describe(request.agent)
            run.config = self._config(request)
            return
        run.session = machine.new_session(request.prompt or "", None)  # the system prompt is the worker's
        run.session.run_id = workflow.info().workflow_id
        run.prompt = request.prompt or ""
        self.publisher.publish()  # the current details; search attributes wait for the agent (which ones the server has)
        began = workflow.time()
        source, live = self.stages.next_model_call()
        digest = extend(EMPTY, [message_hash(m) for m in run.session.messages])
        first_call = ModelCallInput(
            agent=request.agent, new_messages=list(run.session.messages), digest=digest, stream=live,
            stream_source=source if live else "", asked_stream=self.stages.asked_stream(live), model=request.model or "",
            start=FirstCall(config=request.config or {}))
        options = self._first_call_options(request)
        try:
            result = await run.unless_cancelled(self.stages.until_fixed(
                "model call", lambda: workflow.execute_activity(CALL_MODEL, first_call, result_type=dict, **options),
                first_stuck=lambda: self._learn_to_publish(request.agent)))
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type in INPUT_ERRORS:
                if cause.details:  # what the failed status needs (AgentActivities._first_call)
                    run.agent = AgentDescription.model_validate(cause.details[0])
                raise ApplicationError(cause.message, type=cause.type, non_retryable=True) from None
            # Retries ran out (or the call failed for good): learn the agent as before, then the
            # failure is the first model call's (`error` interrupt, or the run fails).
            run.agent = await self._describe(request.agent)
            run.config = self._config(request)
            self._with_system_prompt()
            run.start_interrupt = self.stages.model_call_failed(err)
            return
        if result is None or "agent" not in result:
            # Cancelled meanwhile (the run ends as cancelled, with the agent known), or a worker of a build
            # from before lean starts took the call: it answered without the system prompt and described
            # nothing. Learn the agent as before; the loop calls the model again, as the agent says.
            run.agent = await self._describe(request.agent)
            run.config = self._config(request)
            self._with_system_prompt()
            return
        first = FirstReply.model_validate(result)
        run.agent = first.agent
        run.config = self._config(request)
        self._with_system_prompt()
        if first.reply is not None:  # else the worker left the call to the loop (its next action)
            total = len(run.session.messages)
            digest = extend(EMPTY, [message_hash(m) for m in run.session.messages])
            # The call carried no version (the run knew none): the tool calls of its reply carry the agent's,
            # so a worker whose definition changed since refuses them (AGENT_CHANGED) as it would any call.
            self.stages.took_reply(first.reply, live, source, total, digest, began, version="")
            # ... and travel whole: a worker of a build from before lean starts cannot find them by
            # reference in this reply (it reads history for plain replies only).
            run.reply_calls = set()
            self.publisher.progressed = True

    async def _learn_to_publish(self, agent: str) -> None:
        """The first call is stuck on a bug in rein: the run's search attributes (`stuck`) need its agent."""
        self.run.agent = await self._describe(agent)

    def _with_system_prompt(self) -> None:
        run = self.run
        assert run.agent is not None
        if run.agent.system:
            run.session.messages.insert(0, Message(role="system", content=run.agent.system))

    def _first_call_options(self, request: AgentInput) -> dict[str, Any]:
        """The options of a lean start's first call, from the input alone: the run's own queue and LoopConfig's
        defaults under the client's overrides. The worker that takes the call checks them against the agent
        and, where they differ, answers with the description only (AgentActivities._first_call)."""
        config = LoopConfig()
        if request.config:
            try:
                config = apply_overrides(config, request.config, ["*"])
            except ValueError:
                pass  # the worker refuses the input, with the reason
        return {
            "start_to_close_timeout": seconds(config.model_timeout_s),
            "heartbeat_timeout": heartbeat_timeout(config),
            "retry_policy": model_retry(config),
            "summary": first_call_summary(request.agent, request.model or ""),
        }

    async def _describe(self, agent: str) -> AgentDescription:
        """The describe_agent local activity. The patches a wait asks (the waiting timer's, the inbox's) are asked
        first: a local activity may resolve in an earlier activation on replay than it did live, so a patch asked
        right after it (a wait that follows at once: a Session with a pending call, a continuation, a failed first
        call) would be asked where the replay has not seen its marker yet."""
        run = self.run
        def describe() -> Awaitable[AgentDescription]:
            return describe_agent(agent, f"describe agent {agent}")

        workflow.patched(PATCH_WAITING_TIMER)
        workflow.patched(PATCH_INBOX)
        try:
            return await self.stages.until_fixed("describe agent", describe)
        except asyncio.CancelledError:
            if not run.cancelled_natively():
                raise
            return await self.stages.until_fixed("describe agent", describe)  # the loop then ends the run as cancelled

    def _config(self, request: AgentInput) -> LoopConfig:
        assert self.run.agent is not None
        try:
            return run_config(self.run.agent, request.model, request.config)
        except ValueError as exc:
            raise ApplicationError(str(exc), type="InvalidInput", non_retryable=True) from None

"""Worker side of middleware, hooks, events and compaction in durable runs.

An agent with middleware has each step run whole on the worker, where its live
objects are: `rein.call_model` / `rein.run_tool` rebuild the Session, run
`rein.blueprint.middleware.run_step` (the same code the in-process runner uses) and send
back what the step did as a `StepOutcome` (a patch of the Session, Steps, an
interrupt). `rein.compact` runs the agent's compaction strategy.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from rein.activities import answers
from rein.activities import calls as on_worker
from rein.activities.failures import VendorFailure
from rein.blueprint.middleware import StepContext, run_step
from rein.core import machine
from rein.core.contract import CompactResult, ModelCallInput, StepOutcome, StepRequest, ToolCallInput
from rein.core.ir import Completion, Message, ToolCall, ToolResult
from rein.temporal import streaming

if TYPE_CHECKING:
    from rein.activities.conversations import Conversations
    from rein.blueprint.agent import Agent


async def model_step(conversations: Conversations, agent: Agent, request: ModelCallInput) -> StepOutcome:
    assert request.step is not None
    return await _run(conversations, agent, request.step, request)


async def tool_step(conversations: Conversations, agent: Agent, request: ToolCallInput) -> StepOutcome:
    assert request.step is not None
    model_request = ModelCallInput(agent=request.agent, new_messages=[], run_id=request.run_id)
    return await _run(conversations, agent, request.step, model_request)


async def compact(conversations: Conversations, agent: Agent, request: ModelCallInput) -> CompactResult:
    """Run the agent's strategy on the run's conversation; None when it changed nothing."""
    if agent.compaction is None:
        return CompactResult()
    messages = await conversations.messages_for(request)
    try:
        async with on_worker.heartbeating():
            compacted = await agent.compaction.compact([m.model_copy(deep=True) for m in messages])
    except Exception as exc:
        # A summarizer's provider error: retried when transient; otherwise the run fails, as in-process.
        raise on_worker.model_failure(request.run_id, exc, agent.model_label) from None
    if compacted == messages:
        return CompactResult()
    token = uuid.uuid4().hex
    conversations.remember(request.run_id, token, compacted)
    return CompactResult(messages=compacted, conversation=token)


async def _run(conversations: Conversations, agent: Agent, step: StepRequest, model_request: ModelCallInput) -> StepOutcome:
    """The step in the middleware, as in-process; the core calls the model or runs tools as the Session says."""
    before = await conversations.messages_for(step)
    # Deep copies: middleware may edit messages in place, and the diff compares against `before`.
    session = step.state.model_copy(update={"messages": [m.model_copy(deep=True) for m in before]})
    ctx = StepContext(session, session.stage, step.config, answers.provider_for(agent, model_request.model), agent.registry)
    ctx.emit = _emitter(step.run_id)
    failures: list[BaseException] = []

    async def call_model(messages: list[Message]) -> Completion:
        try:
            return await answers.complete(agent, messages, model_request)
        except VendorFailure as failure:  # the middleware sees the vendor's own exception, as in-process
            cause = failure.__cause__ or failure
            failures.append(cause)
            raise cause from None
        except Exception as exc:
            failures.append(exc)
            raise

    async def run_tools(calls: list[ToolCall]) -> list[ToolResult]:
        return list(await asyncio.gather(*(on_worker.run_call(agent, call, step.run_id,
                                                              key_batch=machine.key_batch(ctx.session, call.id))
                                           for call in calls)))

    try:
        async with on_worker.heartbeating():
            ctx = await run_step(
                ctx,
                agent.middlewares,
                elapsed=lambda: step.elapsed_s,
                input_tools=frozenset(step.input_tools),
                approval_tools=frozenset(step.approval_tools),
                call_model=call_model,
                run_tools=run_tools,
            )
    except ApplicationError:
        raise  # a tool asking Temporal for another attempt
    except Exception as exc:
        # A fatal provider error or a bug in middleware: in-process it ends the run, so it does here.
        raise on_worker.model_failure(step.run_id, exc, model_request.model or agent.model_label) from None
    if failures and ctx.interrupt is not None and ctx.interrupt.type == "error":
        # The core turned a transient provider error into an `error` interrupt, as in-process. While
        # attempts remain, Temporal retries the step instead; the last attempt reports the interrupt.
        if activity.info().attempt < step.config.model_attempts:
            raise on_worker.model_failure(step.run_id, failures[-1], model_request.model or agent.model_label)
    outcome = StepOutcome.between(before, ctx.session, ctx.steps, ctx.interrupt, uuid.uuid4().hex)
    conversations.remember(step.run_id, outcome.conversation or step.conversation, ctx.session.messages)
    return outcome


def _emitter(run_id: str) -> Any:
    def emit(event: str, ctx: StepContext) -> None:
        publish_event(
            run_id,
            {
                "event": event,
                "stage": ctx.stage.value,
                "steps": [s.model_dump(mode="json") for s in ctx.steps],
                "interrupt": ctx.interrupt.model_dump(mode="json") if ctx.interrupt else None,
            },
        )

    return emit


def publish_event(run_id: str, event: dict[str, Any]) -> None:
    """Put one `agent.on` event on the run's stream."""
    activity.logger.debug("event %s for %s", event["event"], run_id)
    streaming.publish_event(event["event"], event)

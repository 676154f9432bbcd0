"""A model call's answer: the provider's `complete`, or its `stream` when the run asked for a stream
or the stream is the same answer (rein.blueprint.providers.base.streams_its_answer); a streamed answer goes
on the run's stream while someone reads it (rein.temporal.streaming.live_once_read)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from rein.activities.failures import VendorFailure, from_vendor, vendor_stream
from rein.blueprint.providers.base import streams, streams_its_answer
from rein.blueprint.providers.fallback import FallbackProvider
from rein.core.contract import ModelCallInput
from rein.core.ir import Completion, Message, StreamChunk, StreamFold
from rein.temporal.streaming import ModelText, current_stream, live_once_read
from rein.tracing.activity_spans import chat_span

if TYPE_CHECKING:
    from rein.blueprint.agent import Agent


async def complete(agent: Agent, messages: list[Message], request: ModelCallInput) -> Completion:
    """One completion from the agent's provider, with the output type's verdict attached (its
    text published to the run's stream while someone reads it: see `answer`)."""
    completion, _ = await answer(agent, messages, request)
    return completion


async def answer(agent: Agent, messages: list[Message], request: ModelCallInput) -> tuple[Completion, bool]:
    """The completion, and whether it went onto the run's stream from here.

    What the run records must not depend on whether anyone reads it, and a provider's `complete` is
    its answer: the call streams only when the run asked (`request.stream`) or when the provider's
    stream is that same answer. Then whether anyone reads is known only as the model answers
    (`live_once_read`): the text so far goes out whole and the rest as it comes.
    """
    provider = provider_for(agent, request.model)
    answered_by = None
    if isinstance(provider, FallbackProvider):
        # One provider per activity attempt: Temporal's retries walk the chain, nothing sleeps here.
        provider = provider.for_attempt(activity.info().attempt)
        answered_by = getattr(provider, "model", None) or type(provider).__name__
    async with chat_span(answered_by or agent.model_label, agent.name) as traced:
        completion, published = await _completion(provider, agent, messages, request)
        traced(completion)
    if answered_by is not None:
        completion = completion.model_copy(update={"model": answered_by})
    return (agent.output.check(completion) if agent.output is not None else completion), published


async def _completion(provider: Any, agent: Agent, messages: list[Message], request: ModelCallInput) -> tuple[Completion, bool]:
    tools = [*await from_vendor(agent.model_tool_specs()), *request.tools] or None  # MCP servers may list them;
    # `request.tools`: a thread turn's client tools (rein.core.threads), offered beside the agent's own
    stream = current_stream()
    asked = request.stream if request.asked_stream is None else request.asked_stream
    streamed = streams(provider) and (asked or streams_its_answer(provider))
    if stream is None or not (streamed or request.stream):  # the workflow publishes the answer whole
        return await from_vendor(provider.complete(messages, tools=tools)), False
    info = activity.info()
    out = ModelText(stream, request.stream_source or f"{(info.workflow_run_id or '')[-8:]}/a{info.activity_id}", live=request.stream)
    completion = None
    if streamed:
        async with live_once_read(out):
            completion = await _streamed_completion(provider, messages, tools, out)
    if completion is None:  # `complete` (or a stub `stream`): one whole answer, published live when asked
        whole: Completion = await from_vendor(provider.complete(messages, tools=tools))
        _publish_whole(whole, out)
        return whole, out.live
    return completion, out.live


def provider_for(agent: Agent, model: str) -> Any:
    """The agent's provider, or the run's model override on it; a switch that cannot be made is final."""
    try:
        return agent.provider_for(model or None)
    except ValueError as exc:  # ModelNotSwitchable, or a switch across vendors with pinned settings
        raise ApplicationError(str(exc), type="ModelNotSwitchable", non_retryable=True) from None


def _publish_whole(completion: Completion, out: ModelText) -> None:
    if completion.message.reasoning:
        out.reasoning(StreamChunk(type="reasoning", text=completion.message.reasoning))
    if completion.message.content:
        out.text(StreamChunk(type="text", text=completion.message.content))
    if completion.message.tool_calls:
        out.tool_calls(StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls))


async def _streamed_completion(provider: Any, messages: list[Message], tools: Any, out: ModelText) -> Completion | None:
    """The provider's stream, published while someone reads as it is assembled; None when `stream`
    is a stub (it yields something other than StreamChunks, or nothing and no `done`): the
    Provider protocol asks for both methods, and some providers answer only in `complete`."""
    fold = StreamFold()
    said = finished = False
    async for chunk in vendor_stream(provider.stream(messages, tools=tools)):
        if not isinstance(chunk, StreamChunk):
            if said:  # the provider broke its contract: its failure, not rein's
                raise VendorFailure(f"the provider's stream yielded {type(chunk).__name__}, not a StreamChunk") from None
            return None
        finished = finished or chunk.type == "done"
        if fold.add(chunk):
            said = True
            if chunk.type == "text":
                out.text(chunk)
            elif chunk.type == "reasoning":
                out.reasoning(chunk)
            else:
                out.tool_calls(chunk)
    return fold.completion() if said or finished else None



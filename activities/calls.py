"""What one model-call failure and one tool call are on the worker, for every path that makes them:
the plain activities (rein.activities.agents) and the whole steps of agents with middleware
(rein.activities.steps). Also the heartbeat that lets a lost worker's call go elsewhere quickly.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from rein.activities.failures import tool_ran
from rein.blueprint.providers.errors import failure_message, retry_after_s
from rein.blueprint.providers.fallback import is_retryable
from rein.blueprint.secrets import scrub
from rein.blueprint.tools import NO_THREAD, ToolContext, execute_tool
from rein.core import machine, shared_state
from rein.core.contract import ToolCallInput
from rein.core.ir import ToolCall, ToolResult
from rein.core.shared_state import STATE_QUERY, SharedState, StateError
from rein.tracing.activity_spans import tool_span

if TYPE_CHECKING:
    from rein.blueprint.agent import Agent

HEARTBEAT_EVERY_S = 5.0

_LATEST_DETAILS: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("rein_heartbeat_details", default=None)
"""The details a tool last reported with `ToolContext.heartbeat` in this activity."""

@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat in the background so a lost worker's call is retried elsewhere quickly. Each beat
    repeats the details a tool last reported: an empty beat would erase them on the server.

    Beats come every HEARTBEAT_EVERY_S, or four times per heartbeat timeout when that is shorter
    (LoopConfig.heartbeat_timeout_s). The first comes after one interval, not at once: the timeout
    counts from the start anyway, and a call that ends sooner (most tool calls) costs the server
    no heartbeat RPC. Local activities cannot heartbeat; their start-to-close timeout covers them.
    """
    info = activity.info()
    if info.is_local:
        yield
        return
    timeout = info.heartbeat_timeout.total_seconds() if info.heartbeat_timeout else HEARTBEAT_EVERY_S * 4
    every = min(HEARTBEAT_EVERY_S, timeout / 4)
    latest: list[Any] = []
    token = _LATEST_DETAILS.set(latest)
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle  # the next beat's (set below, after beat exists)

    def beat() -> None:  # a timer, not a task: most calls end before the first beat, and cost only this
        nonlocal timer
        activity.heartbeat(*latest)
        timer = loop.call_later(every, beat)

    timer = loop.call_later(every, beat)
    try:
        yield
    finally:
        timer.cancel()
        _LATEST_DETAILS.reset(token)

def model_failure(run_id: str, exc: BaseException, model: str = "the model") -> ApplicationError:
    """A provider error as Temporal sees it: retried when transient (after the vendor's Retry-After,
    when it gave one), fatal otherwise; secrets scrubbed."""
    retryable = is_retryable(exc)
    wait = retry_after_s(exc) if retryable else None
    return ApplicationError(
        scrub(failure_message(exc, model)),
        type=type(exc).__name__,
        non_retryable=not retryable,
        next_retry_delay=timedelta(seconds=wait) if wait is not None else None,
    )

def heartbeat_from_any_thread() -> Any:
    """`activity.heartbeat` that also works from a sync tool's worker thread (it needs the activity's loop).

    A no-op in a local activity (`@tool(local=True)`): those cannot heartbeat.
    """
    if activity.info().is_local:
        return lambda *details: None
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    latest = _LATEST_DETAILS.get()

    def beat(*details: Any) -> None:
        details = tuple(scrub(d) if isinstance(d, str) else d for d in details)  # they reach history
        if latest is not None:
            latest[:] = details
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is loop:
            activity.heartbeat(*details)
        else:
            loop.call_soon_threadsafe(activity.heartbeat, *details, context=context)

    return beat

async def run_call(agent: Agent, call: ToolCall, run_id: str, request: ToolCallInput | None = None,
                   key_batch: int = 0) -> ToolResult:
    """Run one tool call in an activity; raises (so Temporal retries) only while the tool has retries left. A
    thread's call (`request.state_version` set) gives a tool that takes a ToolContext the thread's shared state,
    and its change comes back in the result (`state_patch`)."""
    tool = await agent.find_tool(call.name)
    info = activity.info()
    state = await _thread_state(request) if tool is not None and tool.context_param and request is not None \
        else NO_THREAD
    context = ToolContext(
        idempotency_key=machine.idempotency_key(run_id, call.id, request.key_batch if request is not None else key_batch),
        attempt=info.attempt,
        tool_call_id=call.id,
        heartbeat=heartbeat_from_any_thread(),
        state=state,
    )
    may_retry = tool is not None and info.attempt <= tool.retries
    started = time.monotonic()
    async with tool_span(call) as traced:
        try:
            result = await execute_tool(tool, call, context, raise_errors=may_retry, available=await agent.tool_names())
        except Exception as exc:
            raise ApplicationError(
                scrub(f"Tool '{call.name}' failed on attempt {info.attempt}: {type(exc).__name__}: {exc}"),
                type=type(exc).__name__,
            ) from None
        result = _with_state_change(result.model_copy(update={"content": scrub(result.content)}), context)
        tool_ran(result)
        traced(result)
    activity.logger.debug("tool %s finished in %.3fs", call.name, time.monotonic() - started)
    return result


async def _thread_state(request: ToolCallInput) -> Any:
    """The thread's shared state for a tool that may read it: given (a local activity), `{}` (never set), or read
    from the run (the `rein.state` query: no history event); NO_THREAD outside a thread."""
    if request.state_version is None:
        return NO_THREAD
    if request.state is not None:
        return request.state
    if request.state_version == 0:
        return {}
    info = activity.info()
    raw = await activity.client().get_workflow_handle(info.workflow_id or request.run_id).query(STATE_QUERY)
    return SharedState.model_validate(raw).value


def _with_state_change(result: ToolResult, context: ToolContext) -> ToolResult:
    """The result with the tool's change to the thread's state (a JSON Patch), or saying why the change was not
    kept (not JSON, more than MAX_STATE_BYTES): the tool's own result stands either way."""
    try:
        patch = context.state_patch()
        if patch:
            shared_state.check(context.state)
    except StateError as refused:
        return result.model_copy(update={"content": f"{result.content}\n(The tool's change to the thread's state "
                                                    f"was not kept: {refused}.)"})
    return result.model_copy(update={"state_patch": patch}) if patch else result

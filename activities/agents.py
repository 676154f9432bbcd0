"""The activities a rein worker runs for its registered agents.

Activity names are permanent data (see rein.contract). Each takes one typed
input object. Provider and tool objects live only here, in the worker; the
workflow sees names, specs and results.
"""

from __future__ import annotations

import asyncio
import contextvars
from datetime import timedelta
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from rein.activities import steps
from rein.contract import (
    CALL_MODEL,
    COMPACT,
    DESCRIBE_AGENT,
    RUN_TOOL,
    AgentDescription,
    CompactResult,
    DescribeInput,
    ModelCallInput,
    StepOutcome,
    StepRequest,
    ToolCallInput,
    ToolInfo,
)
from rein.compaction import trigger_of
from rein.config import LoopConfig
from rein.ir import Completion, Message, StreamFold, ToolCall, ToolResult
from rein.providers.errors import failure_message, retry_after_s
from rein.providers.fallback import FallbackProvider, is_retryable
from rein.temporal.streaming import ModelText, activity_stream, current_stream
from rein.secrets import scrub
from rein.session import Session
from rein.tools import ToolContext, execute_tool

if TYPE_CHECKING:
    from rein.agent import Agent

HEARTBEAT_EVERY_S = 5.0


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat in the background so a lost worker's call is retried elsewhere quickly."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_EVERY_S)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


class Conversations:
    """Each run's conversation as this worker last saw it, so model calls carry only new messages.

    Bounded (least recently used runs are dropped); a miss is never an error,
    it only costs one `session` query to the workflow. An entry is tagged with the
    run's `conversation` token, which changes when the run rewrites its messages
    (compaction, middleware), so a copy from before a rewrite is never served.
    """

    def __init__(self, capacity: int = 512):
        self.capacity = capacity
        self._runs: OrderedDict[str, tuple[str, list[Message]]] = OrderedDict()

    async def messages_for(self, request: ModelCallInput | StepRequest) -> list[Message]:
        key = request.run_id  # the workflow id: the conversation carries over continue-as-new
        token, known = self._runs.pop(key, ("", None))
        if token != request.conversation or request.first_index == 0:
            known = None
        if known is not None and len(known) == request.first_index:
            known = known + request.new_messages
        if known is None or len(known) != request.total:
            known = await _conversation_from_workflow(request)
        self.remember(request.run_id, request.conversation, known)
        return known

    def remember(self, run_id: str, conversation: str, messages: list[Message]) -> None:
        """The run's conversation is now `messages` (the worker produced or rewrote them)."""
        self._runs.pop(run_id, None)
        self._runs[run_id] = (conversation, messages)
        while len(self._runs) > self.capacity:
            self._runs.popitem(last=False)


async def _conversation_from_workflow(request: ModelCallInput | StepRequest) -> list[Message]:
    if request.first_index == 0:
        return list(request.new_messages)
    handle = activity.client().get_workflow_handle(request.run_id, run_id=request.workflow_run_id or None)
    session = Session.model_validate(await handle.query("session"))
    return session.messages[: request.total]


class AgentActivities:
    def __init__(self, agents: Mapping[str, Agent], search_attributes: Any = None):
        self.agents = agents
        self.search_attributes = search_attributes
        """An async callable returning the rein search attributes the server has."""
        self.conversations = Conversations()

    def _agent(self, name: str) -> Agent:
        agent = self.agents.get(name) or self.agents.get(name.split("#", 1)[0]) or _tool_agent(self.agents, name)
        if agent is None:
            served = ", ".join(sorted(self.agents)) or "(none)"
            raise ApplicationError(
                f"Unknown agent '{name}'. This worker serves: {served}. "
                "Register it with `python worker.py --agent module:attr`.",
                type="UnknownAgent",
                non_retryable=True,
            )
        return agent

    @activity.defn(name=DESCRIBE_AGENT)
    async def describe_agent(self, request: DescribeInput) -> AgentDescription:
        available = await self.search_attributes() if self.search_attributes else []
        if not request.agent:  # a run that failed before it knew its agent: only the search attributes
            return AgentDescription(name="", model="", config=LoopConfig(), search_attributes=list(available))
        agent = self._agent(request.agent)
        tools = await agent.tools_for_run()  # lists the agent's MCP servers, so the run records their specs
        return AgentDescription(
            name=request.agent.split("#", 1)[0],
            model=agent.model_label,
            system=agent.system,
            config=agent.config,
            tools=[
                ToolInfo(
                    spec=t.spec(),
                    retries=t.retries,
                    timeout_s=t.timeout_s,
                    asks_human=t.asks_human,
                    agent=t.agent.name if t.agent is not None else None,
                    requires_approval=getattr(t, "requires_approval", False),
                )
                for t in tools
            ],
            search_attributes=list(available),
            client_overrides=sorted(agent.client_overrides),
            middleware=bool(agent.middlewares),
            compaction=trigger_of(agent.compaction) if agent.compaction is not None else None,
        )

    @activity.defn(name=CALL_MODEL)
    async def call_model(self, request: ModelCallInput) -> Completion | StepOutcome:
        agent = self._agent(request.agent)
        if request.step is not None:
            async with activity_stream():
                return await steps.model_step(self, agent, request)
        messages = await self.conversations.messages_for(request)
        try:
            async with heartbeating(), activity_stream():
                return await complete(agent, messages, request)
        except Exception as exc:
            raise model_failure(request.run_id, exc, agent.model_label) from None

    @activity.defn(name=RUN_TOOL)
    async def run_tool(self, request: ToolCallInput) -> ToolResult | StepOutcome:
        agent = self._agent(request.agent)
        async with activity_stream():  # middleware and hooks may publish events (publish_event)
            if request.step is not None:
                return await steps.tool_step(self, agent, request)
            async with heartbeating():
                return await run_call(agent, request.call, request.run_id)

    @activity.defn(name=COMPACT)
    async def compact(self, request: ModelCallInput) -> CompactResult:
        return await steps.compact(self, self._agent(request.agent), request)

    def definitions(self) -> list[Any]:
        """The activity functions a Worker registers."""
        return [self.describe_agent, self.call_model, self.run_tool, self.compact]


def _tool_agent(agents: Mapping[str, Agent], name: str) -> Agent | None:
    """An agent one of the served agents uses as a tool (`Agent.as_tool`), found by its name."""
    seen: set[int] = set()
    todo = list(agents.values())
    while todo:
        agent = todo.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        for tool in agent.registry:
            if tool.agent is not None:
                if tool.agent.name == name:
                    return tool.agent
                todo.append(tool.agent)
    return None


async def complete(agent: Agent, messages: list[Message], request: ModelCallInput) -> Completion:
    """One completion from the agent's provider (its text published live to the run's stream when
    the run streams), with the output type's verdict attached."""
    provider = agent._resolve_provider()
    answered_by = None
    if isinstance(provider, FallbackProvider):
        # One provider per activity attempt: Temporal's retries walk the chain, nothing sleeps here.
        provider = provider.for_attempt(activity.info().attempt)
        answered_by = getattr(provider, "model", None) or type(provider).__name__
    tools = await agent.model_tool_specs() or None
    stream = current_stream()
    if request.stream and stream is not None:
        info = activity.info()
        source = request.stream_source or f"{info.workflow_run_id}/{info.activity_id}"
        completion = await _streamed_completion(provider, messages, tools, ModelText(stream, source))
    else:
        completion = await provider.complete(messages, tools=tools)
    if answered_by is not None:
        completion = completion.model_copy(update={"model": answered_by})
    return agent.output.check(completion) if agent.output is not None else completion


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
    """`activity.heartbeat` that also works from a sync tool's worker thread (it needs the activity's loop)."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()

    def beat(*details: Any) -> None:
        details = tuple(scrub(d) if isinstance(d, str) else d for d in details)  # they reach history
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is loop:
            activity.heartbeat(*details)
        else:
            loop.call_soon_threadsafe(activity.heartbeat, *details, context=context)

    return beat


async def run_call(agent: Agent, call: ToolCall, run_id: str) -> ToolResult:
    """Run one tool call in an activity; raises (so Temporal retries) only while the tool has retries left."""
    tool = await agent.find_tool(call.name)
    info = activity.info()
    context = ToolContext(
        idempotency_key=f"{run_id}/{call.id}",
        attempt=info.attempt,
        tool_call_id=call.id,
        heartbeat=heartbeat_from_any_thread(),
    )
    may_retry = tool is not None and info.attempt <= tool.retries
    started = time.monotonic()
    try:
        result = await execute_tool(tool, call, context, raise_errors=may_retry, available=await agent.tool_names())
    except Exception as exc:
        raise ApplicationError(
            scrub(f"Tool '{call.name}' failed on attempt {info.attempt}: {type(exc).__name__}: {exc}"),
            type=type(exc).__name__,
        ) from None
    activity.logger.debug("tool %s finished in %.3fs", call.name, time.monotonic() - started)
    return result.model_copy(update={"content": scrub(result.content)})


async def _streamed_completion(provider: Any, messages: list[Message], tools: Any, out: ModelText) -> Completion:
    """The provider's stream, published live to the run's stream while it is assembled."""
    fold = StreamFold()
    async for chunk in provider.stream(messages, tools=tools):
        if fold.add(chunk):
            if chunk.type == "text":
                out.text(chunk)
            else:
                out.tool_calls(chunk)
    return fold.completion()

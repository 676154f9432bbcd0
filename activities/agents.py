"""The activities a rein worker runs for its registered agents.

Activity names are permanent data (see rein.contract). Each takes one typed
input object. Provider and tool objects live only here, in the worker; the
workflow sees names, specs and results.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from rein import local_bus
from rein.contract import (
    CALL_MODEL,
    DESCRIBE_AGENT,
    RUN_TOOL,
    AgentDescription,
    DescribeInput,
    ModelCallInput,
    ToolCallInput,
    ToolInfo,
)
from rein.config import LoopConfig
from rein.ir import Completion, Message, StreamFold, ToolResult
from rein.providers.fallback import is_retryable
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
    it only costs one `session` query to the workflow.
    """

    def __init__(self, capacity: int = 512):
        self.capacity = capacity
        self._runs: OrderedDict[str, list[Message]] = OrderedDict()

    async def messages_for(self, request: ModelCallInput) -> list[Message]:
        key = request.run_id  # the workflow id: the conversation carries over continue-as-new
        known = self._runs.pop(key, None)
        if known is not None and len(known) == request.first_index:
            known = known + request.new_messages
        if known is None or len(known) != request.total:
            known = await _conversation_from_workflow(request)
        self._runs[key] = known
        while len(self._runs) > self.capacity:
            self._runs.popitem(last=False)
        return known


async def _conversation_from_workflow(request: ModelCallInput) -> list[Message]:
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

    def definitions(self) -> list[Any]:
        """The activity functions a Worker registers."""
        return [self.describe_agent, self.call_model, self.run_tool]

    def _agent(self, name: str) -> Agent:
        agent = self.agents.get(name) or self.agents.get(name.split("#", 1)[0])
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
                    requires_approval=getattr(t, "requires_approval", False),
                )
                for t in agent.registry
            ],
            search_attributes=list(available),
            client_overrides=sorted(agent.client_overrides),
        )

    @activity.defn(name=CALL_MODEL)
    async def call_model(self, request: ModelCallInput) -> Completion:
        agent = self._agent(request.agent)
        provider = agent._resolve_provider()
        tools = await agent.model_tool_specs() or None
        messages = await self.conversations.messages_for(request)
        try:
            async with heartbeating():
                if request.stream and local_bus.has_listener(request.run_id):
                    completion = await _streamed_completion(provider, messages, request.run_id, tools)
                else:
                    completion = await provider.complete(messages, tools=tools)
        except Exception as exc:
            retryable = is_retryable(exc)
            if not retryable:
                local_bus.record_error(request.run_id, exc)
            raise ApplicationError(
                scrub(f"{type(exc).__name__}: {exc}"), type=type(exc).__name__, non_retryable=not retryable
            ) from None
        return agent.output.check(completion) if agent.output is not None else completion

    @activity.defn(name=RUN_TOOL)
    async def run_tool(self, request: ToolCallInput) -> ToolResult:
        agent = self._agent(request.agent)
        tool = agent.registry.get(request.call.name)
        info = activity.info()
        context = ToolContext(
            idempotency_key=f"{request.run_id}/{request.call.id}",
            attempt=info.attempt,
            tool_call_id=request.call.id,
            heartbeat=activity.heartbeat,
        )
        may_retry = tool is not None and info.attempt <= tool.retries
        started = time.monotonic()
        try:
            async with heartbeating():
                result = await execute_tool(
                    tool, request.call, context, raise_errors=may_retry, available=agent.registry.names()
                )
        except Exception as exc:
            raise ApplicationError(
                scrub(f"Tool '{request.call.name}' failed on attempt {info.attempt}: {type(exc).__name__}: {exc}"),
                type=type(exc).__name__,
            ) from None
        activity.logger.debug("tool %s finished in %.3fs", request.call.name, time.monotonic() - started)
        return result.model_copy(update={"content": scrub(result.content)})


async def _streamed_completion(provider: Any, messages: list[Message], run_id: str, tools: Any) -> Completion:
    out = local_bus.AttemptStream(run_id, activity.info().activity_id)
    fold = StreamFold()
    async for chunk in provider.stream(messages, tools=tools):
        if fold.add(chunk):
            if chunk.type == "text":
                out.text(chunk)
            else:
                out.other(chunk)
    out.finished()
    return fold.completion()

"""The activities a rein worker runs for its registered agents.

Activity names are permanent data (see rein.core.contract). Each takes one typed
input object. Provider and tool objects live only here, in the worker; the
workflow sees names, specs and results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.exceptions import ApplicationError

from rein.activities import decisions, policy, steps, webhook
from rein.activities.agent_check import AgentIdentity
from rein.activities.answers import answer
from rein.activities.calls import heartbeat_from_any_thread, heartbeating, model_failure, run_call  # noqa: F401
from rein.activities.conversations import Conversations
from rein.activities.failures import VendorFailure, rein_code
from rein.blueprint.agent import with_tool_agents
from rein.core import machine
from rein.core.config import LoopConfig
from rein.core.contract import (
    CALL_MODEL,
    CLOSE_CANCELED,
    COMPACT,
    DESCRIBE_AGENT,
    PASS_DECISION,
    PAYLOAD_TOO_LARGE,
    RUN_TOOL,
    AgentDescription,
    CloseCanceledInput,
    CompactResult,
    DescribeInput,
    ModelCallInput,
    PassDecisionInput,
    StepOutcome,
    ToolCallInput,
    apply_overrides,
    recorded_reply,
    run_config,
)
from rein.core.digest import call_hash, ref
from rein.core.ir import Completion, Message, ToolCall, ToolResult
from rein.core.session import Session
from rein.durable.fleet import routed_queue
from rein.temporal.storage import INLINE_LIMIT
from rein.temporal.streaming import activity_stream
from rein.workflows.options import heartbeat_timeout, seconds

if TYPE_CHECKING:
    from rein.blueprint.agent import Agent

def _with_run(request: Any) -> Any:
    """The request with the calling workflow's ids filled in (the workflow leaves them out)."""
    if request.run_id:
        return request
    info = activity.info()
    update = {"run_id": info.workflow_id}
    if hasattr(request, "workflow_run_id"):
        update["workflow_run_id"] = info.workflow_run_id
    return request.model_copy(update=update)


async def _call_from_workflow(request: ToolCallInput) -> tuple[ToolCall, str]:
    """The referenced call, read from the history of the very run that scheduled this activity
    (another worker produced the model's reply, or this one restarted or forgot it), and the agent
    version that model call was sent with.

    The history, newest first, not the `session` query: a query waits for the workflow's
    worker, and after a lost worker (the usual cause of a miss) that costs the sticky queue's
    timeout, which can outlast a tool's whole timeout. The newest model reply holding a call
    with that reference is the one this run is running.
    """
    info = activity.info()
    client = activity.client()
    replies: dict[int, Any] = {}
    token = b""
    while True:
        page = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=info.namespace,
                # ids are None only for a standalone activity; "" is what protobuf sends for None
                execution=WorkflowExecution(workflow_id=info.workflow_id or "", run_id=info.workflow_run_id or ""),
                maximum_page_size=100,
                next_page_token=token,
            )
        )
        for event in page.history.events:
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                done = event.activity_task_completed_event_attributes
                replies[done.scheduled_event_id] = done.result
            elif (
                event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and event.activity_task_scheduled_event_attributes.activity_type.name == CALL_MODEL
                and event.event_id in replies
            ):
                call = await _call_in_reply(client, replies.pop(event.event_id), request.ref)
                if call is not None:
                    return call, await _version_sent(client, event)
        token = page.next_page_token
        if not token:
            break
    raise ApplicationError(
        f"No model reply of this run holds a tool call with the reference {request.ref!r}; nothing was run",
        type="UnknownToolCall",
        non_retryable=True,
    )


async def _version_sent(client: Any, scheduled: Any) -> str:
    """The agent version a model call's input carried ("" from older workflow code)."""
    try:
        [value] = await client.data_converter.decode(scheduled.activity_task_scheduled_event_attributes.input.payloads)
        return str(value.get("version") or "") if isinstance(value, dict) else ""
    except Exception:
        return ""


async def _call_in_reply(client: Any, result: Any, key: str) -> ToolCall | None:
    try:
        [value] = await client.data_converter.decode(result.payloads)
        calls = Completion.model_validate(recorded_reply(value)).message.tool_calls or []  # a text answer holds none
    except Exception:  # not a plain model reply (a step with middleware): it holds no referenced call
        return None
    return next((c for c in calls if ref(call_hash(c)) == key), None)


class AgentActivities(AgentIdentity):
    def __init__(
        self,
        agents: Mapping[str, Agent],
        search_attributes: Any = None,
        *,
        cache_size: int = 1000,
        max_payload_bytes: int = INLINE_LIMIT,
        route_models: bool = True,
    ):
        self.agents = agents
        self.route_models = route_models
        """Model calls go to their provider's queue where REIN_MODEL_QUEUES says so (ReinPlugin's route_models)."""
        self.search_attributes = search_attributes
        """An async callable returning the rein search attributes the server has."""
        self.conversations = Conversations(cache_size)
        self.max_payload_bytes = max_payload_bytes
        """The largest result this worker's converter can record; larger ones fail without retries."""
        self.described = {}

    def _agent(self, name: str) -> Agent:
        agent = self.agents.get(name) or self.agents.get(name.split("#", 1)[0]) or _tool_agent(self.agents, name)
        if agent is None:
            served = ", ".join(sorted(self.agents)) or "(none)"
            raise ApplicationError(
                f"Unknown agent '{name}'. This worker serves: {served}. "
                "Serve it with `rein worker --agent module:attr`.",
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
        description = await self._describe(request.agent, agent)
        # Not part of the agent's fingerprint: routing is the worker's deployment choice (REIN_MODEL_QUEUES);
        # the retired flags for the previous build's workflow code on a mixed queue (AgentDescription).
        return description.model_copy(update={
            "search_attributes": list(available), "model_queue": routed_queue(agent.model_label) if self.route_models else None,
            "close_canceled": True, "timed_counters": True, "notify_retry_s": webhook.retry_s(),
        })

    @activity.defn(name=CALL_MODEL)
    @rein_code
    async def call_model(self, request: ModelCallInput) -> Completion | StepOutcome | dict[str, Any]:
        request = _with_run(request)
        if request.start is not None:
            return await self._first_call(request)
        agent = self._agent(request.agent)
        await self._check_version(request.agent, request.version, agent)
        if request.step is not None:
            async with activity_stream():
                return await steps.model_step(self.conversations, agent, request)
        return await self._answer(agent, request, await self.conversations.messages_for(request))

    async def _first_call(self, request: ModelCallInput) -> dict[str, Any]:
        """A lean start's first call (rein.workflows.start): describe the agent, refuse a client's mistake
        before the model is called, and call it unless the run must take its first step itself. A refusal
        carries what the run needs to publish its failed status (the description, or the search attributes)."""
        assert request.start is not None
        try:
            agent = self._agent(request.agent)
        except ApplicationError as err:
            known = await self.describe_agent(DescribeInput(agent=""))
            raise ApplicationError(err.message, known.recorded(), type=err.type, non_retryable=True) from None
        description = await self.describe_agent(DescribeInput(agent=request.agent))
        try:
            config = run_config(description, request.model or None, request.start.config)
        except ValueError as exc:
            raise ApplicationError(str(exc), description.recorded(), type="InvalidInput", non_retryable=True) from None
        listed = {t.spec.name for t in description.tools} - set(agent.registry.names())  # from MCP servers
        recorded: dict[str, Any] = {"agent": description.recorded(whole=listed)}
        prompt = [m for m in request.new_messages if isinstance(m, Message)]
        system = [Message(role="system", content=description.system)] if description.system else []
        if not _first_call_is_the_runs(description, config, system + prompt, request.start.config):
            return recorded
        messages = system + await self.conversations.messages_for(request)
        self.conversations.remember_plain(request.run_id, messages)
        return {**recorded, "reply": await self._answer(agent, request, messages)}

    async def _answer(self, agent: Agent, request: ModelCallInput, messages: list[Message]) -> dict[str, Any]:
        try:
            async with heartbeating(), activity_stream():
                completion, published = await answer(agent, messages, request)
        except VendorFailure as failure:  # anything else is rein's own bug (activities.failures)
            raise model_failure(request.run_id, failure.__cause__ or failure, request.model or agent.model_label) from None
        self._check_size(completion, "The model's reply")
        if completion.message.tool_calls:
            self.conversations.produced(request.run_id, completion.message, request.version)
        else:
            self.conversations.drop(request.run_id)  # a final answer: the run ends here
        recorded = wire(completion)
        if published:  # so the workflow does not publish the answer again (ModelReply)
            recorded["published"] = True
        return recorded

    def _check_size(self, result: Completion | ToolResult, what: str) -> None:
        """Fail at once, without retries, when `result` is larger than this worker can record."""
        size = len(result.model_dump_json())
        if size > self.max_payload_bytes:
            raise ApplicationError(
                f"{what} is {size} bytes, more than the {self.max_payload_bytes} bytes this worker can record "
                "(REIN_STORAGE_MAX_BYTES, or Temporal's 2 MB limit without external storage)",
                type=PAYLOAD_TOO_LARGE,
                non_retryable=True,
            )

    @activity.defn(name=RUN_TOOL)
    @rein_code
    async def run_tool(self, request: ToolCallInput) -> ToolResult | StepOutcome | str | dict[str, Any]:
        request = _with_run(request)
        agent = self._agent(request.agent)
        async with activity_stream():  # middleware and hooks may publish events (publish_event)
            if request.step is not None:
                await self._check_version(request.agent, request.version, agent)
                return await steps.tool_step(self.conversations, agent, request)
            async with heartbeating():
                call, version = (request.call, "") if request.call else self.conversations.call(request.run_id, request.ref)
                if call is None:
                    self.conversations.rebuilds += 1
                    call, version = await _call_from_workflow(request)
                await self._check_version(request.agent, request.version or version, agent)
                result = await run_call(agent, call, request.run_id, request)
        self._check_size(result, f"The result of tool '{call.name}'")
        self.conversations.produced(request.run_id, Message(role="tool", tool_call_id=call.id, content=result.content))
        return wire(result)

    @activity.defn(name=COMPACT)
    @rein_code
    async def compact(self, request: ModelCallInput) -> CompactResult:
        return await steps.compact(self.conversations, self._agent(request.agent), request)

    @activity.defn(name=CLOSE_CANCELED)
    async def close_canceled(self, request: CloseCanceledInput) -> None:
        """Request cancellation of the calling run (it ended as cancelled: it closes CANCELED)."""
        info = activity.info()
        # always called by a run (only a standalone activity has no workflow id)
        await activity.client().get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id).cancel(
            reason=request.reason)

    @activity.defn(name=PASS_DECISION)
    async def pass_decision(self, request: PassDecisionInput) -> Any:
        return await decisions.pass_decision(request)

    def definitions(self) -> list[Any]:
        """The activity functions a Worker registers."""
        return [self.describe_agent, self.call_model, self.run_tool, self.compact, self.close_canceled,
                self.pass_decision, *policy.definitions()]


def _first_call_is_the_runs(description: AgentDescription, config: LoopConfig, conversation: list[Message],
                            overrides: dict[str, Any]) -> bool:
    """Whether a lean start's first call may be the run's first step: a plain model call (no middleware,
    no compaction), scheduled with the options the agent's config gives, on the queue it routes model calls
    to. This build's runs schedule it with LoopConfig's defaults under the client's overrides on their own
    queue (rein.workflows.start); an earlier build's, with the options its worker's registry gave."""
    if description.middleware or description.compaction is not None:
        return False
    action = machine.next_action(Session(messages=conversation), config, 0.0, frozenset(), frozenset())
    if not isinstance(action, machine.CallModel):
        return False
    info = activity.info()
    retry = info.retry_policy
    timeout = seconds(config.model_timeout_s)
    if retry is None:  # the time-skipping test server does not tell an activity its retry policy
        try:
            scheduled = apply_overrides(LoopConfig(), overrides, ["*"])
        except ValueError:
            return False
        sent = (scheduled.model_attempts, seconds(scheduled.model_retry_interval_s))
    else:
        sent = (retry.maximum_attempts, retry.initial_interval)
    return (
        info.start_to_close_timeout == timeout
        # the server caps a heartbeat timeout at the start-to-close timeout
        and info.heartbeat_timeout == min(heartbeat_timeout(config), timeout)
        and sent == (config.model_attempts, seconds(config.model_retry_interval_s))
        and (description.model_queue is None or info.task_queue == description.model_queue)
    )


def _tool_agent(agents: Mapping[str, Agent], name: str) -> Agent | None:
    """An agent one of the served agents uses as a tool (`Agent.as_tool`), found by its name."""
    for agent in with_tool_agents(agents.values()):
        for tool in agent.registry:
            if tool.agent is not None and tool.agent.name == name:
                return tool.agent
    return None


@overload
def wire(result: Completion) -> dict[str, Any]: ...
@overload
def wire(result: ToolResult) -> dict[str, Any] | str: ...
def wire(result: Completion | ToolResult) -> dict[str, Any] | str:
    """An activity's result as recorded in history: only what the workflow cannot restore.

    Every result costs history bytes on every iteration, so a Completion leaves out its
    defaults and what follows from the rest (`Completion.compact`), and a plain tool result
    is its content alone (the workflow knows the call it answers).
    """
    if isinstance(result, Completion):
        return result.compact()
    if not result.is_error and result.state_patch is None:
        return result.content
    return result.model_dump(mode="json")



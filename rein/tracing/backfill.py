"""`rein trace`: a finished run's trace rebuilt from its Temporal history and sent over OTLP
(needs the `otel` extra, like everything that imports this module).

The spans have the names, parents and attributes the live spans have (rein.tracing.genai):
one `invoke_agent` span per run of a continue-as-new chain (each later run under the one it
continued), `chat` and `execute_tool` spans for the model and tool activities (the attempt that
ended them: history keeps no earlier attempts), decision spans for approvals and answers, and
agents used as tools nested under their `execute_tool` span. Times are the history's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.sdk.trace import RandomIdGenerator
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from rein.core.contract import CALL_MODEL, RUN_TOOL, recorded_reply
from rein.core.digest import call_hash, ref
from rein.core.errors import CodecKeyError
from rein.core.ir import Completion, ToolCall, ToolResult
from rein.tracing import genai

_MODEL = re.compile(r"^model (.+) · iteration")
_TOOL = re.compile(r"^tool ([^(]+)\(")
E = EventType


def _ns(event: Any) -> int:
    return event.event_time.ToNanoseconds()


@dataclass
class _Activity:
    kind: str
    summary: str
    input: Any
    start: int
    started: int | None = None
    attempt: int = 1


@dataclass
class Spans:
    """What a backfill sent (for the CLI's report)."""

    runs: int = 0
    count: int = 0
    names: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    """Runs left out of a many-run backfill, by workflow id: why (an encrypted run without its key)."""


class Backfill:
    """Rebuilds runs' traces with `tracer`, an OpenTelemetry SDK tracer whose provider draws ids from `ids`."""

    def __init__(self, client: Client, tracer: Any, ids: PresetIds):
        self.client = client
        self.tracer = tracer
        self.ids = ids
        self.sent = Spans()
        self.calls: dict[str, ToolCall] = {}
        """The tool calls of the model replies seen so far, by the reference run_tool inputs carry."""

    async def _decode(self, payloads: Any) -> list[Any]:
        items = list(payloads)
        return await self.client.data_converter.decode(items) if items else []

    async def _one(self, payloads: Any) -> Any:
        values = await self._decode(payloads)
        return values[0] if values else None

    def _span(self, name: str, parent: Any, start: int, end: int, attributes: dict[str, Any], error: str | None = None) -> Any:
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(name, context=context, start_time=start, attributes=attributes)
        if error:
            span.set_status(Status(StatusCode.ERROR, error[:500]))
        span.end(end_time=max(end, start))
        self.sent.count += 1
        self.sent.names.append(name)
        return span

    async def chain(self, workflow_id: str, parent: Any = None) -> None:
        """Every run of `workflow_id`'s continue-as-new chain, oldest first."""
        runs: list[Any] = []
        run_id: str | None = None
        while True:
            history = await self.client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
            runs.insert(0, history)
            started = history.events[0].workflow_execution_started_event_attributes
            if not started.continued_execution_run_id:
                break
            run_id = started.continued_execution_run_id
        for history in runs:
            parent = await self.run(workflow_id, history, parent)

    async def run(self, workflow_id: str, history: Any, parent: Any) -> Any:
        """One run's spans; returns its run span (the parent of the run it continued as)."""
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        events = list(history.events)
        first = events[0]
        args = await self._one(first.workflow_execution_started_event_attributes.input.payloads)
        agent = str((args or {}).get("agent", "agent")).split("#", 1)[0] if isinstance(args, dict) else "agent"
        last = events[-1]
        # The run span's id comes first (its children are emitted before it ends); it is sent last.
        trace_id = parent.get_span_context().trace_id if parent is not None else self.ids.random_trace_id()
        span_id = self.ids.random_span_id()
        run_span = NonRecordingSpan(SpanContext(trace_id, span_id, False, TraceFlags(TraceFlags.SAMPLED)))
        await self._children(workflow_id, events, run_span, agent)
        attributes = genai.run_request(agent, workflow_id, history.run_id)
        error = None
        if last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            attributes.update(genai.run_outcome(await self._one(last.workflow_execution_completed_event_attributes.result.payloads)))
        elif last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            attributes["rein.continued_as_new"] = True
        elif last.event_type in (E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, E.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
                                 E.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED):
            error = E.Name(last.event_type).removeprefix("EVENT_TYPE_WORKFLOW_EXECUTION_").lower()
        self.ids.preset(trace_id if parent is None else None, span_id)
        span = self._span(genai.run_name(agent), parent, _ns(first), _ns(last), attributes, error)
        self.sent.runs += 1
        return span

    async def _children(self, workflow_id: str, events: list[Any], run_span: Any, agent: str) -> None:
        activities: dict[int, _Activity] = {}
        children: dict[int, tuple[Any, str]] = {}
        for event in events:
            kind = event.event_type
            if kind == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attrs = event.activity_task_scheduled_event_attributes
                summary = await self._one([event.user_metadata.summary]) if event.user_metadata.HasField("summary") else ""
                activities[event.event_id] = _Activity(
                    attrs.activity_type.name, str(summary or ""), await self._one(attrs.input.payloads), _ns(event)
                )
            elif kind == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                attrs = event.activity_task_started_event_attributes
                if attrs.scheduled_event_id in activities:
                    activities[attrs.scheduled_event_id].started = _ns(event)
                    activities[attrs.scheduled_event_id].attempt = attrs.attempt
            elif kind in _ACTIVITY_ENDS:
                attrs = getattr(event, _ACTIVITY_ENDS[kind])
                activity = activities.pop(attrs.scheduled_event_id, None)
                if activity is not None:
                    await self._activity(activity, event, attrs, run_span, agent)
            elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                attrs = event.workflow_execution_signaled_event_attributes
                self._decision(attrs.signal_name, await self._one(attrs.input.payloads), event, run_span)
            elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                request = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
                self._decision(request.name, await self._one(request.args.payloads), event, run_span)
            elif kind == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
                attrs = event.start_child_workflow_execution_initiated_event_attributes
                children[event.event_id] = (event, attrs.workflow_id)
            elif kind in _CHILD_ENDS:
                attrs = getattr(event, _CHILD_ENDS[kind])
                started = children.pop(attrs.initiated_event_id, None)
                if started is not None:
                    await self._child(started[0], started[1], event, run_span)

    async def _activity(self, activity: _Activity, end: Any, attrs: Any, run_span: Any, agent: str) -> None:
        start = activity.started or activity.start
        failed = end.event_type != E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        error = attrs.failure.message if failed else None
        result = None if failed else await self._one(attrs.result.payloads)
        if activity.kind == CALL_MODEL:
            described = result.get("agent") if isinstance(result, dict) else None
            if isinstance(described, dict) and isinstance(result, dict) and result.get("reply") is None:
                return  # a lean start's first call that only described the agent: no model was called
            match = _MODEL.match(activity.summary)
            model = match.group(1) if match else "model"
            if model.startswith("of agent "):  # a lean start's first call, scheduled before the model was known
                model = str(described.get("model") or "model") if isinstance(described, dict) else "model"
            attributes = genai.chat_request(model, agent)
            completion = _completion(result)
            if completion is not None:
                attributes.update(genai.chat_response(model, completion))
                self.calls.update({ref(call_hash(c)): c for c in completion.message.tool_calls or ()})
            self._span(genai.chat_name(model), run_span, start, _ns(end), attributes, error)
        elif activity.kind == RUN_TOOL:
            call = _call(activity, self.calls)
            attributes = genai.tool_request(call)
            tool_result = _tool_result(call, result)
            if tool_result is not None:
                attributes.update(genai.tool_response(tool_result))
                if tool_result.is_error:
                    error = tool_result.content
            self._span(genai.tool_name(call.name), run_span, start, _ns(end), attributes, error)

    def _decision(self, name: str, payload: Any, event: Any, run_span: Any) -> None:
        when = datetime.fromtimestamp(_ns(event) / 1e9, tz=UTC).isoformat()
        made = genai.decision(name, payload, when)
        if made is not None:
            self._span(made[0], run_span, _ns(event), _ns(event), made[1])

    async def _child(self, initiated: Any, child_id: str, end: Any, run_span: Any) -> None:
        args = await self._one(initiated.start_child_workflow_execution_initiated_event_attributes.input.payloads)
        agent = str((args or {}).get("agent", "agent")) if isinstance(args, dict) else "agent"
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": agent, "gen_ai.tool.type": "agent",
                      "openinference.span.kind": "TOOL", "tool.name": agent, "rein.child_workflow_id": child_id}
        if isinstance(args, dict) and isinstance(args.get("parent_call"), str):
            attributes["gen_ai.tool.call.id"] = args["parent_call"]
        failed = end.event_type != E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
        span = self._span(genai.tool_name(agent), run_span, _ns(initiated), _ns(end), attributes,
                          "the child run failed" if failed else None)
        await self.chain(child_id, span)


class PresetIds(RandomIdGenerator):
    """Hands out a chosen id once: a run span's children are sent before it, under the id it
    gets when it is sent last."""

    def __init__(self) -> None:
        self._trace: int | None = None
        self._span: int | None = None

    def preset(self, trace_id: int | None, span_id: int) -> None:
        self._trace, self._span = trace_id, span_id

    def random_trace_id(self) -> int:
        return super().generate_trace_id()

    def random_span_id(self) -> int:
        return super().generate_span_id()

    def generate_trace_id(self) -> int:
        chosen, self._trace = self._trace, None
        return chosen if chosen is not None else self.random_trace_id()

    def generate_span_id(self) -> int:
        chosen, self._span = self._span, None
        return chosen if chosen is not None else self.random_span_id()


_ACTIVITY_ENDS = {
    E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    E.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
}
_CHILD_ENDS = {
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED: "child_workflow_execution_completed_event_attributes",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED: "child_workflow_execution_failed_event_attributes",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED: "child_workflow_execution_canceled_event_attributes",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT: "child_workflow_execution_timed_out_event_attributes",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED: "child_workflow_execution_terminated_event_attributes",
}


def _completion(result: Any) -> Completion | None:
    try:
        return Completion.model_validate(recorded_reply(result))
    except Exception:  # a middleware step's outcome: no single completion
        return None


def _call(activity: _Activity, calls: dict[str, ToolCall]) -> ToolCall:
    value = activity.input if isinstance(activity.input, dict) else {}
    if value.get("ref") in calls:
        return calls[value["ref"]]
    if isinstance(value.get("call"), dict):
        try:
            return ToolCall.model_validate(value["call"])
        except Exception:
            pass
    match = _TOOL.match(activity.summary)
    return ToolCall(id=str(value.get("ref") or ""), name=match.group(1) if match else "tool", arguments={})


def _tool_result(call: ToolCall, result: Any) -> ToolResult | None:
    if isinstance(result, str):
        return ToolResult(tool_call_id=call.id, content=result)
    try:
        return ToolResult.model_validate(result)
    except Exception:
        return None


async def send(client: Client, workflow_ids: list[str]) -> Spans:
    """Rebuild the runs' traces and export them to the OTLP endpoint the OTEL_* variables name."""
    import asyncio
    import os

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    ids = PresetIds()
    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "rein"})
    provider = TracerProvider(resource=resource, id_generator=ids)  # type: ignore[arg-type]
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    backfill = Backfill(client, provider.get_tracer("rein"), ids)
    try:
        for workflow_id in workflow_ids:
            try:
                await backfill.chain(workflow_id)
            except CodecKeyError as err:
                if len(workflow_ids) == 1:
                    raise  # the one run asked for: its error is the answer
                backfill.sent.unreadable[workflow_id] = str(err)
    finally:
        await asyncio.to_thread(provider.shutdown)  # exports everything before returning
    return backfill.sent

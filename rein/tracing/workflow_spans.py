"""The run span, decision spans and agent-as-tool spans, from the workflow side.

Installed inside temporalio's OpenTelemetry interceptor (which attaches the context a client,
a parent workflow or the previous run of a continue-as-new chain sent in the headers, and passes
the current context on to activities and child workflows). Spans here come from temporalio's
replay-safe tracer provider: their ids come from the workflow's deterministic randomness, and a
span is never ended while history replays, so a worker restart, a cache eviction or
`max_cached_workflows=0` re-creates the same span without emitting it again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import temporalio.worker
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from rein.core.contract import WORKFLOW_TYPE
from rein.core.threads import TURN_TRACE
from rein.tracing import genai
from rein.tracing.setup import tracer


def _first_arg(args: Any) -> Any:
    value: Any = args[0] if args else None
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def _agent_name(args: Any) -> str:
    value = _first_arg(args)
    name = value.get("agent") if isinstance(value, dict) else None
    return str(name).split("#", 1)[0] if name else workflow.info().workflow_type


class ReinTracingInterceptor(temporalio.worker.Interceptor):
    """Adds rein's workflow-side spans to AgentWorkflow runs on a worker."""

    def workflow_interceptor_class(
        self, input: temporalio.worker.WorkflowInterceptorClassInput
    ) -> type[temporalio.worker.WorkflowInboundInterceptor]:
        input.unsafe_extern_functions[TURN_TRACE] = _turn
        return _RunSpans


_TRACED: dict[str, _RunSpans] = {}
"""The run spans of the runs in flight on this worker, by Temporal run id (for the turn extern function)."""


def _turn(event: str, attributes: dict[str, Any]) -> None:
    """A thread's turn opens or ends (rein.workflows.threads calls it in workflow context)."""
    spans = _TRACED.get(workflow.info().run_id)
    if spans is not None:
        spans.turn(event, attributes)


class _RunSpans(temporalio.worker.WorkflowInboundInterceptor):
    run_span: Any = None
    agent = ""
    turn_span: Any = None
    turn_token: Any = None

    def _end_turn_span(self) -> None:
        """The turn's span ends with the turn, or with the run (ended, failed, continued as new) mid-turn; never
        on a cache eviction (the run goes on elsewhere and makes the same span again)."""
        if self.turn_span is not None:
            self.turn_span.end()
            self.turn_span = self.turn_token = None

    def init(self, outbound: temporalio.worker.WorkflowOutboundInterceptor) -> None:
        super().init(_ChildToolSpans(outbound, self))

    def run_context(self) -> Any:
        from opentelemetry import context, trace

        span = self.turn_span if self.turn_span is not None else self.run_span
        return trace.set_span_in_context(span) if span is not None else context.get_current()

    def turn(self, event: str, attributes: dict[str, Any]) -> None:
        """A thread's turn is a trace of its own: a root span linked to the thread's run span, current (so the
        turn's model and tool calls nest under it) from the moment the turn opens until it ends."""
        from opentelemetry import context as otel_context
        from opentelemetry import trace
        from opentelemetry.trace import Link

        if self.turn_span is not None:
            if event == "end":
                self.turn_span.set_attributes({k: v for k, v in attributes.items() if v is not None})
            otel_context.detach(self.turn_token)
            self._end_turn_span()
        if event != "start" or self.run_span is None:
            return
        info = workflow.info()
        agent = self.agent
        self.turn_span = tracer().start_span(
            genai.run_name(agent), context=otel_context.Context(), links=[Link(self.run_span.get_span_context())],
            attributes={**genai.run_request(agent, info.workflow_id, info.run_id), **attributes},
        )
        self.turn_token = otel_context.attach(trace.set_span_in_context(self.turn_span))

    async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        info = workflow.info()
        if info.workflow_type != WORKFLOW_TYPE:  # a user's own workflow on the same worker
            return await super().execute_workflow(input)
        agent = self.agent = _agent_name(input.args)
        span = tracer().start_span(
            genai.run_name(agent), kind=SpanKind.INTERNAL, attributes=genai.run_request(agent, info.workflow_id, info.run_id)
        )
        self.run_span = span
        _TRACED[info.run_id] = self
        with _attached(self.run_context()):
            try:
                outcome = await super().execute_workflow(input)
            except workflow.ContinueAsNewError:
                span.set_attribute("rein.continued_as_new", True)
                self._end_turn_span()
                span.end()
                raise
            except asyncio.CancelledError:
                if workflow.cancellation_reason() is not None:  # closed as CANCELED (not a cache eviction)
                    span.set_attribute("rein.status", "cancelled")
                    self._end_turn_span()
                    span.end()
                raise
            except BaseException as exc:
                if workflow.is_failure_exception(exc) or isinstance(exc, ApplicationError):
                    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))
                    self._end_turn_span()
                    span.end()
                raise  # anything else fails the workflow task: the run goes on, its span with it
            finally:
                _TRACED.pop(info.run_id, None)
        self._end_turn_span()
        span.set_attributes(genai.run_outcome(outcome))
        if genai.run_outcome(outcome).get("rein.status") == "failed":
            span.set_status(Status(StatusCode.ERROR, str(getattr(outcome, "stop_reason", "failed"))))
        span.end()
        return outcome

    def _decision(self, name: str, args: Any) -> None:
        # The span's scrubbing reads rein.settings (secret settings): the worker's module, imported outside the
        # sandbox, never a copy the sandbox would import (pydantic-settings makes a Lock at import: refused there).
        with workflow.unsafe.imports_passed_through():
            made = genai.decision(name, _first_arg(args), workflow.now().isoformat())
        if made is None or self.run_span is None:
            return
        span_name, attributes = made
        tracer().start_span(span_name, context=self.run_context(), attributes=attributes).end()

    async def handle_signal(self, input: temporalio.worker.HandleSignalInput) -> None:
        self._decision(input.signal, input.args)
        await super().handle_signal(input)

    async def handle_update_handler(self, input: temporalio.worker.HandleUpdateInput) -> Any:
        result = await super().handle_update_handler(input)
        self._decision(input.update, input.args)  # after the handler: a rejected update decided nothing
        return result


class _ChildToolSpans(temporalio.worker.WorkflowOutboundInterceptor):
    """An agent used as a tool runs as a child workflow: its `execute_tool` span lasts as long as
    the child, whose run span nests under it (the headers carry it)."""

    def __init__(self, next: temporalio.worker.WorkflowOutboundInterceptor, inbound: _RunSpans):
        super().__init__(next)
        self.inbound = inbound

    async def start_child_workflow(self, input: temporalio.worker.StartChildWorkflowInput) -> workflow.ChildWorkflowHandle:
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        if input.workflow != WORKFLOW_TYPE:
            return await super().start_child_workflow(input)
        agent = _agent_name(input.args)
        value = _first_arg(input.args)
        call_id = value.get("parent_call") if isinstance(value, dict) else None
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": agent,
            "gen_ai.tool.type": "agent",
            "openinference.span.kind": "TOOL",
            "tool.name": agent,
            "rein.child_workflow_id": input.id,
        }
        if isinstance(call_id, str):
            attributes["gen_ai.tool.call.id"] = call_id
        span = tracer().start_span(genai.tool_name(agent), context=self.inbound.run_context(), attributes=attributes)
        try:
            with _attached(trace.set_span_in_context(span)):
                handle = await super().start_child_workflow(input)
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))
            span.end()
            raise

        def finished(done: Any) -> None:
            if done.cancelled() or done.exception() is not None:
                span.set_status(Status(StatusCode.ERROR, "the child run failed" if not done.cancelled() else "cancelled"))
            span.end()

        handle.add_done_callback(finished)
        return handle


@contextlib.contextmanager
def _attached(context: Any) -> Iterator[None]:
    """`context` current for the block (public OpenTelemetry API). A run evicted mid-block may detach in
    another contextvars.Context, where OpenTelemetry logs "Failed to detach context": noise, not harm."""
    from opentelemetry import context as otel_context

    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)

"""rein's worker runs workflows in temporalio's stock sandbox (with rein's pure modules passed through):
a payload codec that takes contexts sees each activity's own context, and a user's workflow on the same
worker still runs sandboxed.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence

import pytest
from temporalio import workflow

with workflow.unsafe.imports_passed_through():  # the sandbox re-imports this module for the probe
    from temporalio.api.common.v1 import Payload
    from temporalio.client import Client
    from temporalio.converter import (
        ActivitySerializationContext,
        PayloadCodec,
        SerializationContext,
        WithSerializationContext,
        WorkflowSerializationContext,
    )

    import rein
    from rein import Agent, MockProvider, ToolCall
    from rein.core.contract import CALL_MODEL, DESCRIBE_AGENT, RUN_TOOL, RunOutcome
    from tests.support.tools import add

_seen: list[tuple[str, str | None, str | None, bytes]] = []


@dataclasses.dataclass(frozen=True)
class ContextRecordingCodec(PayloadCodec, WithSerializationContext):
    """Leaves payloads as they are and records the context each encode was given."""

    context: SerializationContext | None = None

    def with_context(self, context: SerializationContext) -> ContextRecordingCodec:
        return ContextRecordingCodec(context)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if payloads:
            ctx = self.context
            _seen.extend((
                type(ctx).__name__,
                getattr(ctx, "activity_type", None),
                getattr(ctx, "workflow_id", None),
                payload.data,
            ) for payload in payloads)
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


@workflow.defn(name="ContextsSandboxProbe")
class SandboxProbe:
    """A user's workflow on the same worker: still sandboxed, so opening a file is refused."""

    @workflow.run
    async def run(self) -> str:
        try:
            open("/etc/hostname").close()
        except Exception as err:  # the sandbox's RestrictedWorkflowAccessError
            return type(err).__name__
        return "not sandboxed"


@pytest.mark.parametrize("start", [{"session": {"messages": []}}, {}], ids=["asked-first", "lean"])
async def test_activity_payloads_keep_their_own_context_in_the_stock_sandbox(dev, start):
    """A lean start (a new conversation) has no describe_agent local activity; a run given a Session asks
    first, and that local activity's input has its own context too."""
    client = Client(**{**dev.client.config(), "data_converter": dataclasses.replace(
        dev.client.data_converter, payload_codec=ContextRecordingCodec())})
    agent = Agent(
        provider=MockProvider([[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})], "The sum is 5."]),
        tools=[add], name="ctx-adder",
    )
    queue = f"contexts-{uuid.uuid4().hex[:6]}"
    run_id = f"{queue}-run"
    async with rein.create_worker(client, agents=[agent], task_queue=queue, workflows=[SandboxProbe]):
        _seen.clear()
        outcome = await client.execute_workflow(
            "AgentWorkflow", {"agent": "ctx-adder", "prompt": "2+3?", **start}, id=run_id, task_queue=queue,
            result_type=RunOutcome,
        )
        probe = await client.execute_workflow(SandboxProbe.run, id=f"{queue}-probe", task_queue=queue)
    assert outcome.output == "The sum is 5."
    activity = ActivitySerializationContext.__name__
    # The workflow encodes each activity's input with that activity's context (inputs name the agent;
    # the activity worker encodes results, which do not).
    for kind in (CALL_MODEL, RUN_TOOL) if not start else (DESCRIBE_AGENT, CALL_MODEL, RUN_TOOL):
        assert any(ctx == activity and k == kind and wf == run_id and data.startswith(b'{"agent":"ctx-adder"')
                   for ctx, k, wf, data in _seen), kind
    assert any(ctx == WorkflowSerializationContext.__name__ and wf == run_id and b"The sum is 5." in data
               for ctx, kind, wf, data in _seen)  # the run's result with the run's own
    assert probe == "RestrictedWorkflowAccessError"

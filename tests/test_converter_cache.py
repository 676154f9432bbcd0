"""rein's payload converter builds the TypeAdapters of its own types once per process, not once per run.

temporalio makes a new payload converter for every workflow run, and the pydantic contrib caches
adapters per converter, so each run built AgentInput's, AgentDescription's and ModelReply's again
(about 1 ms of a one-call run's workflow CPU). A user's type that the sandbox re-imports for every
run must not enter the process-wide cache: it would keep that run's modules alive.
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, TypeAdapter
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import rein
    from rein import Agent, MockProvider, ToolCall
    from rein.core.contract import RunOutcome
    from rein.temporal.converter import ReinPayloadConverter, _process_type_adapter
    from tests.support.tools import add


class Ticket(BaseModel):
    """A user's type in a module the sandbox imports again for each run."""

    text: str


@workflow.defn(name="ConverterCacheEcho")
class TicketEcho:
    @workflow.run
    async def run(self, ticket: Ticket) -> Ticket:
        return Ticket(text=ticket.text.upper())


async def test_rein_types_are_adapted_once_per_process_and_user_types_per_run(dev, monkeypatch):
    built: list[Any] = []  # every TypeAdapter made in this process, by its type
    original = TypeAdapter.__init__

    def counting(self: TypeAdapter, type_: Any, *args: Any, **kwargs: Any) -> None:
        built.append(type_)
        original(self, type_, *args, **kwargs)

    monkeypatch.setattr(TypeAdapter, "__init__", counting)
    queue = f"adapters-{uuid.uuid4().hex[:6]}"
    script = [[ToolCall(id=f"c{i}", name="add", arguments={"a": i, "b": 1})] if i % 2 == 0 else f"sum {i // 2}"
              for i in range(6)]  # each run: a tool call (its result is a `ToolResult | str`), then an answer
    agent = Agent(provider=MockProvider(script), tools=[add], name="adapter-bot")
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue, workflows=[TicketEcho]) as worker:
        assert worker.client.data_converter.payload_converter_class is ReinPayloadConverter
        outputs = []
        for i in range(3):
            outcome = await worker.client.execute_workflow(
                "AgentWorkflow", {"agent": "adapter-bot", "prompt": f"hi {i}"}, id=f"{queue}-{i}", task_queue=queue,
                result_type=RunOutcome,
            )
            outputs.append(outcome.output)
            if i == 0:
                after_first = _process_type_adapter.cache_info()
                built.clear()
        after_third = _process_type_adapter.cache_info()
        built_by_later_runs = list(built)
        for i in range(2):
            echoed = await worker.client.execute_workflow(
                TicketEcho.run, Ticket(text=f"t{i}"), id=f"{queue}-ticket-{i}", task_queue=queue)
            assert echoed == Ticket(text=f"T{i}")
        after_user = _process_type_adapter.cache_info()
    assert outputs == ["sum 0", "sum 1", "sum 2"]
    assert after_first.currsize > 0
    assert built_by_later_runs == []  # runs two and three built no adapter of their own
    assert after_third.misses == after_first.misses
    assert after_third.hits > after_first.hits
    assert after_user.currsize == after_third.currsize  # the re-imported Ticket stayed per run


class Shape(BaseModel):
    name: str
    corners: set[int]
    at: datetime


def test_the_json_is_the_pydantic_contribs_and_reads_back() -> None:
    """rein's JSON converter replaces the contrib's (which it need not build for every context): the
    same bytes on the wire, so histories recorded by either read back with the other."""
    from temporalio.contrib.pydantic import PydanticPayloadConverter

    ours, contrib = ReinPayloadConverter(), PydanticPayloadConverter()
    shape = Shape(name="tri", corners={1, 2, 3}, at=datetime(2026, 12, 2, tzinfo=UTC))
    values = [shape, RunOutcome(status="done", output="ok"), {"when": date(2026, 1, 2), "id": UUID(int=7)}, "text", 3]
    assert [p.SerializeToString() for p in ours.to_payloads(values)] == [
        p.SerializeToString() for p in contrib.to_payloads(values)]
    payloads = contrib.to_payloads(values)
    assert ours.from_payloads(payloads[:2], [Shape, RunOutcome]) == values[:2]
    unhashable = Annotated[list[int], {"note": "a dict makes this hint unhashable"}]
    assert ours.from_payloads(contrib.to_payloads([[1, 2]]), [unhashable]) == [[1, 2]]

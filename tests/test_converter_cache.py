"""rein's payload converter builds the TypeAdapters of its own types once per process, not once per run.

temporalio makes a new payload converter for every workflow run, and the pydantic contrib caches
adapters per converter, so each run built AgentInput's, AgentDescription's and ModelReply's again
(about 1 ms of a one-call run's workflow CPU). A user's type that the sandbox re-imports for every
run must not enter the process-wide cache: it would keep that run's modules alive.
"""

from __future__ import annotations

import uuid

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import rein
    from rein import Agent, MockProvider
    from rein.contract import RunOutcome
    from rein.temporal.converter import ReinPayloadConverter, _process_type_adapter


class Ticket(BaseModel):
    """A user's type in a module the sandbox imports again for each run."""

    text: str


@workflow.defn(name="ConverterCacheEcho")
class TicketEcho:
    @workflow.run
    async def run(self, ticket: Ticket) -> Ticket:
        return Ticket(text=ticket.text.upper())


async def test_rein_types_are_adapted_once_per_process_and_user_types_per_run(dev):
    queue = f"adapters-{uuid.uuid4().hex[:6]}"
    agent = Agent(provider=MockProvider(["one", "two", "three"]), name="adapter-bot")
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
        after_third = _process_type_adapter.cache_info()
        for i in range(2):
            echoed = await worker.client.execute_workflow(
                TicketEcho.run, Ticket(text=f"t{i}"), id=f"{queue}-ticket-{i}", task_queue=queue)
            assert echoed == Ticket(text=f"T{i}")
        after_user = _process_type_adapter.cache_info()
    assert outputs == ["one", "two", "three"]
    assert after_first.currsize > 0
    assert after_third.misses == after_first.misses  # runs two and three built no adapter of their own
    assert after_third.hits > after_first.hits
    assert after_user.currsize == after_third.currsize  # the re-imported Ticket stayed per run

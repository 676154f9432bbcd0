"""A tool call's idempotency key (ToolContext.idempotency_key): `<run id>/<call id>`, the same on every attempt, and
a key of its own for every call even when the model repeats its call ids (`call_0` in every answer, as LiteLLM's
do): a service that deduplicates on the key would otherwise skip the second charge and answer with the first's.
A repeated id's call gets its batch's number (`#<batch>`). Checked on the durable engine (a worker on the session's
dev server), inside middleware (the step's activity) and in-process (engine="local").
"""

from __future__ import annotations

import uuid

import pytest

import rein
from rein import Agent, MockProvider, ToolContext
from rein.client import ReinClient
from rein.core.contract import RUN_TOOL
from tests.support.history import assert_no_task_failures, decoded_values, history_events, scheduled
from tests.support.tools import tc

SEEN: dict[str, list[tuple[str, int, int]]] = {}
"""Per agent: (idempotency key, amount, attempt) of each attempt of `charge`."""


def charge_tool(agent_name: str) -> rein.Tool:
    @rein.tool(retries=1)
    async def charge(amount: int, ctx: ToolContext) -> str:
        """Charge an amount once (the payment service deduplicates on the idempotency key).

        Args:
            amount: How much.
        """
        SEEN.setdefault(agent_name, []).append((ctx.idempotency_key, amount, ctx.attempt))
        if amount == 7 and ctx.attempt == 1:
            raise ConnectionError("the payment service did not answer")  # retried: the same key
        return f"charged {amount}"

    return charge


def charging_agent(engine: str, *, middleware: bool = False) -> Agent:
    """The model repeats call_0 in its second answer; its third uses a fresh id."""
    name = f"charger-{engine}{'-mw' if middleware else ''}-{uuid.uuid4().hex[:6]}"
    script = [[tc("charge", "call_0", amount=5)], [tc("charge", "call_0", amount=7)], [tc("charge", "call_1", amount=9)],
              "charged three times"]
    agent = Agent(provider=MockProvider(script), tools=[charge_tool(name)], name=name, engine=engine)  # type: ignore[arg-type]
    if middleware:
        @agent.middleware
        async def passthrough(ctx, call_next):  # noqa: ANN001, ANN202  (the step then runs in one activity)
            return await call_next(ctx)
    return agent


def keys_of(agent: Agent, run_id: str) -> list[tuple[str, int, int]]:
    return [(key.removeprefix(f"{run_id}/"), amount, attempt) for key, amount, attempt in SEEN[agent.name]]


EXPECTED = [("call_0", 5, 1), ("call_0#2", 7, 1), ("call_0#2", 7, 2), ("call_1", 9, 1)]


@pytest.mark.parametrize("middleware", [False, True], ids=["activities", "middleware-step"])
async def test_a_repeated_call_id_gets_a_key_of_its_own_on_the_durable_engine(dev, middleware: bool) -> None:  # noqa: ANN001
    agent = charging_agent("temporal", middleware=middleware)
    queue = f"keys-{uuid.uuid4().hex[:8]}"
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        handle = await runs.start(agent.name, "charge 5, 7 and 9")
        result = await runs.wait(handle.id)
    assert result.output == "charged three times"
    assert keys_of(agent, handle.id) == EXPECTED
    events = await history_events(handle)
    assert_no_task_failures(events)
    if not middleware:  # what each tool activity records: a fresh id's input as before, the repeat's with its batch
        inputs = [(await decoded_values(e.activity_task_scheduled_event_attributes.input))[0]
                  for e in scheduled(events, RUN_TOOL)]
        assert [i.get("key_batch") for i in inputs] == [None, 2, None]


def test_a_repeated_call_id_gets_a_key_of_its_own_in_process() -> None:
    agent = charging_agent("local")
    result = agent.run("charge 5, 7 and 9")
    assert result.output == "charged three times"
    run_id = SEEN[agent.name][0][0].rpartition("/")[0]
    # In-process, a tool's failure goes to the model as its result (Temporal's retries are the durable engine's).
    assert run_id and keys_of(agent, run_id) == [k for k in EXPECTED if k[2] == 1]

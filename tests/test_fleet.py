"""Fleet control on a real dev server against tests/vendor_server.py over real HTTP (LiteLLM):
family budgets (max_cost_usd counting child agents), a provider's rate-limited model queue
with tenants' weighted shares, and priorities reordering a backlog."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.common import SearchAttributeKey

import rein
from rein import Agent, LiteLLMProvider, LoopConfig
from rein.client import ReinClient
from rein.contract import model_queue
from rein.fleet import queue_limits, run_priority, set_limits
from rein.prices import register_prices
from tests.vendor_server import Reply, VendorServer

KEY = "sk-test-" + uuid.uuid4().hex
MODEL = "openai/rein-fleet-test"
"""A model LiteLLM has no price for: priced here (register_prices) at $1,000 per million tokens."""
CALL_TOKENS = 100
CALL_COST = CALL_TOKENS * 1000 / 1e6  # $0.10 per model call
COST = SearchAttributeKey.for_float("ReinCostUsd")
TOKENS = SearchAttributeKey.for_int("ReinTokens")
TENANT = SearchAttributeKey.for_keyword("ReinTenant")


def provider(srv: VendorServer) -> LiteLLMProvider:
    return LiteLLMProvider(MODEL, api_base=srv.base_url + "/v1", api_key=KEY)


def _tools(body: Any) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


def _prompt(body: Any) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


# ---------------------------------------------------------------- budgets that include sub-agents


def family_vendor(body: Any) -> Reply:
    """The boss asks both workers at once, then ends; a worker keeps calling its tool (new args each time)."""
    tools = _tools(body)
    calls = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if "worker_a" in tools:
        if calls == 0:
            return Reply(tool_calls=[("a", "worker_a", {"prompt": "dig"}), ("b", "worker_b", {"prompt": "dig"})],
                         input_tokens=CALL_TOKENS, output_tokens=0)
        return Reply(text="all done", input_tokens=CALL_TOKENS, output_tokens=0)
    return Reply(tool_calls=[(f"w{calls}", "work", {"n": calls})], input_tokens=CALL_TOKENS, output_tokens=0)


def family(srv: VendorServer) -> Agent:
    workers = []
    for name in ("worker_a", "worker_b"):
        worker = Agent(provider=provider(srv), name=name.replace("_", "-"))

        @worker.tool
        def work(n: int) -> str:
            """Do one more piece of work."""
            return f"piece {n} done"

        workers.append(worker.as_tool(name))
    return Agent(provider=provider(srv), name="boss", tools=workers)


async def test_a_parent_stops_on_max_cost_usd_counting_its_two_child_agents(dev):
    register_prices({MODEL: (1000, 1000)})
    tq = f"fleet-budget-{uuid.uuid4().hex[:6]}"
    with VendorServer(responder=family_vendor) as srv:
        boss = family(srv)
        async with rein.create_worker(dev.client, agents=[boss], task_queue=tq):
            client = ReinClient(dev.client, tq)
            handle = await client.start("boss", "split the work", config={"max_cost_usd": 1.0})
            outcome = await handle.result()
            children = [dev.client.get_workflow_handle(f"{handle.id}/{c}") for c in ("a", "b")]
            child_outcomes = [await c.result() for c in children]
    spent = outcome.usage.cost_usd
    # Alone, each child could spend the $0.90 left after the boss's first call: $1.90 in all.
    # The family stops once it has spent $1.00; calls already under way may add a little.
    assert outcome.stop_reason == "budget", outcome
    assert 1.0 <= spent <= 1.0 + 3 * CALL_COST, spent
    assert [c.get("stop_reason") for c in child_outcomes] == ["budget", "budget"]
    # The parent's usage is the family's: every request the vendor answered, at $0.10 each.
    assert spent == pytest.approx(len(srv.requests) * CALL_COST)
    assert outcome.usage.input_tokens == len(srv.requests) * CALL_TOKENS
    children_cost = sum(c["usage"]["cost_usd"] for c in child_outcomes)
    assert spent == pytest.approx(CALL_COST + children_cost)  # the boss made one call of its own
    attributes = (await handle.describe()).typed_search_attributes
    assert attributes.get(COST) == pytest.approx(spent)
    assert attributes.get(TOKENS) == outcome.usage.total_tokens


async def test_without_a_budget_children_report_nothing_but_their_result(dev):
    register_prices({MODEL: (1000, 1000)})
    tq = f"fleet-nobudget-{uuid.uuid4().hex[:6]}"

    def vendor(body: Any) -> Reply:
        if "worker_a" in _tools(body):
            return family_vendor(body)
        return Reply(text="piece done", input_tokens=CALL_TOKENS, output_tokens=0)

    with VendorServer(responder=vendor) as srv:
        async with rein.create_worker(dev.client, agents=[family(srv)], task_queue=tq):
            handle = await ReinClient(dev.client, tq).start("boss", "split the work")
            outcome = await handle.result()
            history = await dev.client.get_workflow_handle(f"{handle.id}/a").fetch_history()
    assert outcome.stop_reason == "done"
    assert outcome.usage.cost_usd == pytest.approx(4 * CALL_COST)  # two boss calls, one per child
    kinds = {e.event_type for e in history.events}
    assert EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED not in kinds

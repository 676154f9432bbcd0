"""Fleet control on a real dev server against tests/vendor_server.py over real HTTP (LiteLLM):
family budgets (max_cost_usd counting child agents), a provider's rate-limited model queue
with tenants' weighted shares, and priorities reordering a backlog."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.common import SearchAttributeKey

import rein
from rein import Agent, LiteLLMProvider
from rein.client import ReinClient
from rein.core.contract import model_queue
from rein.core.prices import register_prices
from rein.durable.fleet import queue_limits, run_priority, set_limits
from tests.support.waiting import poll
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
            handle = await client.start("boss", "split the work", config={"max_cost_usd": 1.0}, tenant="acme")
            outcome = await handle.result()
            children = [dev.client.get_workflow_handle(f"{handle.id}/{c}") for c in ("a", "b")]
            child_outcomes = [await c.result() for c in children]
    spent = outcome.usage.cost_usd
    # Alone, each child could spend the $0.90 left after the boss's first call: $1.90 in all.
    # The family stops once it has spent $1.00; each child may have up to two calls under way then.
    assert outcome.stop_reason == "budget", outcome
    assert 1.0 <= spent <= 1.0 + 4 * CALL_COST + 1e-9, spent
    assert [c.get("stop_reason") for c in child_outcomes] == ["budget", "budget"]
    # The parent's usage is the family's: every request the vendor answered, at $0.10 each.
    assert spent == pytest.approx(len(srv.requests) * CALL_COST)
    assert outcome.usage.input_tokens == len(srv.requests) * CALL_TOKENS
    children_cost = sum(c["usage"]["cost_usd"] for c in child_outcomes)
    assert spent == pytest.approx(CALL_COST + children_cost)  # the boss made one call of its own
    attributes = (await handle.describe()).typed_search_attributes
    assert attributes.get(COST) == pytest.approx(spent)
    assert attributes.get(TOKENS) == outcome.usage.total_tokens
    child = await children[0].describe()  # a child inherits the tenant (Temporal's fairness key)
    assert child.typed_search_attributes.get(TENANT) == "acme"


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


# ---------------------------------------------------------------- vendor rate limits and fair shares

VENDOR_RPS = 20
QUEUE_RPS = 6
WEIGHTS = {"acme": 2.0, "beta": 1.0, "gamma": 1.0}
PER_TENANT = 20


async def test_a_burst_from_three_tenants_stays_under_the_vendor_limit_in_weighted_shares(dev, monkeypatch):
    """60 one-call runs (20 per tenant) at once, fewer than the issue's 200 to keep this short.
    The provider's queue is limited to 6 model calls per second, the vendor answers 429 above 20
    (Temporal's limiter lets a short burst through after an idle moment: up to about 2.7 times the
    rate in one second was seen, and 8/s once gave 2 x 429 under load; with no limit the vendor
    refuses most of the 60). None is refused, all finish, and acme
    (weight 2), served about twice as often as beta and gamma while all three wait, runs out of
    calls well before them."""
    monkeypatch.setenv("REIN_MODEL_QUEUES", "openai")
    tq = f"fleet-burst-{uuid.uuid4().hex[:6]}"
    queue = model_queue(MODEL)
    limits = await set_limits(dev.client, model=MODEL, rps=QUEUE_RPS, weights=WEIGHTS)
    assert (limits.task_queue, limits.rps, limits.weights) == (queue, QUEUE_RPS, WEIGHTS)
    assert (await queue_limits(dev.client, queue)).rps == QUEUE_RPS
    with VendorServer(rate_limit=VENDOR_RPS, responder=lambda body: Reply(text="ok")) as srv:
        agent = Agent(provider=provider(srv), name="fleet-bot")
        client = ReinClient(dev.client, tq)
        async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
            # A freshly loaded queue lets its first tasks through before its partitions (4 on the dev
            # server) apply the limit (measured on server 1.32; docs/fleet.md): a few runs load them.
            async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
                warm = [await client.start("fleet-bot", f"warm #{i}") for i in range(8)]
                await asyncio.gather(*(h.result() for h in warm))
            srv.requests.clear()
            handles = await asyncio.gather(*(
                client.start("fleet-bot", f"{tenant} #{i}", tenant=tenant)
                for i in range(PER_TENANT) for tenant in WEIGHTS
            ))
            # The whole backlog waits on the provider's queue before anything serves it, so the
            # shares show from the first call on, however slowly this machine starts the runs.
            await _until_scheduled(dev.client, handles)
            # The vendor counts the warm-up's calls in its one-second window until that second has passed.
            await poll(lambda: time.monotonic() - srv.accepted_at[-1] >= 1, "the warm-up calls' second to pass")
            async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
                outcomes = await asyncio.gather(*(h.result() for h in handles))
        answered = [_prompt(r.body).split(" #")[0] for r in srv.requests]
    assert srv.rejected == 0 and srv.peak_per_second <= VENDOR_RPS
    assert [o.stop_reason for o in outcomes] == ["done"] * len(handles)
    assert Counter(answered) == {t: PER_TENANT for t in WEIGHTS}
    # The weights show in when acme's calls run out. Starts arrive in turn (acme, beta, gamma), so
    # first in, first out answers acme's 20th call at about the 58th place; at 2:1:1 over the
    # whole backlog it comes at about the 40th, while beta and gamma still have 10 calls each.
    last_acme = max(i for i, tenant in enumerate(answered) if tenant == "acme")
    after = Counter(answered[last_acme + 1:])
    assert last_acme <= 52 and min(after["beta"], after["gamma"]) >= 4, (last_acme, after, answered)
    listed = [e async for e in dev.client.list_workflows(f'ReinTenant="acme" AND TaskQueue="{tq}"')]
    assert len(listed) == PER_TENANT


async def _until_scheduled(client, handles) -> None:
    """Until every run has scheduled its model call."""
    for handle in handles:
        for _ in range(600):
            history = await handle.fetch_history()
            if any(e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED for e in history.events):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"{handle.id} never scheduled its model call")


async def test_priorities_reorder_a_backlog(dev):
    """Ten runs at priority 5, then ten at priority 1, before any worker: the urgent ones go first."""
    tq = f"fleet-prio-{uuid.uuid4().hex[:6]}"
    with VendorServer(responder=lambda body: Reply(text="ok")) as srv:
        agent = Agent(provider=provider(srv), name="fleet-prio")
        client = ReinClient(dev.client, tq)
        handles = [await client.start("fleet-prio", f"low #{i}", priority=5) for i in range(10)]
        handles += [await client.start("fleet-prio", f"high #{i}", priority=1) for i in range(10)]
        async with rein.create_worker(dev.client, agents=[agent], task_queue=tq, max_concurrent_activities=1,
                                      max_concurrent_workflow_tasks=2):
            await asyncio.gather(*(h.result() for h in handles))
        order = [_prompt(r.body).split(" #")[0] for r in srv.requests]
    assert Counter(order) == {"low": 10, "high": 10}
    # FIFO answers every low one first (mean positions: high 14.5, low 4.5); strict priority the
    # reverse (4.5, 14.5). Workflow tasks and model calls both reorder, not perfectly: mean high
    # at least 3 places ahead.
    mean = {kind: sum(i for i, k in enumerate(order) if k == kind) / 10 for kind in ("high", "low")}
    assert mean["high"] + 3 <= mean["low"], order
    history = await handles[-1].fetch_history()
    scheduled = next(e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    assert scheduled.activity_task_scheduled_event_attributes.priority.priority_key in (0, 1)  # inherited


def test_run_priority_checks_its_input():
    assert run_priority("acme", 2).fairness_key == "acme"
    with pytest.raises(ValueError, match="priority must be 1"):
        run_priority(priority=9)
    with pytest.raises(ValueError, match="tenant must be"):
        run_priority("x" * 65)

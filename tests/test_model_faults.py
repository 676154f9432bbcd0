"""Model vendor faults over real HTTP (tests/vendor_server.py) in durable runs on a real dev server.

Each case asserts the run's end state and how many requests the vendor saw: Temporal's retry
policy is the only retry loop (litellm's and FallbackProvider's own retries are off in
durable runs), `Retry-After` is honoured, a missing or rejected key fails at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.common import SearchAttributeKey

import rein
from rein import Agent, LiteLLMProvider, LoopConfig
from rein.blueprint.providers import FallbackProvider
from rein.client import ReinClient
from rein.core.contract import recorded_reply
from tests.support.history import assert_secret_absent, decode_payload
from tests.vendor_server import Fail, Reply, Slow, VendorServer

KEY = "sk-test-" + uuid.uuid4().hex
REIN_STATUS = SearchAttributeKey.for_keyword("ReinStatus")


@pytest.fixture()
def srv():
    with VendorServer() as server:
        yield server


def litellm(srv: VendorServer, model: str = "openai/gpt-4o", **params) -> LiteLLMProvider:
    return LiteLLMProvider(model, api_base=srv.base_url + "/v1", **({"api_key": KEY} | params))


@contextlib.asynccontextmanager
async def serving(dev, agent: Agent, **config):  # noqa: ANN001, ANN201
    """A worker for `agent` and a run of it started with `config`: (its handle, a ReinClient)."""
    tq = f"mf-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "hi", **({"config": config} if config else {})},
            id=f"mf-{uuid.uuid4().hex[:8]}", task_queue=tq,
        )
        yield handle, ReinClient(dev.client, tq)


async def attempts_started(handle) -> list[int]:  # noqa: ANN001
    history = await handle.fetch_history()
    return [e.activity_task_started_event_attributes.attempt for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]


async def test_429_retry_after_is_honoured(dev, srv):
    srv.script([Fail(429, headers={"Retry-After": "40"}), Reply(text="late but fine")])
    async with serving(dev, Agent(provider=litellm(srv), name="mf-429")) as (handle, client):
        for _ in range(1200):  # the first attempt imports litellm in this process: allow a minute
            pending = (await handle.describe()).raw_description.pending_activities
            if pending and pending[0].attempt == 2 and pending[0].next_attempt_schedule_time.ToSeconds() > 0 \
                    and pending[0].last_attempt_complete_time.ToSeconds() > 0:
                break
            await asyncio.sleep(0.05)
        (activity,) = pending
        # Temporal scheduled the next attempt when the vendor said (40 s), not after its 1 s backoff.
        gap = activity.next_attempt_schedule_time.ToSeconds() - activity.last_attempt_complete_time.ToSeconds()
        assert gap >= 35, (gap, activity)
        assert "RateLimit" in activity.last_failure.message
        await client.cancel(handle.id, "not waiting 40 s in a test", wait=True)
        result = await client.outcome(client.handle(handle.id))  # closed CANCELED
    assert result.stop_reason == "cancelled"
    assert len(srv.requests) == 1


async def test_5xx_is_retried_by_temporal_only(dev, srv):
    srv.script([Fail(503), Fail(500), Reply(text="recovered")])
    agent = Agent(provider=litellm(srv), name="mf-5xx", config=LoopConfig(model_attempts=3, model_retry_interval_s=0.2))
    async with serving(dev, agent) as (handle, _):
        result = await handle.result()
    assert result["output"] == "recovered"
    assert len(srv.requests) == 3  # one request per activity attempt: litellm did not retry
    # A lean start's first call, scheduled with LoopConfig's defaults, only described the agent (its retry
    # interval is its own); the run's call then had the agent's policy. A started event records the last attempt.
    assert await attempts_started(handle) == [1, 3]
    assert await retry_policies(handle) == [(1.0, 2.0, 30.0, 3), (0.2, 2.0, 30.0, 3)]  # the agent's first wait, doubling


async def retry_policies(handle) -> list[tuple[float, float, float, int]]:  # noqa: ANN001
    """(first wait, backoff, longest wait, attempts) of each model call the run scheduled."""
    history = await handle.fetch_history()
    policies = [e.activity_task_scheduled_event_attributes.retry_policy for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and e.activity_task_scheduled_event_attributes.activity_type.name == "rein.call_model"]
    return [(p.initial_interval.ToTimedelta().total_seconds(), p.backoff_coefficient,
             p.maximum_interval.ToTimedelta().total_seconds(), p.maximum_attempts) for p in policies]


async def test_a_hanging_vendor_times_out_and_is_retried(dev, srv):
    srv.script([Slow(5, Reply(text="too late")), Reply(text="on time")])
    agent = Agent(provider=litellm(srv, timeout=30), name="mf-slow", config=LoopConfig(model_attempts=2))
    async with serving(dev, agent, model_timeout_s=2, model_retry_interval_s=0.1) as (handle, _):
        result = await handle.result()
    assert result["output"] == "on time"
    assert len(srv.requests) == 2
    # A client's override of the first wait, in the lean first call (which only described the agent: its
    # attempts are its own) and in the run's call.
    assert await retry_policies(handle) == [(0.1, 2.0, 30.0, 3), (0.1, 2.0, 30.0, 2)]


async def test_a_401_fails_fast_in_one_clear_sentence(dev, srv):
    srv.script([Fail(401, echo_auth=True)])
    async with serving(dev, Agent(provider=litellm(srv), name="mf-401")) as (handle, _):
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        assert (await handle.query("status"))["status"] == "failed"
    message = failure.value.cause.message
    assert "The vendor rejected the API key for openai/gpt-4o (HTTP 401)" in message
    assert KEY not in message
    assert len(srv.requests) == 1
    assert (await handle.describe()).typed_search_attributes.get(REIN_STATUS) == "failed"
    # the agent's name is in the run's input: proof the payloads were decoded
    await assert_secret_absent(await handle.fetch_history(), KEY, dev.client.data_converter, present="mf-401")


async def test_a_missing_key_fails_fast_without_calling_the_vendor(dev, srv, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = LiteLLMProvider("openai/gpt-4o", api_base=srv.base_url + "/v1")
    async with serving(dev, Agent(provider=provider, name="mf-nokey")) as (handle, _):
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        assert (await handle.query("status"))["status"] == "failed"
    assert "No API key for openai/gpt-4o: set OPENAI_API_KEY in the worker's environment." in (
        failure.value.cause.message
    )
    assert failure.value.cause.non_retryable
    assert srv.requests == []
    assert await attempts_started(handle) == [1]


async def test_fallback_is_one_provider_per_activity_attempt(dev):
    with VendorServer() as primary, VendorServer() as backup:
        primary.script([Fail(503)])
        backup.script([Reply(text="from the backup")])
        chain = FallbackProvider([litellm(primary), litellm(backup, model="openai/gpt-4o-mini")])
        async with serving(dev, Agent(provider=chain, name="mf-fallback")) as (handle, _):
            result = await handle.result()
        assert result["output"] == "from the backup"
        assert (len(primary.requests), len(backup.requests)) == (1, 1)
    history = await handle.fetch_history()
    completed = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    answer = recorded_reply(await decode_payload(completed[0].activity_task_completed_event_attributes.result.payloads[0],
                                                 dev.client.data_converter))  # a lean start's, beside the agent
    assert answer["model"] == "openai/gpt-4o-mini"  # the UI's activity result says which model answered
    assert await attempts_started(handle) == [2]  # Temporal's second attempt, not a retry inside the first

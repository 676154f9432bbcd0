"""Fleet control on Temporal's own primitives: priorities and fairness keys on runs, and
server-side rate limits and fairness weights on task queues (UpdateTaskQueueConfig).

rein keeps no rate limiter of its own: the matching service dispatches activity tasks of a
rate-limited queue no faster than its limit, across every worker, and in each tenant's
weighted share. See docs/fleet.md.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import RateLimit, TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    UpdateTaskQueueConfigRequest,
)
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import Priority

from rein import settings
from rein.core.contract import DEFAULT_TASK_QUEUE, SEARCH_KEYS, WORKFLOW_TYPE, model_queue
from rein.core.threads import THREAD_MEMO

MAX_TENANT = 64
"""Temporal's limit on a fairness key, in bytes."""
PRIORITIES = range(1, 6)
"""Temporal's default priority keys: 1 runs first, 5 last, 3 when none is given."""


def run_priority(tenant: str | None = None, priority: int | None = None) -> Priority:
    """The Temporal Priority of a run (its activities and child runs inherit it)."""
    if tenant is not None and not 0 < len(tenant.encode()) <= MAX_TENANT:
        raise ValueError(f"tenant must be 1 to {MAX_TENANT} bytes, got {len(tenant.encode())}")
    if priority is not None and priority not in PRIORITIES:
        raise ValueError(f"priority must be 1 (first) to 5 (last), got {priority}")
    if tenant is None and priority is None:
        return Priority.default
    return Priority(priority_key=priority, fairness_key=tenant)


@dataclass
class QueueLimits:
    """A task queue's server-side dispatch config, as `rein limits` shows it, and what it applies to."""

    task_queue: str
    rps: float | None = None
    """Activity tasks dispatched per second, across every worker (None: the server's default)."""
    tenant_rps: float | None = None
    """Each fairness key's own rate (scaled by its weight), when set."""
    weights: dict[str, float] = field(default_factory=dict)
    runs: int | None = None
    """Runs started on the queue, kept by the namespace (its model and tool calls are the queue's activity
    tasks); None for a provider's model queue, or when not asked (`with_scope`)."""
    running: int | None = None
    """Of those, the runs still open."""
    served: bool | None = None
    """A provider's model queue: whether a worker polls it (none: no model call is sent there)."""


def is_model_queue(task_queue: str) -> bool:
    return task_queue.startswith(f"{DEFAULT_TASK_QUEUE}.model.")


def provider_of(model: str) -> str | None:
    """The provider of `model`: the prefix of `provider/model`, else the provider LiteLLM's model table lists the
    bare name under (`gpt-4o-mini`: openai); None when it lists none. One reading for the CLI and the workers,
    so a limit set on `rein limits set --model openai/gpt-4o-mini` is where `Agent("gpt-4o-mini")`'s calls go."""
    if "/" in model:
        return model.split("/", 1)[0] or None
    entry = _model_table().get(model)
    return str(entry["litellm_provider"]) if isinstance(entry, dict) and entry.get("litellm_provider") else None


def provider_queue(model: str) -> str | None:
    """The model queue of `model`'s provider (`rein.model.openai` for `gpt-4o-mini` too), None when its provider
    is not known."""
    provider = provider_of(model)
    return model_queue(f"{provider}/") if provider else None


def limit_queue(model: str | None = None, queue: str | None = None) -> str:
    """The queue a limit applies to: a model's provider's queue, a named one, or rein's shared queue
    (REIN_TASK_QUEUE, default `rein`). A model goes as PROVIDER/MODEL: a bare name is refused with that form
    (a limit is the provider's, for all its models; `gpt-4o-mini` is no provider)."""
    if model and queue:
        raise ValueError("give --model or --queue, not both")
    if model and "/" not in model:
        provider = provider_of(model)
        said = (f"--model {provider}/{model} (LiteLLM's model table lists {model} under {provider})" if provider else
                f"PROVIDER/MODEL, e.g. --model openai/gpt-4o-mini (LiteLLM's model table does not list {model!r})")
        raise ValueError(f"give the model with its provider: {said}; a limit is on the provider's queue, for all "
                         "its models")
    if model:
        return model_queue(model)
    return queue or settings.current().task_queue or DEFAULT_TASK_QUEUE


async def set_limits(
    client: Client,
    *,
    model: str | None = None,
    queue: str | None = None,
    rps: float | None = None,
    tenant_rps: float | None = None,
    weights: dict[str, float] | None = None,
    unset_rps: bool = False,
    reason: str = "rein limits set",
) -> QueueLimits:
    """Set a queue's activity rate limit and tenants' fairness weights on the server; returns them."""
    task_queue = limit_queue(model, queue)
    if rps is not None and rps < 0 or tenant_rps is not None and tenant_rps < 0:
        raise ValueError("a rate limit is a number of requests per second, 0 or more")
    if any(not 0.001 <= w <= 1000 for w in (weights or {}).values()):
        raise ValueError("a fairness weight is between 0.001 and 1000")
    for tenant in weights or {}:
        run_priority(tenant)
    for kind in _queue_types(task_queue):
        request = UpdateTaskQueueConfigRequest(
            namespace=client.namespace, identity=client.identity, task_queue=task_queue, task_queue_type=kind,
            set_fairness_weight_overrides=weights or {},
        )
        if kind == TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW:  # the server rate-limits activity tasks only
            if weights:
                await client.workflow_service.update_task_queue_config(request)
            continue
        if rps is not None or unset_rps:
            request.update_queue_rate_limit.reason = reason
            if rps is not None:
                request.update_queue_rate_limit.rate_limit.CopyFrom(RateLimit(requests_per_second=rps))
        if tenant_rps is not None:
            request.update_fairness_key_rate_limit_default.reason = reason
            request.update_fairness_key_rate_limit_default.rate_limit.CopyFrom(RateLimit(requests_per_second=tenant_rps))
        await client.workflow_service.update_task_queue_config(request)
    return await queue_limits(client, task_queue)


def _queue_types(task_queue: str) -> list[TaskQueueType.ValueType]:
    """Rate limits bound activity dispatch; weights also share a run queue's workflow tasks."""
    if is_model_queue(task_queue):
        return [TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY]
    return [TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW]


async def queue_limits(client: Client, task_queue: str) -> QueueLimits:
    """What the server holds for `task_queue` (its activity side)."""
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            report_config=True,
        )
    )
    config = described.config
    limits = QueueLimits(task_queue=task_queue, weights=dict(config.fairness_weight_overrides))
    if config.HasField("queue_rate_limit") and config.queue_rate_limit.HasField("rate_limit"):
        limits.rps = config.queue_rate_limit.rate_limit.requests_per_second
    if config.HasField("fairness_keys_rate_limit_default") and config.fairness_keys_rate_limit_default.HasField("rate_limit"):
        limits.tenant_rps = config.fairness_keys_rate_limit_default.rate_limit.requests_per_second
    return limits


def routed_providers() -> set[str]:
    """Providers whose model calls a worker routes to their own queue (REIN_MODEL_QUEUES; `*`: all)."""
    return set(settings.current().model_queues)


def routed_queue(model: str) -> str | None:
    """The queue a worker schedules `model`'s calls on (REIN_MODEL_QUEUES), or None: the run's own. A model
    without a provider prefix is its provider's as LiteLLM resolves it (`gpt-4o-mini`: openai's)."""
    providers = routed_providers()
    if not providers:
        return None
    provider = provider_of(model)
    if provider is None:  # LiteLLM cannot call it either: routed only with `*`, on a queue of its own name
        return model_queue(model) if "*" in providers else None
    return model_queue(f"{provider}/") if "*" in providers or provider in providers else None


def known_queues(run_queues: list[str] | None = None) -> list[str]:
    """Queues `rein limits` looks at by default: rein's task queue, the queues runs went to (`run_queues`),
    then the model queue of every provider LiteLLM knows and of every provider routed here (REIN_MODEL_QUEUES)."""
    providers = (known_providers() | routed_providers()) - {"*"}
    first = settings.current().task_queue or DEFAULT_TASK_QUEUE
    models = sorted({model_queue(f"{p}/") for p in providers})
    return list(dict.fromkeys([first, *(run_queues or []), *models]))


def known_providers() -> set[str]:
    """The providers LiteLLM knows, from the model table it ships. Empty when LiteLLM is not installed."""
    return {str(m["litellm_provider"]) for m in _model_table().values()
            if isinstance(m, dict) and str(m.get("litellm_provider", "")).replace("_", "").replace("-", "").isalnum()}


@functools.cache
def _model_table() -> dict[str, Any]:
    """LiteLLM's model and price table, read as the file it ships (importing litellm costs a CLI command
    seconds); empty when LiteLLM is not installed."""
    import importlib.util
    import json
    from pathlib import Path

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    table = Path(next(iter(spec.submodule_search_locations))) / "model_prices_and_context_window_backup.json"
    try:
        found = json.loads(table.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


async def all_limits(client: Client, queues: list[str] | None = None) -> list[QueueLimits]:
    """Every limit that is set, on `queues` (default `known_queues()` with the queues of rein's newest runs): the
    first queue (rein's) always, the others when they have a rate limit, a per-tenant rate or weights."""
    names = queues if queues is not None else known_queues(await run_queues(client))
    gate = asyncio.Semaphore(16)

    async def one(name: str) -> QueueLimits:
        async with gate:
            return await queue_limits(client, name)

    found = await asyncio.gather(*(one(name) for name in names))
    return [row for i, row in enumerate(found)
            if i == 0 or row.rps is not None or row.tenant_rps is not None or row.weights]


async def model_calls_served(client: Client, model: str) -> bool:
    """Whether a worker polled `model`'s provider queue for model calls recently: without one, no worker
    routes the provider's calls there (they would wait forever), so a limit on that queue slows nothing."""
    return await _polled(client, limit_queue(model=model))


async def _polled(client: Client, task_queue: str) -> bool:
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    now, fresh_s = time.time(), settings.current().poller_fresh_s
    return any(now - p.last_access_time.ToSeconds() < fresh_s for p in described.pollers)


def not_routed(model: str) -> str:
    """The one line `rein limits set --model` refuses with when nothing serves the provider's queue."""
    queue = limit_queue(model=model)
    provider = queue.removeprefix(f"{DEFAULT_TASK_QUEUE}.model.")
    return (f"no worker serves {queue}, so {model}'s calls are not sent there and a limit on it would slow "
            f"nothing: start the workers with REIN_MODEL_QUEUES={provider} (or *) and one on that queue "
            f"(`rein worker --agent MOD:ATTR --task-queue {queue}`, with REIN_MODEL_QUEUES too), then set the "
            f"limit (`rein limits set --model {model} --force` sets it anyway); docs/fleet.md")


async def runs_on(client: Client, task_queue: str) -> tuple[int, int]:
    """(runs started on `task_queue` that the namespace keeps, those still open): the runs whose model and
    tool calls a limit on the queue paces."""
    query = f'TaskQueue="{task_queue}"'
    total, running = await asyncio.gather(client.count_workflows(query),
                                          client.count_workflows(f'{query} AND ExecutionStatus="Running"'))
    return total.count, running.count


async def run_queues(client: Client, newest: int = 200) -> list[str]:
    """The task queues rein's newest runs went to, most used first: where a limit would pace them."""
    counts: dict[str, int] = {}
    async for execution in client.list_workflows(f'WorkflowType="{WORKFLOW_TYPE}"', limit=newest):
        if execution.task_queue:
            counts[execution.task_queue] = counts.get(execution.task_queue, 0) + 1
    return sorted(counts, key=lambda q: (-counts[q], q))


async def with_scope(client: Client, rows: list[QueueLimits]) -> list[QueueLimits]:
    """`rows` with what each applies to: a model queue whether a worker polls it, another queue its runs."""
    async def scope(row: QueueLimits) -> None:
        if is_model_queue(row.task_queue):
            row.served = await _polled(client, row.task_queue)
        else:
            row.runs, row.running = await runs_on(client, row.task_queue)

    await asyncio.gather(*(scope(row) for row in rows))
    return rows


@dataclass
class Spend:
    """One line of `rein usage`: runs, tokens and cost of a tenant or an agent."""

    key: str
    runs: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    """Runs with tokens but no known cost (a model without a price: see rein.core.prices)."""


@dataclass
class SpendReport:
    """`rein usage`: spend per tenant and per agent."""

    tenants: list[Spend]
    agents: list[Spend]


async def usage_since(client: Client, since: timedelta, now: datetime | None = None,
                      include_evals: bool = False) -> SpendReport:
    """Spend of the runs started within `since`, per tenant and per agent, from visibility.

    Top-level runs only (a parent's counters include its child agents'; a thread a schedule started is a
    child of its ReinScheduledMessage run, and counts), and the last run of each continue-as-new chain (it
    carries the chain's counters). What-if runs (`rein eval`, ReinEvalOf) only
    with `include_evals`."""
    start = (now or datetime.now(UTC)) - since
    query = f'WorkflowType="{WORKFLOW_TYPE}" AND StartTime > "{start.strftime("%Y-%m-%dT%H:%M:%SZ")}"'
    tenants: dict[str, Spend] = {}
    agents: dict[str, Spend] = {}
    async for execution in client.list_workflows(query):
        if execution.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
            continue
        if execution.parent_id and not (await execution.memo()).get(THREAD_MEMO):
            continue
        attributes = execution.typed_search_attributes
        if attributes.get(SEARCH_KEYS["ReinEvalOf"]) and not include_evals:
            continue
        tokens = attributes.get(SEARCH_KEYS["ReinTokens"]) or 0
        cost = attributes.get(SEARCH_KEYS["ReinCostUsd"])
        for key, table in (
            (attributes.get(SEARCH_KEYS["ReinTenant"]) or "(none)", tenants),
            (attributes.get(SEARCH_KEYS["ReinAgent"]) or "(unknown)", agents),
        ):
            line = table.setdefault(key, Spend(key))
            line.runs += 1
            line.tokens += tokens
            line.cost_usd += cost or 0.0
            line.unpriced += int(cost is None and tokens > 0)
    return SpendReport(
        tenants=sorted(tenants.values(), key=lambda s: (-s.cost_usd, -s.tokens, s.key)),
        agents=sorted(agents.values(), key=lambda s: (-s.cost_usd, -s.tokens, s.key)),
    )

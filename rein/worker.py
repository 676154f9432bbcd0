"""`create_worker`: a temporalio Worker that runs AgentWorkflow and rein's activities."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from rein.contract import DEFAULT_TASK_QUEUE, SEARCH_ATTRIBUTES

if TYPE_CHECKING:
    from rein.agent import Agent

log = logging.getLogger("rein.worker")

_INDEXED = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
}


def with_rein_converter(client: Client) -> Client:
    """The same connection with rein's data converter (pydantic), keeping the client's codec and storage."""
    from rein.temporal.converter import rein_data_converter

    if client.data_converter.payload_converter_class is pydantic_data_converter.payload_converter_class:
        return client
    return Client(**{**client.config(), "data_converter": rein_data_converter(client.data_converter)})


class SearchAttributeRegistry:
    """Finds which of rein's search attributes the namespace has, adding missing ones when allowed.

    Checked once per worker, lazily; a server that cannot tell (the time-skipping
    test server) simply gets no search attribute upserts.
    """

    def __init__(self, client: Client):
        self.client = client
        self._available: list[str] | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> list[str]:
        if self._available is None:
            async with self._lock:
                if self._available is None:
                    self._available = await ensure_search_attributes(self.client)
        return self._available

    def reset(self) -> None:
        self._available = None


async def ensure_search_attributes(client: Client) -> list[str]:
    have: set[str] = set()
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
        have = set(listed.custom_attributes)
        missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in have}
        if missing:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=client.namespace,
                    search_attributes={k: _INDEXED[v] for k, v in missing.items()},
                )
            )
            have |= set(missing)
    except Exception as exc:  # no permission, or a server without the operator API
        log.warning("rein search attributes unavailable (%s); runs continue without them", exc)
    return [k for k in SEARCH_ATTRIBUTES if k in have]


def agent_map(agents: Iterable[Agent] | Mapping[str, Agent]) -> MutableMapping[str, Agent]:
    if isinstance(agents, MutableMapping):
        return agents  # live: agents added later are served too (the in-process engine relies on it)
    if isinstance(agents, Mapping):
        return dict(agents)
    mapping: dict[str, Agent] = {}
    for agent in agents:
        if agent.name in mapping and mapping[agent.name] is not agent:
            raise ValueError(f"two different agents are named {agent.name!r}; give each a unique name")
        mapping[agent.name] = agent
    return mapping


def create_worker(
    client: Client,
    agents: Iterable[Agent] | Mapping[str, Agent],
    task_queue: str = DEFAULT_TASK_QUEUE,
    **worker_kwargs: Any,
) -> Worker:
    """A Worker serving `agents` (by name) on `task_queue`; use it as `async with`."""
    from rein.activities import AgentActivities
    from rein.workflows import AgentWorkflow

    from rein.temporal.storage import max_payload_bytes

    client = with_rein_converter(client)
    activities = AgentActivities(
        agent_map(agents),
        SearchAttributeRegistry(client),
        cache_size=worker_kwargs.get("max_cached_workflows", 1000),
        max_payload_bytes=max_payload_bytes(client.data_converter),
    )
    # AgentWorkflow is rein's own code and imports only pure modules, so it runs outside the
    # sandbox by default: ~2 ms less worker CPU per loop iteration (bench/README.md). The
    # replay tests run it sandboxed, which keeps it sandbox-clean; pass workflow_runner to choose.
    worker_kwargs.setdefault("workflow_runner", UnsandboxedWorkflowRunner())
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow],
        activities=[activities.describe_agent, activities.call_model, activities.run_tool],
        **worker_kwargs,
    )


def load_agent(target: str) -> Agent:
    """`pkg.module:attr` → the Agent it names (the current directory is importable)."""
    from rein.agent import Agent

    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"expected module:attr, got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    agent = getattr(importlib.import_module(module_name), attr, None)
    if not isinstance(agent, Agent):
        raise SystemExit(f"{target} is not a rein.Agent (got {type(agent).__name__})")
    return agent

"""`create_worker`: a temporalio Worker serving rein agents, built on ReinPlugin."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.worker import Worker

from rein.blueprint.agent import load_agent  # noqa: F401  (public here too: `rein worker --agent`'s loader)
from rein.core.contract import DEFAULT_TASK_QUEUE
from rein.temporal.plugin import ReinPlugin, agent_map
from rein.temporal.search_attributes import SearchAttributeRegistry, ensure_search_attributes

if TYPE_CHECKING:
    from rein.blueprint.agent import Agent

__all__ = [
    "create_worker",
    "load_agent",
    "agent_map",
    "ensure_search_attributes",
    "SearchAttributeRegistry",
]


def create_worker(
    client: Client,
    agents: Iterable[Agent] | Mapping[str, Agent],
    task_queue: str = DEFAULT_TASK_QUEUE,
    *,
    sandboxed: bool = True,
    deployment: str | None = None,
    build_id: str | None = None,
    versioning: str | None = None,
    promote: str | None = None,
    lean_start: bool | None = None,
    route_models: bool = True,
    **worker_kwargs: Any,
) -> Worker:
    """A Worker serving `agents` (by name) on `task_queue`; use it as `async with`.

    The same as `Worker(client, task_queue=..., plugins=[ReinPlugin(agents=..., sandboxed=..., deployment=...,
    build_id=..., versioning=..., promote=..., lean_start=..., route_models=...)])`: with a deployment name (or
    REIN_DEPLOYMENT) it is a versioned worker (docs/deploys.md). `lean_start` is accepted and ignored (every new
    conversation starts lean).
    """
    plugin = ReinPlugin(agents=agent_map(agents), sandboxed=sandboxed, deployment=deployment, build_id=build_id,
                        versioning=versioning, promote=promote, lean_start=lean_start, route_models=route_models)
    plugins = [*worker_kwargs.pop("plugins", []), plugin]
    with warnings.catch_warnings():
        # A client connected with ReinPlugin() plus this worker's ReinPlugin(agents): they merge.
        warnings.filterwarnings("ignore", message=r"The same plugin type .*ReinPlugin")
        return Worker(client, task_queue=task_queue, plugins=plugins, **worker_kwargs)

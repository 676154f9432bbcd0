"""ReinPlugin: rein inside any temporalio Client or Worker.

    client = await Client.connect("localhost:7233", plugins=[ReinPlugin()])
    worker = Worker(client, task_queue="rein", workflows=[MyWorkflow], plugins=[ReinPlugin(agents=[agent])])

On a Client it installs rein's data converter (pydantic, keeping the codec and
external storage the client already has). On a Worker it also registers
AgentWorkflow and rein's activities for the given agents, and lets rein's pure
modules and pydantic through the workflow sandbox. A Worker whose client lacks
rein's converter gets it too, so the plugin alone is enough on either side.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
from collections.abc import (
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    MutableMapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any

from temporalio.client import Client, ClientConfig
from temporalio.common import WorkerDeploymentVersion
from temporalio.plugin import SimplePlugin
from temporalio.worker import (
    UnsandboxedWorkflowRunner,
    Worker,
    WorkerConfig,
    WorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from rein.blueprint.agent import uses_litellm, with_tool_agents
from rein.core.prices import load_litellm_off_loop
from rein.temporal.converter import has_rein_converter, rein_data_converter
from rein.temporal.deployment import (
    default_build_id,
    deployment_config,
    promote_policy,
    versioning_behavior,
    with_default_behavior,
    worker_version,
)
from rein.temporal.promotion import ReplayCheckActivity, promote, replayer_of
from rein.temporal.sandbox import PURE_MODULES, SANDBOX_PASSTHROUGH, sandbox_runner  # noqa: F401  (public here too)
from rein.temporal.storage import INLINE_LIMIT, max_payload_bytes, prune_periodically
from rein.tracing.interceptors import with_tracing
from rein.tracing.setup import enabled as tracing_on

if TYPE_CHECKING:
    from rein.blueprint.agent import Agent

PLUGIN_NAME = "rein.ReinPlugin"

TRACING_PASSTHROUGH = ("opentelemetry", "rein.tracing")
"""With tracing on (rein.tracing): the OpenTelemetry SDK and rein's span code, shared with the worker."""


def agent_map(agents: Iterable[Agent] | Mapping[str, Agent] | None) -> MutableMapping[str, Agent]:
    """Agents by name. A mutable mapping stays live: agents added later are served too (the engine relies on it)."""
    if agents is None:
        return {}
    if isinstance(agents, MutableMapping):
        return agents
    if isinstance(agents, Mapping):
        return dict(agents)
    mapping: dict[str, Agent] = {}
    for agent in agents:
        if agent.name in mapping and mapping[agent.name] is not agent:
            raise ValueError(f"two different agents are named {agent.name!r}; give each a unique name")
        mapping[agent.name] = agent
    return mapping


def with_rein_plugin(client: Client) -> Client:
    """`client` if it already speaks rein's converter, else the same connection with ReinPlugin() added."""
    if has_rein_converter(client):
        return client
    config = client.config()  # a copy
    config["plugins"] = [*config.get("plugins", []), ReinPlugin()]
    return Client(**config)


async def close_mcp_connections(agents: Mapping[str, Agent]) -> None:
    """Close the MCP connections these agents (and the agents they use as tools) pooled on this loop."""
    for agent in with_tool_agents(agents.values()):
        if agent.mcp is not None:
            try:
                await agent.mcp.aclose()
            except Exception as exc:  # shutting down: say so, never keep the worker from stopping
                logging.getLogger("rein").warning("closing MCP connections of agent %s: %s", agent.name, exc)


class ReinPlugin(SimplePlugin):
    """rein's converter, AgentWorkflow, activities and sandbox passthrough for a temporalio Client/Worker.

    Args:
        agents: the agents a Worker serves, by `Agent.name` (or a name → Agent mapping).
            Without agents (`ReinPlugin()`) the plugin installs only the converter and the
            sandbox passthrough: enough for a client, or for a worker of your own workflows that
            start agents as child workflows on another worker's task queue.
        sandboxed: run workflows in temporalio's sandbox (default). `False` uses
            `UnsandboxedWorkflowRunner` for the whole worker: AgentWorkflow imports only pure
            modules, and bench/README.md measures what the sandbox costs per loop iteration.
        deployment, build_id: run the Worker as version `<deployment>.<build_id>` of a Temporal
            worker deployment (Worker Versioning). Default: REIN_DEPLOYMENT and REIN_BUILD_ID, the build id
            defaulting to a digest of rein's workflow-side code; no deployment name = versioning off (the
            Worker then reports that digest as its build id, unless given its own). A Worker given its own
            `deployment_config` keeps it.
        versioning: how a versioned Worker's runs behave: "auto-upgrade" (default: REIN_VERSIONING, else
            auto-upgrade: a run moves to the current build at its next workflow task) or "pinned" (a run
            finishes on the build it started on).
        make_current, promote: a versioned Worker makes its version current when the deployment has none
            yet (its first build) and, with `promote="new"` (default: REIN_PROMOTE, else "new"), when it is a
            build never current before, once, after replaying the runs that would move to it
            (rein.temporal.promotion); with "manual" later builds become current by the operator
            (`rein deployment set-current`, a ramp). Nothing changes the routing after that (docs/deploys.md).
        lean_start: accepted for earlier callers and ignored: every new conversation starts lean, learning its
            agent with its first model call (rein.workflows.start; docs/deploys.md, "One way to version").
        route_models: schedule model calls on their provider's queue where REIN_MODEL_QUEUES says so (default).
            False keeps them on the worker's own queue: a worker serving a changed definition of a fleet's
            agent (`rein eval`) must not send its calls to the fleet's model workers.
    """

    def __init__(
        self,
        agents: Iterable[Agent] | Mapping[str, Agent] | None = None,
        *,
        sandboxed: bool = True,
        deployment: str | None = None,
        build_id: str | None = None,
        versioning: str | None = None,
        make_current: bool = True,
        promote: str | None = None,
        lean_start: bool | None = None,  # ignored: see the docstring
        route_models: bool = True,
    ):
        self.route_models = route_models
        self.agents = agent_map(agents) if agents is not None else None
        self.version: WorkerDeploymentVersion | None = worker_version(deployment, build_id) if agents is not None else None
        self.behavior = versioning_behavior(versioning)
        self.make_current = make_current
        self.promotion = promote_policy(promote)
        self.replay_check = ReplayCheckActivity()
        self._cache_size = 1000
        self._max_payload_bytes = INLINE_LIMIT
        self.sandboxed = sandboxed
        self._versioned = False
        """The Worker being configured is versioned (its workflows may declare a versioning behavior)."""
        super().__init__(
            PLUGIN_NAME,
            data_converter=rein_data_converter,
            workflows=self._add_workflows,
            activities=self._add_activities,
            workflow_runner=self._runner,
        )

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        config = super().configure_client(config)
        if tracing_on():
            config["interceptors"] = with_tracing(config.get("interceptors", []), worker=False)
        return config

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        from rein.core.log import quiet_expected_failures

        quiet_expected_failures()  # rein's expected activity failures: one log line, no traceback
        if tracing_on():
            on_client = config["client"].config().get("interceptors", []) if config.get("client") is not None else []
            config["interceptors"] = with_tracing(config.get("interceptors", []), worker=True, present=on_client)
        client = config.get("client")
        if client is not None and not has_rein_converter(client):
            client_config = client.config()  # a copy
            client_config["data_converter"] = rein_data_converter(client.data_converter)
            config["client"] = Client(**client_config)
        # The activities' conversation cache is as large as the workflow cache, and they refuse
        # results larger than the client's converter can record (its external store's limit).
        self._cache_size = config.get("max_cached_workflows", 1000)
        if self.agents is not None and not config.get("identity") and _persons(config.get("client")):
            # A client rein.client.connect() made is the person's: its worker stays one process in histories, the
            # server's poller lists and the deployment's API, as temporalio names it.
            config["identity"] = f"{os.getpid()}@{socket.gethostname()}"
        if config.get("client") is not None:
            self._max_payload_bytes = max_payload_bytes(config["client"].data_converter)
        given = config.get("deployment_config")
        self._versioned = (given.use_worker_versioning if given is not None else self.version is not None)
        if given is not None:
            config["deployment_config"] = with_default_behavior(given)
        elif self.version is not None:
            config["deployment_config"] = deployment_config(self.version, self.behavior)
            if config.get("task_queue"):
                _QUEUES.setdefault(self.version.to_canonical_string(), set()).add(config["task_queue"])
        elif self.agents is not None and not config.get("build_id") and not config.get("use_worker_versioning"):
            # Unversioned, the build id is only reported; temporalio's default reads and hashes the
            # bytecode of every loaded module (0.1 s of CPU as a worker starts, 0.3 s with litellm).
            config["build_id"] = default_build_id()
        return super().configure_worker(config)

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Runs the Worker once LiteLLM is loaded (when an agent calls its model through it); a versioned one also
        promotes its version (a new build becomes current) and carries on older builds' stuck runs.
        Meanwhile it prunes old payload files (rein.temporal.storage); at shutdown the served agents'
        pooled MCP connections are closed."""
        if uses_litellm((self.agents or {}).values()):
            # Before the worker polls: a fresh worker's first model calls would otherwise all wait for this
            # import (seconds), then reach the vendor together, however evenly a rate limit dispatched them.
            await load_litellm_off_loop()
        housekeeping = asyncio.ensure_future(prune_periodically(worker.client.data_converter))
        try:
            await self._run_worker(worker, next)
        finally:
            housekeeping.cancel()
            await close_mcp_connections(self.agents or {})

    async def _run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        config = worker.config(active_config=True)
        versioned = config.get("deployment_config")
        self.replay_check.replayer = replayer_of(worker)
        if self.agents is None or versioned is None or self.version is None or not self.make_current:
            return await super().run_worker(worker, next)  # unversioned, not rein's, or the user's own config
        promotion = promoting(worker.client, versioned.version, self.behavior, self.promotion)
        try:
            await super().run_worker(worker, next)
        finally:
            promotion.cancel()

    def _runner(self, runner: WorkflowRunner | None) -> WorkflowRunner:
        if not self.sandboxed:
            return UnsandboxedWorkflowRunner()
        runner = sandbox_runner(runner)
        if tracing_on() and isinstance(runner, SandboxedWorkflowRunner):
            passthrough = runner.restrictions.with_passthrough_modules(*TRACING_PASSTHROUGH)
            runner = dataclasses.replace(runner, restrictions=passthrough)
        return runner

    def _add_workflows(self, workflows: Sequence[type] | None) -> Sequence[type]:
        from rein.workflows import (
            AgentWorkflow,
            DescribeAgentWorkflow,
            PolicyWorkflow,
            ReplayCheckWorkflow,
            ScheduledMessageWorkflow,
            VersionedPolicyWorkflow,
        )

        workflows = list(workflows or [])
        if self.agents is not None:
            # The rules' one workflow always follows the current build; a worker may declare that only when it is
            # versioned (the server refuses a versioning behavior from an unversioned worker).
            policy = VersionedPolicyWorkflow if self._versioned else PolicyWorkflow
            ours = (AgentWorkflow, DescribeAgentWorkflow, ScheduledMessageWorkflow, ReplayCheckWorkflow, policy)
            workflows += [w for w in ours if w not in workflows]
        return workflows

    def _add_activities(self, activities: Sequence[Callable] | None) -> Sequence[Callable]:
        from rein.activities import AgentActivities, policy
        from rein.temporal.search_attributes import SearchAttributeRegistry

        activities = list(activities or [])
        if self.agents is None:
            return activities
        activities = [a for a in activities if not isinstance(getattr(a, "__self__", None), ReplayCheckActivity)]
        # A ReinPlugin on the client already added rein's activities: serve its agents and ours together.
        earlier = [a for a in activities if isinstance(getattr(a, "__self__", None), AgentActivities)]
        agents: MutableMapping[str, Agent] = self.agents
        if earlier:
            previous = earlier[0].__self__.agents  # type: ignore[attr-defined]
            agents = {**previous, **self.agents}
            activities = [a for a in activities if a not in earlier and a not in policy.definitions()]
        served = AgentActivities(
            agents,
            SearchAttributeRegistry(),
            cache_size=getattr(self, "_cache_size", 1000),
            max_payload_bytes=getattr(self, "_max_payload_bytes", INLINE_LIMIT),
            route_models=self.route_models,
        )
        return [*activities, *served.definitions(), self.replay_check.replay_check]



def _persons(client: Client | None) -> bool:
    """Whether the client's identity is the person's (REIN_IDENTITY or USER@HOST), not a process's."""
    from rein import settings

    return client is not None and client.identity == settings.current().identity


_QUEUES: dict[str, set[str]] = {}
"""The task queues this process's Workers of each version poll: a promotion waits for all to register."""
_PROMOTIONS: dict[str, asyncio.Future[bool]] = {}
"""Each version's promotion in this process: a `rein worker` runs a Worker per queue, and promotes once."""


def promoting(client: Client, version: WorkerDeploymentVersion, behavior: Any, policy: str) -> asyncio.Future[bool]:
    """This process's one promotion of `version` (rein.temporal.promotion), started by its first Worker."""
    key = version.to_canonical_string()
    if key not in _PROMOTIONS or _PROMOTIONS[key].cancelled():
        _PROMOTIONS[key] = asyncio.ensure_future(promote(client, version, behavior, policy,
                                                         queues=lambda: _QUEUES.get(key, set())))
    return _PROMOTIONS[key]



async def promoted(version: WorkerDeploymentVersion) -> bool | None:
    """Until this process's promotion of `version` has ended: whether it made the version current (None: none
    has begun yet)."""
    task = _PROMOTIONS.get(version.to_canonical_string())
    if task is None:
        return None
    try:
        return await asyncio.shield(task)
    except Exception:
        return False

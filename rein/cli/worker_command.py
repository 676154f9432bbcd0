"""`rein worker`: serve agents' runs on the shared queue and on each agent's own queue."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Annotated, Any

import typer

from rein.cli.app import (
    EXIT_USAGE,
    Address,
    CliError,
    Namespace,
    app,
    connect_client,
    err_console,
    load_agent_target,
)


@app.command()
def worker(
    agent: Annotated[list[str], typer.Option("--agent", "-a", help="MODULE:ATTR of a rein.Agent; repeat for more.",
                                             show_default=False)],
    task_queue: Annotated[str | None, typer.Option(help="Shared task queue (default: REIN_TASK_QUEUE or `rein`; a "
                                                "worker of a deployment named otherwise: none, only its agents' own queues).")] = None,
    address: Address = None,
    namespace: Namespace = None,
    deployment: Annotated[str | None, typer.Option(help="Worker Versioning deployment: the application (default: "
                                                   "REIN_DEPLOYMENT, else `rein`; `none`: versioning off). See "
                                                   "docs/deploys.md.")] = None,
    build_id: Annotated[str | None, typer.Option(help="This build's id (default: REIN_BUILD_ID, else a digest of "
                                                 "rein's workflow-side code).")] = None,
    versioning: Annotated[str | None, typer.Option(help="`auto-upgrade`: runs move to the current build at their next "
                                                   "task (default: REIN_VERSIONING, else auto-upgrade); `pinned`: a run "
                                                   "finishes on the build it started on.")] = None,
    promote: Annotated[str | None, typer.Option(help="`new`: this build becomes current when it is new, after replaying "
                                                "the runs that move to it (default: REIN_PROMOTE, else new); `manual`: "
                                                "only a deployment's first build.")] = None,
    max_cached_workflows: Annotated[int | None, typer.Option(
        help="Runs kept in memory between tasks (0: every task replays the run's history).")] = None,
) -> None:
    """Serve these agents' runs until Ctrl-C. API keys are read from this process's environment only."""
    agents = [load_agent_target(target) for target in agent]  # a mistyped target: told before temporalio loads
    from rein import settings
    from rein.blueprint.agent import uses_litellm
    from rein.core.contract import DEFAULT_TASK_QUEUE
    from rein.temporal.deployment import DEFAULT_DEPLOYMENT, promote_policy, versioning_behavior, worker_version

    if uses_litellm(agents):
        from rein.core.prices import preload_litellm

        preload_litellm()  # meanwhile the worker connects (ReinPlugin waits for it before polling)
    now = settings.current()
    chosen, named = task_queue or now.task_queue, deployment or now.deployment
    try:
        version = worker_version(deployment, build_id, default=DEFAULT_DEPLOYMENT)
        policy = promote_policy(promote)
        versioning_behavior(versioning)
    except ValueError as err:
        raise CliError(str(err), EXIT_USAGE) from None
    if not logging.getLogger().handlers:  # the worker's log: activity failures, retries, its serving line
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The shared queue belongs to the default application (deployment `rein`): a worker of a deployment named
    # otherwise polls it only when told to (a queue's new runs go to one deployment's current version).
    default_app = version is None or version.deployment_name == DEFAULT_DEPLOYMENT
    shared = [chosen or DEFAULT_TASK_QUEUE] if chosen or default_app else []
    asyncio.run(_serve(agents, shared, version, address, namespace, max_cached_workflows, policy, versioning,
                       bool(named)))


async def _serve(agents: list[Any], shared: list[str], version: Any, address: str | None, namespace: str | None,
                 max_cached_workflows: int | None, promote: str, versioning: str | None, named: bool) -> None:
    """Serve until SIGINT/SIGTERM: the shared queue (`rein start`, raw clients) and each agent's own queue, where
    the runs `Agent.run`/`rein run` started live (a script's unfinished runs are finished here too)."""
    import contextlib

    from rein import settings
    from rein.core.contract import DEFAULT_TASK_QUEUE, agent_task_queue
    from rein.durable.temporal_worker import create_worker, ensure_search_attributes
    from rein.temporal.deployment import VERSIONING_OFF

    console = err_console()
    client = await connect_client(address, namespace, person=False)  # one process among the workers
    available = await ensure_search_attributes(client.client)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    queues = shared + [q for q in dict.fromkeys(agent_task_queue(a.name) for a in agents) if q not in shared]
    version = await _checked_version(client.client, version, named)
    cache: dict[str, Any] = {} if max_cached_workflows is None else {"max_cached_workflows": max_cached_workflows}
    async with contextlib.AsyncExitStack() as stack:
        for name in queues:
            await stack.enter_async_context(create_worker(
                client.client, agents, task_queue=name,
                deployment=version.deployment_name if version else VERSIONING_OFF,
                build_id=version.build_id if version else None, versioning=versioning, promote=promote, **cache))
        names = ", ".join(a.name for a in agents)
        target = client.client.service_client.config.target_host
        logging.getLogger("rein.worker").info("%s", settings.summary())  # what it runs with (masked), once it can
        # worker.py's line, which scripts and tests wait for ("serving:").
        logging.getLogger("rein.worker").info(
            "rein worker on %s (%s) queues %s, version %s, serving: %s (search attributes: %s)", target,
            client.client.namespace, ", ".join(queues), version.to_canonical_string() if version else "unversioned",
            names, ", ".join(available) or "none")
        if len(available) < 4:
            console.print(f"[yellow]search attributes available: {', '.join(available) or 'none'}[/]")
        if not shared:
            console.print(f"[dim]deployment {version.deployment_name}: not on the shared queue {DEFAULT_TASK_QUEUE!r} "
                          "(the default application's); clients start on the agents' own queues, or give --task-queue.[/]")
        console.print("[dim]Ctrl-C stops; runs in flight continue on the next worker.[/]")
        await stop.wait()


async def _checked_version(client: Any, version: Any, named: bool) -> Any:
    """The version to serve as: on a namespace with worker deployments disabled, none (a named deployment refuses)."""
    from temporalio.service import RPCError, RPCStatusCode

    from rein.temporal.deployment import describe

    if version is None:
        return None
    try:
        await describe(client, version.deployment_name)
    except RPCError as err:
        if err.status not in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
            raise
        if named:
            raise CliError(f"{err.message.rstrip('.')} (Worker Versioning): run with --deployment none, or enable worker "
                           "deployments on the server (Temporal >= 1.28)", EXIT_USAGE) from None
        logging.getLogger("rein.worker").warning("%s: this worker is unversioned (docs/deploys.md)", err.message.rstrip("."))
        return None
    return version

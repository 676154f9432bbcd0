"""`rein worker`: serve agents' runs on the shared queue and on each agent's own queue."""

from __future__ import annotations

import asyncio
import logging
import os
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
    deployment: Annotated[str | None, typer.Option(help="Worker Versioning deployment name (default: REIN_DEPLOYMENT, "
                                                   "else the shared queue's name; `none`: versioning off). See "
                                                   "docs/deploys.md.")] = None,
    build_id: Annotated[str | None, typer.Option(help="This build's id (default: REIN_BUILD_ID, else a digest of "
                                                 "rein's workflow-side code).")] = None,
    promote: Annotated[str | None, typer.Option(help="`new`: this build becomes current when it is new (default: "
                                                "REIN_PROMOTE, else new); `manual`: only a deployment's first build.")] = None,
    max_cached_workflows: Annotated[int | None, typer.Option(
        help="Runs kept in memory between tasks (0: every task replays the run's history).")] = None,
) -> None:
    """Serve these agents' runs until Ctrl-C. API keys are read from this process's environment only."""
    agents = [load_agent_target(target) for target in agent]  # a mistyped target: told before temporalio loads
    from rein.blueprint.agent import uses_litellm
    from rein.core.contract import DEFAULT_TASK_QUEUE
    from rein.temporal.deployment import deployment_for_queue, promote_policy, worker_version

    if uses_litellm(agents):
        from rein.core.prices import preload_litellm

        preload_litellm()  # meanwhile the worker connects (ReinPlugin waits for it before polling)
    chosen = task_queue or os.environ.get("REIN_TASK_QUEUE")
    named = deployment or os.environ.get("REIN_DEPLOYMENT")
    try:
        version = worker_version(deployment, build_id, default=deployment_for_queue(chosen or DEFAULT_TASK_QUEUE))
        policy = promote_policy(promote)
    except ValueError as err:
        raise CliError(str(err), EXIT_USAGE) from None
    if not logging.getLogger().handlers:  # the worker's log: activity failures, retries, its serving line
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # A versioned worker on a shared queue takes it over: once its deployment has a current version,
    # every new run there goes to that version, other agents' too (unversioned workers beside it get
    # none). A deployment named after the queue is the queue's; one named otherwise polls the shared
    # queue only when told to.
    shared = [chosen or DEFAULT_TASK_QUEUE] if chosen or version is None or not named else []
    asyncio.run(_serve(agents, shared, version, address, namespace, max_cached_workflows, policy, bool(named)))


async def _serve(agents: list[Any], shared: list[str], version: Any, address: str | None, namespace: str | None,
                 max_cached_workflows: int | None, promote: str, named: bool) -> None:
    """Serve until SIGINT/SIGTERM: the shared queue (`rein start`, raw clients) and each agent's own queue, where
    the runs `Agent.run`/`rein run` started live (a script's unfinished runs are finished here too)."""
    import contextlib

    from rein.core.contract import DEFAULT_TASK_QUEUE, agent_task_queue
    from rein.durable.temporal_worker import create_worker, ensure_search_attributes
    from rein.temporal.deployment import VERSIONING_OFF

    console = err_console()
    client = await connect_client(address, namespace)
    available = await ensure_search_attributes(client.client)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    queues = shared + [q for q in dict.fromkeys(agent_task_queue(a.name) for a in agents) if q not in shared]
    version = await _checked_version(client.client, version, shared, queues, named, promote)
    cache: dict[str, Any] = {} if max_cached_workflows is None else {"max_cached_workflows": max_cached_workflows}
    async with contextlib.AsyncExitStack() as stack:
        for name in queues:
            await stack.enter_async_context(create_worker(
                client.client, agents, task_queue=name,
                deployment=version.deployment_name if version else VERSIONING_OFF,
                build_id=version.build_id if version else None, promote=promote, **cache))
        names = ", ".join(a.name for a in agents)
        target = client.client.service_client.config.target_host
        # worker.py's line, which scripts and tests wait for ("serving:").
        logging.getLogger("rein.worker").info(
            "rein worker on %s (%s) queues %s, version %s, serving: %s (search attributes: %s)", target,
            client.client.namespace, ", ".join(queues), version.to_canonical_string() if version else "unversioned",
            names, ", ".join(available) or "none")
        if len(available) < 4:
            console.print(f"[yellow]search attributes available: {', '.join(available) or 'none'}[/]")
        if not shared:
            console.print(f"[dim]versioned: not on the shared queue {DEFAULT_TASK_QUEUE!r} (it would take every new run "
                          "there); clients start on the agents' own queues, or give --task-queue.[/]")
        console.print("[dim]Ctrl-C stops; runs in flight continue on the next worker.[/]")
        await stop.wait()


async def _checked_version(client: Any, version: Any, shared: list[str], queues: list[str], named: bool,
                           promote: str) -> Any:
    """The version to serve as, after two checks a versioned worker makes before it polls: an unversioned
    worker on its shared queue (a named deployment refuses; the default joins it unversioned), and, for a
    new build, a current version whose live workers serve queues this one would not (refused: made current,
    it would take their runs and serve none; left behind, its own runs would wait for that version)."""
    from temporalio.service import RPCError, RPCStatusCode

    from rein.temporal.deployment import describe, queues_this_build_would_strand

    if version is None:
        return None
    try:
        described = await describe(client, version.deployment_name)
    except RPCError as err:
        if err.status not in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
            raise
        if named:
            raise CliError(f"{err.message.rstrip('.')} (Worker Versioning): run with --deployment none, or enable worker "
                           "deployments on the server (Temporal >= 1.28)", EXIT_USAGE) from None
        logging.getLogger("rein.worker").warning("%s: this worker is unversioned (docs/deploys.md)", err.message.rstrip("."))
        return None
    others = await _unversioned_pollers(client, shared[0]) if shared else []
    if others and named:
        raise CliError(
            f"queue {shared[0]!r} is polled by an unversioned worker ({others[0]}): a versioned worker there would "
            f"take every new run on it once {version.deployment_name!r} has a current version, other agents' too. "
            "Give this worker its own --task-queue (or none: its agents' own queues), or version that worker too",
            EXIT_USAGE)
    if others:  # beside an earlier rein's workers: join them as they are; docs/deploys.md, "Upgrading"
        logging.getLogger("rein.worker").warning(
            "queue %s is polled by an unversioned worker (%s): this worker is unversioned too", shared[0], others[0])
        return None
    stranded = await queues_this_build_would_strand(client, version, queues, described) if promote == "new" else None
    if stranded:
        current, foreign = stranded
        raise CliError(
            f"deployment {version.deployment_name!r} is current at build {current}, whose live workers serve queues "
            f"this build does not ({', '.join(foreign)}): this build could not become current, and its runs would "
            f"wait for {current}. The workers of one queue are one deployment: give this application its own "
            "--task-queue or --deployment, run the same build as those workers, or --deployment none", EXIT_USAGE)
    return version


async def _unversioned_pollers(client: Any, queue: str) -> list[str]:
    """Identities of unversioned workers that polled `queue` lately."""
    from rein.temporal.history import live_pollers

    return [p.identity for p in await live_pollers(client, queue) if not p.deployment_options.deployment_name]

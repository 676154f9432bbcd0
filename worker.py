"""A rein worker: serves the named agents' runs on a task queue.

    python worker.py --agent examples.calculator:agent [--agent pkg.mod:other] [--task-queue rein]

It polls the shared queue (`rein`, or --task-queue) and each agent's own queue (`rein.<name>`),
where the runs `Agent.run` starts live.

Connection settings come from --address/--namespace or temporalio's envconfig (a profile,
TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS); with no address configured the
worker joins the shared embedded server of REIN_HOME (see rein.temporal.connection).
API keys are read here, from this process's environment, and nowhere else.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal

from rein.temporal.connection import connect, resolve
from rein.contract import DEFAULT_TASK_QUEUE, agent_task_queue
from rein.worker import create_worker, ensure_search_attributes, load_agent


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", action="append", required=True, help="module:attr of a rein.Agent")
    parser.add_argument("--task-queue", default=os.environ.get("REIN_TASK_QUEUE", DEFAULT_TASK_QUEUE))
    parser.add_argument("--address", default=None, help="default: envconfig (TEMPORAL_ADDRESS, profile) or embedded")
    parser.add_argument("--namespace", default=None, help="default: envconfig (TEMPORAL_NAMESPACE) or 'default'")
    parser.add_argument("--max-cached-workflows", type=int, default=None,
                        help="runs kept in memory between tasks (0: every task replays the run's history)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    agents = [load_agent(target) for target in args.agent]
    target = await asyncio.to_thread(resolve, args.address, args.namespace)
    client = await connect(target=target)
    available = await ensure_search_attributes(client)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)

    # The shared queue (raw clients, `rein start`) and each agent's own queue, where runs that
    # `Agent.run` started live: a script's unfinished runs are finished here too.
    queues = [args.task_queue] + [agent_task_queue(a.name) for a in agents if agent_task_queue(a.name) != args.task_queue]
    async with contextlib.AsyncExitStack() as workers:
        for queue in queues:
            options = {} if args.max_cached_workflows is None else {"max_cached_workflows": args.max_cached_workflows}
            await workers.enter_async_context(create_worker(client, agents, task_queue=queue, **options))
        names = ", ".join(a.name for a in agents)
        logging.info("rein worker on %s (%s) queues %s serving: %s (search attributes: %s)",
                     target.address, "embedded" if target.embedded else target.namespace, ", ".join(queues),
                     names, ", ".join(available) or "none")
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())

"""A rein worker: serves the named agents' runs on a task queue.

    python worker.py --agent examples.calculator:agent [--agent pkg.mod:other] [--task-queue rein]

Connection settings come from --address/--namespace or temporalio's envconfig (a profile,
TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS); with no address configured the
worker joins the shared embedded server of REIN_HOME (see rein.temporal.connection).
API keys are read here, from this process's environment, and nowhere else.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

from rein.temporal.connection import connect, resolve
from rein.contract import DEFAULT_TASK_QUEUE
from rein.worker import create_worker, ensure_search_attributes, load_agent


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", action="append", required=True, help="module:attr of a rein.Agent")
    parser.add_argument("--task-queue", default=os.environ.get("REIN_TASK_QUEUE", DEFAULT_TASK_QUEUE))
    parser.add_argument("--address", default=None, help="default: envconfig (TEMPORAL_ADDRESS, profile) or embedded")
    parser.add_argument("--namespace", default=None, help="default: envconfig (TEMPORAL_NAMESPACE) or 'default'")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    agents = [load_agent(target) for target in args.agent]
    target = await asyncio.to_thread(resolve, args.address, args.namespace)
    client = await connect(target=target)
    available = await ensure_search_attributes(client)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)

    async with create_worker(client, agents, task_queue=args.task_queue):
        names = ", ".join(a.name for a in agents)
        logging.info("rein worker on %s queue %r serving: %s (search attributes: %s)",
                     target.address, args.task_queue, names, ", ".join(available) or "none")
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())

"""A rein worker: serves the named agents' runs on a task queue.

    python worker.py --agent examples.calculator:agent [--agent pkg.mod:other] [--task-queue rein]

The Temporal address comes from --address or TEMPORAL_ADDRESS (default localhost:7233).
API keys are read here, from this process's environment, and nowhere else.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

from rein.client import connect
from rein.contract import DEFAULT_TASK_QUEUE
from rein.worker import create_worker, ensure_search_attributes, load_agent


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", action="append", required=True, help="module:attr of a rein.Agent")
    parser.add_argument("--task-queue", default=os.environ.get("REIN_TASK_QUEUE", DEFAULT_TASK_QUEUE))
    parser.add_argument("--address", default=os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"))
    parser.add_argument("--namespace", default=os.environ.get("TEMPORAL_NAMESPACE", "default"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    agents = [load_agent(target) for target in args.agent]
    client = await connect(args.address, args.namespace)
    available = await ensure_search_attributes(client)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)

    async with create_worker(client, agents, task_queue=args.task_queue):
        names = ", ".join(a.name for a in agents)
        logging.info("rein worker on %s queue %r serving: %s (search attributes: %s)",
                     args.address, args.task_queue, names, ", ".join(available) or "none")
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())

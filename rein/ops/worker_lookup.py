"""Which task queue has a worker that knows an agent, asked before a run is started.

A run started where no worker knows its agent fails later with a message about workers; the
person who started it has gone by then. Scripts (`Agent.run`) and `rein worker` both serve an
agent on its own queue, `rein.<agent>` (rein.core.contract.agent_task_queue), so a poller there
means a worker knows the agent. A worker of your own on a shared queue (`create_worker(...,
task_queue="rein")`) is asked through the short ReinDescribeAgent workflow.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from rein import settings
from rein.client import ReinClient
from rein.core.contract import agent_task_queue
from rein.temporal.history import polled

START_CHECK_TIMEOUT = timedelta(seconds=10)
"""How long `rein start` waits for a worker on a shared queue to describe the agent: a live worker
answers in well under a second; a poller seen in the last minute may be a worker that has stopped."""


class AgentNotServed(LookupError):
    """No worker that knows the agent polls the queues a run could be sent to. Its message ends with what to
    start; a command that can go on without one adds how (`rein start --no-check`)."""


async def queue_for(client: ReinClient, agent: str, queue: str | None = None) -> str:
    """The queue to start a run of `agent` on: `queue` when given, else the agent's own queue, else
    the client's shared queue; raises AgentNotServed when no worker there knows the agent.

    When no worker polls any of them, they are looked at again for REIN_WORKER_GRACE_S seconds: a worker
    started a moment ago (a script, a deploy) has not polled yet."""
    own = agent_task_queue(agent)
    candidates = [queue] if queue else list(dict.fromkeys([own, client.task_queue]))
    deadline = asyncio.get_running_loop().time() + settings.current().worker_grace_s
    while True:
        found, any_polled, refused = await _served_queue(client, agent, candidates, own)
        if found is not None:
            return found
        if any_polled or asyncio.get_running_loop().time() >= deadline:
            break
        await asyncio.sleep(0.25)
    where = " or ".join(repr(c) for c in candidates)
    why = f"; {refused}" if refused else ""
    raise AgentNotServed(
        f"no worker serves agent {agent!r} (none that knows it polls {where}{why}); start one with "
        "`rein worker --agent MODULE:ATTR`"
    )


async def _served_queue(client: ReinClient, agent: str, candidates: list[str],
                        own: str) -> tuple[str | None, bool, str]:
    """(the first candidate a worker that knows `agent` polls, whether any candidate was polled at all,
    what the last worker asked answered when it did not describe the agent)."""
    from rein.core.fork_edits import ForkError
    from rein.durable.fork import describe_agent

    any_polled, refused = False, ""
    for candidate in candidates:
        if not await polled(client.client, candidate):
            continue
        any_polled = True
        if candidate == own:
            return candidate, True, ""  # only workers that serve the agent poll its own queue
        try:
            await describe_agent(client, agent, candidate, purpose="before rein start", timeout=START_CHECK_TIMEOUT)
        except ForkError as err:  # a worker polls it, but does not know the agent (or did not answer in time)
            refused = str(err).split(": ", 1)[-1]
            continue
        return candidate, True, ""
    return None, any_polled, refused

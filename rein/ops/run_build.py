"""Which build an open run waits for, why, whether a worker of it polls, and what would move the run (`rein status`).

Its next workflow task goes to the build it is pinned to (a versioning override: a script pins the runs it starts
while it serves them, an operator may too; or its workers ran it PINNED), else to the current build of its queue's
deployment. A worker of another build polling the same queue does not serve it, and the line says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client

from rein.temporal.deployment import describe_version
from rein.temporal.history import fresh_since, pinned_build, version_pollers


@dataclass
class RunBuild:
    deployment: str
    build: str
    why: str
    last_poll: datetime | None
    polling: bool
    others: list[str]
    """Other builds whose workers poll the run's queue."""
    move: str

    def line(self) -> str:
        if self.polling:
            workers = "a worker of it polls"
        elif self.last_poll is not None:
            ago = int(time.time() - self.last_poll.timestamp())
            workers = f"no worker of it has polled since {self.last_poll:%Y-%m-%d %H:%M:%S} UTC ({ago} s ago)"
        else:
            workers = "no worker of it polls"
        others = f" (workers of build {', '.join(self.others)} poll its queue: they do not serve it)" if self.others else ""
        return f"{self.build} of deployment {self.deployment} ({self.why}); {workers}" + (
            "" if self.polling else f"{others}; what moves it: {self.move}")

    def to_json(self) -> dict[str, Any]:
        return {"deployment": self.deployment, "build": self.build, "why": self.why, "polling": self.polling,
                "last_poll": self.last_poll and self.last_poll.isoformat(), "others": self.others, "move": self.move}


async def run_build(client: Client, description: Any, queue: Any) -> RunBuild | None:
    """The build an open run waits for (`queue`: its task queue, described); None for a run on an unversioned queue."""
    pinned = pinned_build(description)
    info = description.raw_description.workflow_execution_info.versioning_info
    if pinned is not None:
        why = ("pinned to it by a versioning override: a script pins the runs it starts while it serves them, an operator "
               "may too" if info.HasField("versioning_override") else "pinned to it: its workers run their runs PINNED")
        move = (f"`temporal workflow update-options --workflow-id {description.id} --versioning-override-behavior "
                "auto_upgrade` (it then follows the current build)")
    else:
        routed = queue.versioning_info.current_deployment_version
        if not routed.build_id:
            return None
        pinned = (routed.deployment_name, routed.build_id)
        why = "the current build: the run follows it at its next task"
        move = f"`rein deployment rollback --deployment {routed.deployment_name}` (or `set-current BUILD`)"
    pollers, fresh = queue.pollers, fresh_since()
    polls = [p.last_access_time.ToSeconds() for p in await version_pollers(client, await describe_version(client, *pinned))]
    others = sorted({p.deployment_options.build_id or "unversioned" for p in pollers
                     if p.last_access_time.ToSeconds() > fresh and p.deployment_options.build_id != pinned[1]})
    return RunBuild(pinned[0], pinned[1], why, datetime.fromtimestamp(max(polls), UTC) if polls else None,
                    any(t > fresh for t in polls), others, move)

"""What an agent is on this worker (its description and fingerprint), and refusing the calls of runs
that follow another definition of it (see rein.core.agent_identity and docs/deploys.md, "Agent identity")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio.exceptions import ApplicationError

from rein.core.agent_identity import fingerprint
from rein.core.compaction import trigger_of
from rein.core.contract import AGENT_CHANGED, AgentDescription, ToolInfo

if TYPE_CHECKING:
    from rein.blueprint.agent import Agent


class AgentIdentity:
    """Part of AgentActivities: `max_payload_bytes` is the worker's."""

    max_payload_bytes: int
    described: dict[str, AgentDescription]
    """Each agent as this worker last described it (by the name runs use), with its fingerprint."""

    async def _describe(self, name: str, agent: Agent) -> AgentDescription:
        """The agent as this worker defines it now, with its fingerprint (kept for `_check_version`)."""
        tools = await agent.tools_for_run()  # lists the agent's MCP servers, so the run records their specs
        description = AgentDescription(
            name=name.split("#", 1)[0],
            model=agent.model_label,
            system=agent.system,
            config=agent.config,
            tools=[
                ToolInfo(
                    spec=t.spec(),
                    retries=t.retries,
                    timeout_s=t.timeout_s,
                    asks_human=t.asks_human,
                    agent=t.agent.name if t.agent is not None else None,
                    requires_approval=getattr(t, "requires_approval", False),
                    local=getattr(t, "local", False),
                    replay=getattr(t, "replay", "recorded"),
                )
                for t in tools
            ],
            max_payload_bytes=self.max_payload_bytes,
            client_overrides=sorted(agent.client_overrides),
            middleware=bool(agent.middlewares),
            compaction=trigger_of(agent.compaction) if agent.compaction is not None else None,
            in_flight=agent.in_flight,
        )
        description.version = fingerprint(description)
        self.described[name] = description
        return description

    async def _check_version(self, name: str, version: str, agent: Agent) -> None:
        """Refuse, running nothing, a call from a run that follows another definition of the agent
        than this worker's: the run learns this one from the error's details and says what changed.
        Runs of older rein builds send no version: nothing to compare."""
        if not version:
            return
        current = self.described.get(name) or await self._describe(name, agent)
        if current.version == version:
            return
        raise ApplicationError(
            f"Agent '{current.name}' is defined differently on this worker (version {current.version}, model "
            f"{current.model}) than the run follows (version {version}); nothing was run. "
            "The run takes this definition by the rule in docs/deploys.md and records what changed.",
            current.model_dump(mode="json"),
            type=AGENT_CHANGED,
            non_retryable=True,
        )

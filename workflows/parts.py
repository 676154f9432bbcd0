"""RunParts: the run's state (RunState) with one collaborator per concern, each given the others it calls.

The collaborators read and change the state (rein.workflows.state imports none of them) and call only the
collaborators handed to them, so their imports point one way: publishing and the ones that call no other at the
bottom, then children, continuation; threads; stages; start, worker_steps, waiting. Building them issues no
command, so their order is in no history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rein.workflows.agent_changes import AgentChanges
from rein.workflows.children import ChildRuns
from rein.workflows.continuation import Continuation
from rein.workflows.decisions import Decisions
from rein.workflows.inbox import Inbox
from rein.workflows.publishing import Publisher
from rein.workflows.stages import Stages
from rein.workflows.start import LeanStart
from rein.workflows.state import RunState
from rein.workflows.threads import Threads
from rein.workflows.waiting import Waiting
from rein.workflows.worker_steps import WorkerSteps

if TYPE_CHECKING:
    from rein.core.contract import AgentInput


class RunParts(RunState):
    """The run's state and the collaborators that work on it; AgentHandlers adds the handlers that call them."""

    def __init__(self, request: AgentInput | None) -> None:
        super().__init__(request)
        self.publisher = Publisher(self)
        """Its status and outcome, published where ops look (rein.workflows.publishing)."""
        self.agent_changes = AgentChanges(self)
        """Taking a definition of the agent that changed under the run (rein.workflows.agent_changes)."""
        self.child_runs = ChildRuns(self, self.publisher)
        """Agent-as-tool calls as child runs, and this run's link to its parent (rein.workflows.children)."""
        self.decisions = Decisions(self)
        """approve, deny, answer, retry, cancel: what fits, and applying it (rein.workflows.decisions)."""
        self.inbox = Inbox(self)
        """Rules before a wait, the waiting memo, the webhook (rein.workflows.inbox)."""
        self.continuation = Continuation(self, self.publisher)
        """When and how the run continues as new, and how a continuation takes over (rein.workflows.continuation)."""
        self.threads = Threads(self, self.publisher, self.continuation)
        """A thread's messages and turns (rein.workflows.threads)."""
        self.stages = Stages(self, self.publisher, self.agent_changes, self.child_runs, self.decisions, self.threads)
        """Model calls and tool calls (rein.workflows.stages)."""
        self.lean_start = LeanStart(self, self.publisher, self.stages)
        """How the run learns its agent: with its first model call, or by asking first (rein.workflows.start)."""
        self.worker_steps = WorkerSteps(self, self.agent_changes, self.decisions, self.stages)
        """The steps of agents with middleware or compaction, run on the worker (rein.workflows.worker_steps)."""
        self.waiting = Waiting(self, self.publisher, self.child_runs, self.continuation, self.inbox)
        """The wait for a person and a client's wait for the run (rein.workflows.waiting)."""

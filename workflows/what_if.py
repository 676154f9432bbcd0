"""A what-if run's reuse of its recorded run (`rein eval`, rein.core.evals): a collaborator the loop asks at
its three turns (a tool batch, a call's result, a wait for a person), not a mixin over the run's state."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from rein.core import evals, machine
    from rein.core.config import LoopConfig
    from rein.core.contract import AgentDescription
    from rein.core.evals import EvalPlan
    from rein.core.ir import ToolCall, ToolResult
    from rein.core.result import Interrupt
    from rein.core.session import Session


class WhatIf:
    """Recorded results instead of tool runs; recorded decisions instead of a person; the end at a new call."""

    def __init__(self, plan: EvalPlan, agent: AgentDescription) -> None:
        self.plan = plan
        self.rerun = frozenset(t.spec.name for t in agent.tools if t.replay == "run")
        self.middleware = agent.middleware
        self.diverged = ""
        """Where and why the run ended before its model did (RunOutcome.diverged)."""
        self.used: set[int] = set()
        """The recorded calls whose results this run took (in a continuation, counted afresh)."""

    def recorded(self, call: ToolCall) -> ToolResult | None:
        """The recorded run's result of the same call: the tool does not run."""
        return evals.replayed_result(self.plan, call, self.used)

    def ends_before(self, session: Session, action: machine.Action, next_step: int) -> bool:
        """End the run before a batch with a call the recorded run did not make (unless its tool may run
        again); the model step that asked for it (`next_step - 1`) is where it diverged."""
        if self.middleware:  # its steps run tools in the worker, out of reach
            why = f"stopped at step {next_step}: an agent with middleware cannot be replayed"
            return self._end(session, why, evals.STOPPED)
        if not isinstance(action, machine.RunTools):
            return False
        new = evals.first_new_call(self.plan, action.calls, self.rerun)
        return new is not None and self._end(session, evals.divergence(next_step - 1, new), evals.DIVERGED)

    def settles(self, session: Session, interrupt: Interrupt, next_step: int, config: LoopConfig,
                input_tools: frozenset[str], approval_tools: frozenset[str]) -> None:
        """Take the recorded run's decisions for what `interrupt` waits on, or end the run there: never a wait."""
        waiting_on = [c for c in session.pending_tool_calls
                      if c.name in input_tools or config.permission == "ask" or c.name in approval_tools]
        step = next_step if interrupt.type == "error" else next_step - 1
        why = evals.settle(self.plan, session, interrupt, step, waiting_on, input_tools, self.used)
        if why is not None:
            self._end(session, why, evals.STOPPED if interrupt.type == "error" else evals.DIVERGED)

    def _end(self, session: Session, why: str, reason: str) -> bool:
        self.diverged = why
        session.done, session.stop_reason = True, reason
        return True

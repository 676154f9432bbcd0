"""A run whose agent changed under it: a worker refused a call (AGENT_CHANGED) and sent its definition,
or a continuation was described differently. The run records an `agent` Step saying what changed
and follows rein.core.agent_identity.adopt's rule: stricter approval rules at once, looser ones only on opt-in.

Costs nothing while the agent stays the same: the fingerprint travels in the activity inputs the
run schedules anyway; only a refused call (an ActivityTaskFailed) and its repeat are added.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from rein.core import agent_identity, machine
    from rein.core.contract import AGENT_CHANGED, AgentDescription, RunCarry
    from rein.core.ir import ToolCall, ToolResult
    from rein.core.result import Step

if TYPE_CHECKING:
    from rein.workflows.state import RunState


class AgentChanges:
    """Taking a changed agent definition in the middle of a run: a collaborator of the loop, on its state."""

    def __init__(self, run: RunState) -> None:
        self.run = run

    def taken(self, err: ActivityError) -> AgentDescription | None:
        """The worker's definition when `err` is its AGENT_CHANGED refusal (now the run's), else None."""
        cause = err.cause
        if not isinstance(cause, ApplicationError) or cause.type != AGENT_CHANGED or not cause.details:
            return None
        try:
            new = AgentDescription.model_validate(cause.details[0])
        except ValidationError:
            return None
        run = self.run
        assert run.agent is not None and run.config is not None
        old = run.agent
        if new.version == old.version:  # not a change the run can take: the caller treats it as a failure
            return None
        agent, run.config, run.approval_tools = agent_identity.adopt(old, new, run.config, run.approval_tools)
        run.agent = agent.model_copy(update={"search_attributes": old.search_attributes})
        run.input_tools = frozenset(t.spec.name for t in agent.tools if t.asks_human)
        what = "; ".join(agent_identity.changes(old, new))
        self._note(f"agent changed (version {old.version} → {new.version}): {what}")
        return old

    def continued_with(self, carry: RunCarry | None) -> None:
        """A continuation keeps the approval rules its predecessor followed where they are stricter than
        the definition it is described with now (they may come from an earlier change); a different
        definition is said as a Step, as in `taken`."""
        run = self.run
        assert run.agent is not None and run.config is not None
        if carry is None or not carry.agent_version:
            return
        if run.agent.in_flight != "current":
            known = {t.spec.name for t in run.agent.tools}
            run.approval_tools |= frozenset(carry.approval_tools) & known
            if carry.permission:
                permission = agent_identity.stricter_permission(run.config.permission, carry.permission)
                run.config = run.config.model_copy(update={"permission": permission})
        if carry.agent_version != run.agent.version:
            self._note(f"agent changed (version {carry.agent_version} → {run.agent.version}) across continue-as-new")

    def _note(self, summary: str) -> None:
        workflow.logger.warning("%s", summary)
        self.run.record_steps([Step(index=0, kind="agent", summary=summary, is_error=True)])

    def settled(self, call: ToolCall, old: AgentDescription, result: ToolResult | None) -> ToolResult | None:
        """After a change: what stands for `call` (None: run or ask it again under the new rules).

        A call that ran keeps its result; a call whose tool is gone or re-typed is not run and the model
        is told why (it sees the current tools, and a new call goes through the current approval rules).
        Both count as settled by rein, so a stricter permission does not ask a person about them."""
        run = self.run
        assert run.agent is not None
        if result is None:
            why = agent_identity.call_changed(old, run.agent, call.name)
            if why is None:
                return None
            result = ToolResult(
                tool_call_id=call.id,
                content=f"Tool '{call.name}' was not run: {why} while this call waited (the agent changed). "
                "Use the tools you have now if the call is still needed.",
                is_error=True,
            )
        decided = machine.decisions_for_pending(run.session)
        if call.id not in decided:
            machine.decide(run.session, True, call.id, approver="rein", reason="settled before the agent changed")
        return result

"""What-if runs (`rein eval`): a recorded run's tool calls and decisions, reused by a run of a changed agent.

A run with an EvalPlan never runs a tool call the recorded run made (same name, same arguments): it
gets the recorded result. A new call runs only when its tool may run again (`@tool(replay="run")`);
otherwise the run ends there, `diverged`. Approvals, denials and answers are applied as recorded; a
new call that needs a person ends the run the same way. Pure: the workflow and the client share it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from rein.core.ir import Message, ToolCall, ToolResult
from rein.core.machine import call_decisions, decisions_for_pending
from rein.core.result import Interrupt, Step
from rein.core.session import Decision, Session

DIVERGED = "diverged"
"""The stop reason of a what-if run that reached a call the recorded run did not make."""
STOPPED = "error"
"""The stop reason of a what-if run whose model call failed for good (nobody is there to retry it)."""
RECORDED_APPROVER = "recorded run"


class RecordedCall(BaseModel):
    """One tool call of a recorded run, with what it returned and the decision a person took on it."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    is_error: bool = False
    decision: Decision | None = None
    """The recorded approval, denial or answer (its `tool_call_id` is the recorded call's)."""


class EvalPlan(BaseModel):
    """AgentInput.eval: the recorded run a what-if run replays against (ReinEvalOf)."""

    of: str = Field(min_length=1, max_length=1000)
    calls: list[RecordedCall] = Field(default_factory=list, max_length=100_000)

    def find(self, call: ToolCall) -> RecordedCall | None:
        """The recorded call with the same name and arguments (the first of equal ones), or None."""
        key = call_key(call.name, call.arguments)
        return next((c for c in self.calls if call_key(c.name, c.arguments) == key), None)

    def take(self, call: ToolCall, used: set[int]) -> RecordedCall | None:
        """Like `find`, in the recorded order: the first equal call not yet `used` (marked used now), else the
        last equal one again. A tool called twice alike (a counter, a queue) answers as it did each time."""
        key = call_key(call.name, call.arguments)
        equal = [i for i, c in enumerate(self.calls) if call_key(c.name, c.arguments) == key]
        if not equal:
            return None
        index = next((i for i in equal if i not in used), equal[-1])
        used.add(index)
        return self.calls[index]


def call_key(name: str, arguments: dict[str, Any]) -> str:
    """A call as text, arguments in a canonical order: equal calls have equal keys."""
    return f"{name}({json.dumps(arguments, sort_keys=True, separators=(',', ':'), default=str)})"


def recorded_calls(session: Session, steps: Sequence[Step] = ()) -> list[RecordedCall]:
    """Every tool call of a recorded conversation with its result and decision, in order. `steps` (the
    run's step log) tells which results were errors: a Session keeps only their text."""
    errors = [bool(s.is_error) for s in steps if s.kind == "tool"]
    decided = iter(call_decisions(session))
    calls: list[RecordedCall] = []
    for at, message in enumerate(session.messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        results = _results_after(session.messages, at)
        for call in message.tool_calls:
            decision = next(decided)[1]
            if call.id in results:  # else still pending when the run ended
                calls.append(RecordedCall(name=call.name, arguments=call.arguments, result=results[call.id],
                                          decision=decision))
    if len(errors) == len(calls):
        for recorded, is_error in zip(calls, errors, strict=True):
            recorded.is_error = is_error
    return calls


def _results_after(messages: Sequence[Message], at: int) -> dict[str, str]:
    """The tool results that answer the calls of message `at`: the tool messages up to the next model message
    (call ids repeat across turns)."""
    results: dict[str, str] = {}
    for message in messages[at + 1:]:
        if message.role == "assistant":
            break
        if message.role == "tool" and message.tool_call_id:
            results.setdefault(message.tool_call_id, message.content or "")
    return results


def replayed_result(plan: EvalPlan, call: ToolCall, used: set[int]) -> ToolResult | None:
    """The recorded result for `call` (EvalPlan.take), under the new call's id; None when the recorded run made
    no such call."""
    recorded = plan.take(call, used)
    if recorded is None:
        return None
    return ToolResult(tool_call_id=call.id, content=recorded.result, is_error=recorded.is_error)


def divergence(step: int, call: ToolCall) -> str:
    return f"diverged at step {step}: new call {call_key(call.name, call.arguments)}"


def first_new_call(plan: EvalPlan, calls: list[ToolCall], rerun: Collection[str]) -> ToolCall | None:
    """The first call of a batch that the recorded run did not make and whose tool may not run again."""
    return next((c for c in calls if c.name not in rerun and plan.find(c) is None), None)


def settle(plan: EvalPlan, session: Session, interrupt: Interrupt, step: int, waiting_on: list[ToolCall],
           input_tools: frozenset[str] = frozenset(), used: Collection[int] = ()) -> str | None:
    """Take the decisions a person took in the recorded run for the calls `interrupt` waits on (`waiting_on`:
    the pending calls that need a person; mutates the Session). None when settled, else why the run ends.
    `used`: the recorded calls whose results the run took; each call's decision is that of the recorded call
    whose result it will take."""
    if interrupt.type == "error":
        return f"stopped at step {step}: {interrupt.message}"
    decided = set(decisions_for_pending(session))
    ahead = set(used)
    for call in waiting_on:
        if call.id in decided:
            continue
        recorded = plan.take(call, ahead)
        if recorded is None:
            return divergence(step, call) + (" needs a person" if call.name in input_tools else " needs approval")
        taken = recorded.decision
        if call.name in input_tools:
            if taken is None or taken.answer is None:
                return f"diverged at step {step}: {call_key(call.name, call.arguments)} was never answered"
            session.decisions.append(taken.model_copy(update={"tool_call_id": call.id, "batch": session.batch}))
        elif taken is None:  # it ran without asking in the recorded run (another permission): approved
            session.decisions.append(Decision(tool_call_id=call.id, approved=True, approver=RECORDED_APPROVER,
                                              batch=session.batch))
        else:
            session.decisions.append(taken.model_copy(update={"tool_call_id": call.id, "batch": session.batch}))
    return None


def tool_calls_by_step(steps: list[Step]) -> list[tuple[int, list[str]]]:
    """(step index, its calls as `call_key`s) for each model step that asked for tools."""
    return [(s.index, [call_key(c.name, c.arguments) for c in s.tool_calls]) for s in steps
            if s.kind == "model" and s.tool_calls]


def first_difference(recorded: list[Step], replayed: list[Step]) -> int | None:
    """The replayed run's step index where its tool calls first differ from the recorded run's; None when the
    two asked for the same calls in the same order. Steps are compared by their place, not their index:
    a fork's steps continue its original's count."""
    mine, theirs = tool_calls_by_step(replayed), tool_calls_by_step(recorded)
    for i, (index, calls) in enumerate(mine):
        if i >= len(theirs) or sorted(theirs[i][1]) != sorted(calls):
            return index
    if len(theirs) > len(mine):
        return (replayed[-1].index + 1) if replayed else 0
    return None


Verdict = Literal["match", "differ", "diverged", "failed"]

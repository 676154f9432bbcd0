"""The agent loop as a pure state machine.

No I/O, no clock, no provider or tool objects: given a Session, the LoopConfig
and the active time so far, `next_action` says what to do next, and the
`apply_*` functions fold outcomes back into the Session. The in-process runner
(`rein.local.loop`) and the durable `AgentWorkflow` both drive these functions, so
the two engines cannot drift apart.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Union

from pydantic import BaseModel

from rein.core.circuit import signature, tripped_breaker
from rein.core.config import LoopConfig
from rein.core.ir import Completion, Message, OutputCheck, ToolCall, ToolResult
from rein.core.result import Interrupt, Step
from rein.core.session import Decision, Session, Stage

ASK_HUMAN = "ask_human"
"""Name of the opt-in built-in tool whose call interrupts with `need_input`."""


class CallModel(BaseModel):
    kind: Literal["call_model"] = "call_model"
    iteration: int
    """1-based number of the model call about to be made."""


class RunTools(BaseModel):
    kind: Literal["run_tools"] = "run_tools"
    calls: list[ToolCall]
    """Calls to execute, in order; calls that were denied or answered by a human are absent."""


class Wait(BaseModel):
    kind: Literal["wait"] = "wait"
    interrupt: Interrupt


class Finish(BaseModel):
    kind: Literal["finish"] = "finish"
    stop_reason: str


Action = Union[CallModel, RunTools, Wait, Finish]


def truncate(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "…"


def last_assistant_text(session: Session) -> str | None:
    for message in reversed(session.messages):
        if message.role == "assistant" and message.content:
            return message.content
    return None


def run_output(session: Session) -> str | None:
    """A run's `output`: the final result's JSON for agents with an output type, else the last text."""
    return session.output_json if session.output_json is not None else last_assistant_text(session)


def run_data(session: Session) -> Any:
    """A run's `data`: the final result's JSON value (None without an output type)."""
    return json.loads(session.output_json) if session.output_json is not None else None


def new_session(prompt: str, system: str | None = None) -> Session:
    messages = [Message(role="system", content=system)] if system else []
    messages.append(Message(role="user", content=prompt))
    return Session(messages=messages)


# ---------------------------------------------------------------- next action


def next_action(
    session: Session,
    config: LoopConfig,
    elapsed_s: float,
    input_tools: frozenset[str] = frozenset(),
    approval_tools: frozenset[str] = frozenset(),
    client_tools: frozenset[str] = frozenset(),
) -> Action:
    """Decide the next step. Trips breakers (mutating the Session) before any work.

    Calls to `approval_tools` (`@tool(requires_approval=True)`) wait for a person even when
    the permission is "allow". `client_tools` (a thread turn's tools the client runs, among
    `input_tools`) are answered from outside like a question, and the wait says so.
    """
    if session.done:
        return Finish(stop_reason=session.stop_reason or "done")
    if session.stage == Stage.DONE:
        return _finish(session, "done")
    if session.output_failures > config.output_retries:
        return _finish(session, "invalid_output")
    reason = tripped_breaker(session, config, elapsed_s)
    if reason is not None:
        return _finish(session, reason)
    if session.stage == Stage.RUN_TOOLS and not session.pending_tool_calls:
        session.stage = Stage.CALL_MODEL
    if session.stage == Stage.CALL_MODEL:
        return CallModel(iteration=session.iteration + 1)
    return _tool_stage_action(session, config, input_tools, approval_tools, client_tools)


def _finish(session: Session, reason: str) -> Finish:
    session.done = True
    session.stop_reason = reason
    return Finish(stop_reason=reason)


def _tool_stage_action(
    session: Session, config: LoopConfig, input_tools: frozenset[str], approval_tools: frozenset[str],
    client_tools: frozenset[str] = frozenset(),
) -> RunTools | Wait:
    decided = decisions_for_pending(session)
    questions = [c for c in session.pending_tool_calls if c.name in input_tools]
    if config.permission != "deny":
        undecided = [
            c
            for c in session.pending_tool_calls
            if c.name not in input_tools
            and c.id not in decided
            and (config.permission == "ask" or c.name in approval_tools)
        ]
        if undecided:
            return Wait(interrupt=approval_interrupt(undecided))
    unanswered = [c for c in questions if c.id not in decided]
    if unanswered:
        return Wait(interrupt=input_interrupt(unanswered[0], client=unanswered[0].name in client_tools))
    to_run = [
        c
        for c in session.pending_tool_calls
        if c.name not in input_tools
        and decided.get(c.id, Decision(tool_call_id=c.id, approved=config.permission != "deny")).approved
    ]
    return RunTools(calls=to_run)


def approval_interrupt(calls: list[ToolCall]) -> Interrupt:
    names = ", ".join(c.name for c in calls)
    return Interrupt(
        type="need_approval",
        tool_call=calls[0],
        message=f"Approval needed to run: {names}. Approve or deny to continue.",
    )


def input_interrupt(call: ToolCall, client: bool = False) -> Interrupt:
    if client:
        return Interrupt(type="need_input", tool_call=call,
                         message=f"Waiting for the client to run its tool '{call.name}' (call {call.id}) and send the result.")
    question = call.arguments.get("question")
    text = question if isinstance(question, str) and question else "The agent needs input from a person."
    return Interrupt(type="need_input", tool_call=call, message=text)


def model_error_interrupt(error: str) -> Interrupt:
    """The run stays at CALL_MODEL, so a retry simply calls the model again."""
    return Interrupt(type="error", message=f"Model call failed and may be retried: {error}")


# ---------------------------------------------------------------- outcomes


def apply_completion(session: Session, completion: Completion, duration_s: float | None = None) -> Step:
    """Fold one model answer into the Session; returns the model Step (index 0)."""
    session.usage = session.usage + completion.usage
    session.iteration += 1
    message = completion.message
    session.messages.append(message)
    if completion.output is not None:
        return _apply_output(session, completion, completion.output, duration_s)
    if completion.finish_reason == "tool_calls" and message.tool_calls:
        message.tool_calls = unique_call_ids(message.tool_calls)
        session.batch += 1
        sig = signature(message.tool_calls)
        if sig == session.last_signature:
            session.repeat_count += 1
        else:
            session.repeat_count = 1
            session.last_signature = sig
        session.pending_tool_calls = list(message.tool_calls)
        session.stage = Stage.RUN_TOOLS
        return Step(
            index=0,
            kind="model",
            summary="tool calls: " + ", ".join(c.name for c in message.tool_calls),
            tool_calls=list(message.tool_calls),
            duration_s=duration_s,
            usage=completion.usage,
        )
    session.done = True
    session.stage = Stage.DONE
    session.stop_reason = "done"
    return Step(
        index=0,
        kind="model",
        summary=truncate(message.content, 120),
        duration_s=duration_s,
        usage=completion.usage,
    )


def unique_call_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """Calls with distinct ids: a repeated id gets a suffix, so each call gets its own result."""
    seen: set[str] = set()
    out: list[ToolCall] = []
    for call in calls:
        cid, n = call.id, 1
        while cid in seen:
            n += 1
            cid = f"{call.id}~{n}"
        seen.add(cid)
        out.append(call if cid == call.id else call.model_copy(update={"id": cid}))
    return out


def forget_pending_decisions(session: Session) -> None:
    """A Session from outside is conversation, not authority: its pending calls need fresh decisions."""
    pending = {c.id for c in session.pending_tool_calls}
    session.decisions = [d for d in session.decisions if d.tool_call_id not in pending]

def _apply_output(session: Session, completion: Completion, check: OutputCheck, duration_s: float | None) -> Step:
    """A final answer for an agent with an output type: end the run with it, or send the error back.

    Every tool call in the answer gets a tool message, so the conversation stays valid for
    any vendor: the final_result call its verdict, the others "not run" when the run ends.
    Other calls next to an invalid final_result run as usual.
    """
    calls = completion.message.tool_calls or []
    others = [c for c in calls if c.id != check.tool_call_id]
    step = Step(index=0, kind="model", summary="", duration_s=duration_s, usage=completion.usage)
    if check.error is None:
        session.output_json = check.data_json
        for call in calls:
            content = "Final result accepted." if call.id == check.tool_call_id else "Not run: the final result ended the run."
            session.messages.append(Message(role="tool", tool_call_id=call.id, content=content))
        session.pending_tool_calls = []
        session.done = True
        session.stage = Stage.DONE
        session.stop_reason = "done"
        step.summary = "final result: " + truncate(check.data_json, 110)
        return step
    session.output_failures += 1
    step.summary = truncate(check.error, 120)
    step.is_error = True
    if check.tool_call_id is None:
        session.messages.append(Message(role="user", content=check.error))
    else:
        session.messages.append(Message(role="tool", tool_call_id=check.tool_call_id, content=check.error))
    if others:
        session.batch += 1
        session.pending_tool_calls = others
        session.stage = Stage.RUN_TOOLS
        step.tool_calls = others
    else:
        session.stage = Stage.CALL_MODEL
    return step


def apply_tool_results(
    session: Session, results: list[ToolResult], duration_s: float | None = None
) -> list[Step]:
    """Close the pending batch: executed results plus denials and human answers, in call order."""
    by_id = {r.tool_call_id: r for r in results}
    decided = decisions_for_pending(session)
    steps: list[Step] = []
    for call in session.pending_tool_calls:
        result = by_id.get(call.id) or _result_without_execution(call, decided.get(call.id))
        session.messages.append(Message(role="tool", tool_call_id=call.id, content=result.content))
        steps.append(
            Step(
                index=0,
                kind="tool",
                summary=f"{call.name} → {truncate(result.content, 80)}",
                is_error=result.is_error,
                duration_s=duration_s,
            )
        )
    session.pending_tool_calls = []
    session.stage = Stage.CALL_MODEL
    return steps


def _result_without_execution(call: ToolCall, decision: Decision | None) -> ToolResult:
    if decision is not None and decision.answer is not None:
        return ToolResult(tool_call_id=call.id, content=decision.answer)
    if decision is not None and not decision.approved:
        who = f" by {decision.approver}" if decision.approver else ""
        why = f" Reason: {decision.reason}" if decision.reason else ""
        return ToolResult(
            tool_call_id=call.id,
            content=f"Denied{who}: the call to '{call.name}' was not run.{why} "
            "Continue without it or try another approach.",
            is_error=True,
        )
    return policy_denial(call)


def policy_denial(call: ToolCall) -> ToolResult:
    """What the model sees for a call that `permission="deny"` refused."""
    return ToolResult(
        tool_call_id=call.id,
        content=f"Denied by policy: the call to '{call.name}' was not run.",
        is_error=True,
    )


# ---------------------------------------------------------------- human decisions


def key_batch(session: Session, call_id: str) -> int:
    """The pending batch's number when an earlier model answer in the Session used `call_id` too, else 0
    (idempotency_key). An earlier answer that compaction summarized away is not seen."""
    answers = sum(1 for m in session.messages if m.role == "assistant" and any(c.id == call_id for c in m.tool_calls or []))
    return (session.batch or answers) if answers > 1 else 0


def idempotency_key(run_id: str, call_id: str, batch: int = 0) -> str:
    """A tool call's idempotency key, the same on every attempt: `<run id>/<call id>`. A model that repeats its call
    ids (`call_0` in every answer) would give two calls one key, and a service that deduplicates on the key would
    skip the second one: a call whose id an earlier answer used gets its batch's number, `<run id>/<call id>#<batch>`
    (key_batch)."""
    return f"{run_id}/{call_id}#{batch}" if batch else f"{run_id}/{call_id}"


def decisions_for_pending(session: Session) -> dict[str, Decision]:
    """The latest decision for each pending call (a later one overrides an earlier one), among the decisions
    made for this batch: call ids repeat across batches, a decision for an earlier one never counts here."""
    pending = {c.id for c in session.pending_tool_calls}
    return {d.tool_call_id: d for d in session.decisions if d.tool_call_id in pending and d.batch == session.batch}


def call_decisions(session: Session) -> list[tuple[ToolCall, Decision | None]]:
    """Every tool call of the conversation in order (pending ones included) with the decision made for it: the
    latest decision of its id made for its batch. Batches are counted back from the last one (Session.batch); calls
    of a Session from before batches were counted (batch 0) take the latest decision of their id made then."""
    asked = [m.tool_calls for m in session.messages if m.role == "assistant" and m.tool_calls]
    final = session.output_json is not None and bool(asked)  # the accepted final result: no batch of its own
    latest: dict[tuple[str, int], Decision] = {(d.tool_call_id, d.batch): d for d in session.decisions}
    found: list[tuple[ToolCall, Decision | None]] = []
    for back, calls in enumerate(reversed(asked)):
        number = max(session.batch - back + final, 0)
        found = [(c, None if final and back == 0 else latest.get((c.id, number))) for c in calls] + found
    shown = {c.id for c in asked[-1]} if asked else set()
    return found + [(c, latest.get((c.id, session.batch))) for c in session.pending_tool_calls if c.id not in shown]


def stale_decisions(session: Session) -> list[Decision]:
    """Decisions of an earlier batch whose call id a pending call repeats: builds before bound decisions let them
    decide the new call (the durable driver keeps that for the runs they recorded: `reopen_stale`)."""
    pending = {c.id for c in session.pending_tool_calls}
    return [d for d in session.decisions if d.tool_call_id in pending and d.batch != session.batch]


def reopen_stale(session: Session) -> None:
    """An earlier build's rule, for replaying the runs it recorded: a decision of an earlier batch decides the
    pending call that repeats its id."""
    for decision in stale_decisions(session):
        decision.batch = session.batch


def decide(
    session: Session,
    approved: bool,
    tool_call_id: str | None = None,
    approver: str = "",
    reason: str = "",
    input_tools: frozenset[str] = frozenset(),
    via: str = "",
    at: str = "",
    tool_call_ids: list[str] | None = None,
) -> list[str]:
    """Approve or deny pending calls: `tool_call_ids` (each named), one (`tool_call_id`), or every undecided one.
    Returns the ids decided.

    An empty list means the decision did not fit (nothing pending, unknown id);
    the Session is then unchanged. `via` and `at` are recorded with it (Decision).
    """
    if session.stage != Stage.RUN_TOOLS:
        return []
    decided = decisions_for_pending(session)
    named = set(tool_call_ids or ()) | ({tool_call_id} if tool_call_id is not None else set())
    targets = [
        c.id
        for c in session.pending_tool_calls
        if c.name not in input_tools
        and (c.id in named if tool_call_ids is not None or tool_call_id is not None else c.id not in decided)
    ]
    for call_id in targets:
        session.decisions.append(Decision(tool_call_id=call_id, approved=approved, approver=approver, reason=reason,
                                          via=via, at=at, batch=session.batch))
    return targets


def answer(session: Session, text: str, approver: str = "", input_tools: frozenset[str] = frozenset(),
           via: str = "", at: str = "") -> str:
    """Feed a human's answer in. Returns how it was used: 'tool' (a pending question) or 'message'.

    A pending `ask_human` call takes the answer as its result; otherwise the
    answer becomes a new user message and the run goes back to the model.
    """
    if session.stage == Stage.RUN_TOOLS:
        decided = decisions_for_pending(session)
        for call in session.pending_tool_calls:
            if call.name in input_tools and call.id not in decided:
                session.decisions.append(Decision(tool_call_id=call.id, approved=True, approver=approver, answer=text,
                                                  via=via, at=at, batch=session.batch))
                return "tool"
    session.messages.append(Message(role="user", content=text))
    session.stage = Stage.CALL_MODEL
    session.pending_tool_calls = []
    session.done = False
    session.stop_reason = None
    session.output_json = None
    session.output_failures = 0
    return "message"


def waiting_on(session: Session, interrupt_type: str, input_tools: frozenset[str] = frozenset()) -> list[ToolCall]:
    """The pending calls a wait is for: a `need_approval` wait's undecided calls (what `decide` with no id takes),
    a `need_input` wait's unanswered questions and client tool calls; none for an `error` wait."""
    if session.stage != Stage.RUN_TOOLS or interrupt_type == "error":
        return []
    decided = decisions_for_pending(session)
    asked = interrupt_type == "need_input"
    return [c for c in session.pending_tool_calls if (c.name in input_tools) == asked and c.id not in decided]


def unanswerable(session: Session, call_ids: list[str], input_tools: frozenset[str] = frozenset()) -> str | None:
    """Why these calls cannot take results from outside now (None: all can): each must be a pending question or
    client tool call without an answer, named once."""
    if len(set(call_ids)) != len(call_ids):
        return "a tool call id is named twice"
    waiting = {c.id for c in waiting_on(session, "need_input", input_tools)}
    answered = {m.tool_call_id for m in session.messages if m.role == "tool"} | set(decisions_for_pending(session))
    for call_id in call_ids:
        if call_id in waiting:
            continue
        if call_id in answered:
            return f"tool call {call_id!r} was already answered"
        return f"no pending tool call with id {call_id!r} waits for a result from the client"
    return None


def answer_calls(session: Session, results: dict[str, str], approver: str = "") -> list[str]:
    """Take results from outside for pending calls (client tools, questions): each becomes its call's tool
    result when the batch closes. The caller checked them (`unanswerable`); returns the ids taken."""
    for call_id, content in results.items():
        session.decisions.append(Decision(tool_call_id=call_id, approved=True, approver=approver, answer=content,
                                          batch=session.batch))
    return list(results)


def prepare_resume(
    session: Session,
    approve: bool = True,
    answer_text: str | None = None,
    input_tools: frozenset[str] = frozenset(),
    approver: str = "",
) -> None:
    """rein-agent's resume semantics: decide the pending batch, or add an answer, then go on (`approver`: who
    decided, recorded with each decision)."""
    if session.stage == Stage.RUN_TOOLS and session.pending_tool_calls:
        if answer_text is not None and any(c.name in input_tools for c in session.pending_tool_calls):
            answer(session, answer_text, approver, input_tools=input_tools)
        decide(session, approve, approver=approver, input_tools=input_tools)
    elif answer_text is not None:
        answer(session, answer_text, approver, input_tools=input_tools)
    session.done = False
    session.stop_reason = None


def prepare_turn(session: Session, prompt: str) -> None:
    """A new chat turn: keep the history, reset the per-turn budgets."""
    session.messages.append(Message(role="user", content=prompt))
    session.stage = Stage.CALL_MODEL
    session.done = False
    session.stop_reason = None
    session.iteration = 0
    session.repeat_count = 0
    session.last_signature = None
    session.pending_tool_calls = []
    session.usage = type(session.usage)()
    session.output_json = None
    session.output_failures = 0

"""rein.core.machine, the pure agent loop both engines drive: decisions, outcomes and the texts
the model and people see. Written against mutation testing (docs/mutation.md): each test
pins a behaviour a plausible wrong version of the code would change.
"""

from __future__ import annotations

import pytest

from rein.core import machine
from rein.core.config import LoopConfig
from rein.core.ir import Completion, Message, OutputCheck, ToolCall, ToolResult, Usage
from rein.core.session import Decision, Session, Stage
from tests.support.tools import tc

ASK = machine.ASK_HUMAN


def answered(text: str, usage: Usage | None = None) -> Completion:
    return Completion(message=Message(role="assistant", content=text), usage=usage or Usage(), finish_reason="stop")


def calling(*calls: ToolCall, usage: Usage | None = None) -> Completion:
    return Completion(
        message=Message(role="assistant", tool_calls=list(calls)), usage=usage or Usage(), finish_reason="tool_calls"
    )


def waiting_on(*calls: ToolCall) -> Session:
    """A Session whose model asked for `calls` (stage RUN_TOOLS)."""
    session = machine.new_session("go")
    machine.apply_completion(session, calling(*calls))
    return session


def loop_state(session: Session) -> dict:
    """The per-turn loop fields (everything but the conversation and the audit trail)."""
    return session.model_dump(
        include={"stage", "done", "stop_reason", "iteration", "repeat_count", "last_signature",
                 "pending_tool_calls", "usage", "output_json", "output_failures"}
    )


# ---------------------------------------------------------------- next_action


def test_a_finished_session_finishes_with_its_reason_or_done():
    session = Session(done=True, stop_reason="max_tokens")
    assert machine.next_action(session, LoopConfig(), 0) == machine.Finish(stop_reason="max_tokens")
    assert machine.next_action(Session(done=True), LoopConfig(), 0) == machine.Finish(stop_reason="done")


def test_stage_done_finishes_and_marks_the_session_done():
    session = Session(stage=Stage.DONE)
    assert machine.next_action(session, LoopConfig(), 0) == machine.Finish(stop_reason="done")
    assert session.done and session.stop_reason == "done"


def test_invalid_output_ends_the_run_only_after_the_retries_are_spent():
    config = LoopConfig(output_retries=2)
    session = Session(output_failures=2)  # two invalid answers: both were retries, go on
    assert machine.next_action(session, config, 0) == machine.CallModel(iteration=1)
    session.output_failures = 3
    assert machine.next_action(session, config, 0) == machine.Finish(stop_reason="invalid_output")
    assert session.done and session.stop_reason == "invalid_output"


def test_run_tools_with_nothing_pending_goes_back_to_the_model():
    session = Session(stage=Stage.RUN_TOOLS, iteration=4)
    assert machine.next_action(session, LoopConfig(), 0) == machine.CallModel(iteration=5)
    assert session.stage == Stage.CALL_MODEL


def test_deny_policy_refuses_even_tools_that_require_approval_without_waiting():
    session = waiting_on(tc("wire_money", "a"), tc("search", "b"))
    action = machine.next_action(session, LoopConfig(permission="deny"), 0, approval_tools=frozenset({"wire_money"}))
    assert action == machine.RunTools(calls=[])
    steps = machine.apply_tool_results(session, [])
    assert [m.content for m in session.messages[-2:]] == [
        "Denied by policy: the call to 'wire_money' was not run.",
        "Denied by policy: the call to 'search' was not run.",
    ]
    assert all(s.is_error for s in steps)


def test_allow_policy_waits_only_for_tools_that_require_approval():
    session = waiting_on(tc("wire_money", "a"), tc("search", "b"))
    action = machine.next_action(session, LoopConfig(), 0, approval_tools=frozenset({"wire_money"}))
    assert isinstance(action, machine.Wait)
    assert action.interrupt.type == "need_approval"
    assert action.interrupt.tool_call == tc("wire_money", "a")
    assert action.interrupt.message == "Approval needed to run: wire_money. Approve or deny to continue."


def test_ask_policy_names_every_undecided_call_in_the_approval_message():
    session = waiting_on(tc("search", "a"), tc("fetch", "b"))
    action = machine.next_action(session, LoopConfig(permission="ask"), 0)
    assert action.interrupt.message == "Approval needed to run: search, fetch. Approve or deny to continue."
    machine.decide(session, True, "a")
    action = machine.next_action(session, LoopConfig(permission="ask"), 0)
    assert action.interrupt.message == "Approval needed to run: fetch. Approve or deny to continue."


# ---------------------------------------------------------------- interrupts


def test_input_interrupt_shows_the_question_or_a_default():
    assert machine.input_interrupt(tc(ASK, "q", question="Which city?")).message == "Which city?"
    default = "The agent needs input from a person."
    assert machine.input_interrupt(tc(ASK, "q")).message == default
    assert machine.input_interrupt(tc(ASK, "q", question="")).message == default
    assert machine.input_interrupt(tc(ASK, "q", question=["not", "text"])).message == default


# ---------------------------------------------------------------- apply_completion


def test_a_text_answer_ends_the_turn_with_a_step_carrying_its_usage():
    session = machine.new_session("hi", system="be brief")
    usage = Usage(input_tokens=7, output_tokens=3)
    step = machine.apply_completion(session, answered("x" * 200, usage), duration_s=1.5)
    assert (session.done, session.stage, session.stop_reason, session.iteration) == (True, Stage.DONE, "done", 1)
    assert session.usage == usage
    assert step.kind == "model" and step.usage == usage and step.duration_s == 1.5
    assert step.summary == "x" * 120 + "…"
    assert machine.run_output(session) == "x" * 200


def test_tool_calls_become_pending_with_a_summary_naming_them():
    session = machine.new_session("hi")
    usage = Usage(input_tokens=5, output_tokens=2)
    step = machine.apply_completion(session, calling(tc("search", "a"), tc("fetch", "b"), usage=usage), 0.25)
    assert session.stage == Stage.RUN_TOOLS and not session.done
    assert [c.id for c in session.pending_tool_calls] == ["a", "b"]
    assert step.summary == "tool calls: search, fetch"
    assert step.tool_calls == [tc("search", "a"), tc("fetch", "b")]
    assert step.usage == usage and step.duration_s == 0.25
    assert session.repeat_count == 1


def test_only_a_tool_calls_finish_runs_tools():
    # finish_reason "stop" with stray tool calls: the answer is final, nothing runs
    session = machine.new_session("hi")
    stray = Completion(message=Message(role="assistant", content="done", tool_calls=[tc("search", "a")]), finish_reason="stop")
    machine.apply_completion(session, stray)
    assert session.done and session.pending_tool_calls == []
    # finish_reason "tool_calls" without any call: also final, not an empty tool batch
    session = machine.new_session("hi")
    machine.apply_completion(session, Completion(message=Message(role="assistant", content="ok"), finish_reason="tool_calls"))
    assert session.done and session.stage == Stage.DONE


def test_repeated_call_ids_in_one_answer_get_distinct_ids():
    calls = [tc("search", "a", x=1), tc("search", "a", x=2), tc("search", "a", x=3), tc("search", "b")]
    unique = machine.unique_call_ids(calls)
    assert [c.id for c in unique] == ["a", "a~2", "a~3", "b"]
    assert [c.arguments for c in unique] == [{"x": 1}, {"x": 2}, {"x": 3}, {}]
    assert calls[1].id == "a"  # the model's own objects are not changed
    # a suffix that collides with an id the model used is skipped
    assert [c.id for c in machine.unique_call_ids([tc("search", "a"), tc("search", "a~2"), tc("search", "a")])] == ["a", "a~2", "a~3"]


def test_each_duplicate_id_gets_its_own_tool_result():
    session = waiting_on(tc("search", "a", q="x"), tc("search", "a", q="y"))
    assert [c.id for c in session.pending_tool_calls] == ["a", "a~2"]
    machine.apply_tool_results(
        session, [ToolResult(tool_call_id="a", content="X"), ToolResult(tool_call_id="a~2", content="Y")]
    )
    assert [(m.tool_call_id, m.content) for m in session.messages if m.role == "tool"] == [("a", "X"), ("a~2", "Y")]


# ---------------------------------------------------------------- final results (output types)


def final(check: OutputCheck, *calls: ToolCall) -> Completion:
    return Completion(
        message=Message(role="assistant", tool_calls=list(calls) or None),
        usage=Usage(input_tokens=4, output_tokens=6),
        finish_reason="tool_calls",
        output=check,
    )


def test_an_accepted_final_result_ends_the_run_and_answers_every_call():
    session = machine.new_session("hi")
    data = '{"answer": "' + "y" * 200 + '"}'
    step = machine.apply_completion(
        session,
        final(OutputCheck(tool_call_id="f", data_json=data), tc("search", "s"), tc("final_result", "f")),
        duration_s=2.0,
    )
    assert session.output_json == data
    assert [(m.tool_call_id, m.content) for m in session.messages if m.role == "tool"] == [
        ("s", "Not run: the final result ended the run."),
        ("f", "Final result accepted."),
    ]
    assert (session.done, session.stage, session.stop_reason, session.pending_tool_calls) == (True, Stage.DONE, "done", [])
    assert session.iteration == 1 and session.usage.total_tokens == 10
    assert step.kind == "model" and not step.is_error
    assert step.summary == "final result: " + data[:110] + "…"
    assert step.duration_s == 2.0 and step.usage == Usage(input_tokens=4, output_tokens=6)
    assert machine.run_output(session) == data
    assert machine.run_data(session) == {"answer": "y" * 200}


def test_an_invalid_final_result_goes_back_to_the_model_as_the_calls_tool_result():
    session = machine.new_session("hi")
    error = "answer: field required " + "z" * 200
    step = machine.apply_completion(session, final(OutputCheck(tool_call_id="f", error=error), tc("final_result", "f")), 1.0)
    assert session.output_failures == 1 and session.output_json is None
    assert session.messages[-1] == Message(role="tool", tool_call_id="f", content=error)
    assert (session.done, session.stage) == (False, Stage.CALL_MODEL)
    assert step.is_error and step.summary == error[:120] + "…" and step.duration_s == 1.0
    assert step.tool_calls is None
    assert machine.run_data(session) is None


def test_invalid_final_results_are_counted_until_the_retries_run_out():
    session = machine.new_session("hi")
    config = LoopConfig(output_retries=1)
    machine.apply_completion(session, final(OutputCheck(tool_call_id="f1", error="bad"), tc("final_result", "f1")))
    assert machine.next_action(session, config, 0) == machine.CallModel(iteration=2)
    machine.apply_completion(session, final(OutputCheck(tool_call_id="f2", error="bad"), tc("final_result", "f2")))
    assert session.output_failures == 2
    assert machine.next_action(session, config, 0) == machine.Finish(stop_reason="invalid_output")


def test_an_invalid_final_result_without_a_call_is_a_user_message():
    session = machine.new_session("hi")
    machine.apply_completion(session, final(OutputCheck(error="Call final_result with your answer.")))
    assert session.messages[-1] == Message(role="user", content="Call final_result with your answer.")
    assert session.stage == Stage.CALL_MODEL and session.output_failures == 1


def test_other_calls_next_to_an_invalid_final_result_still_run():
    session = machine.new_session("hi")
    step = machine.apply_completion(
        session, final(OutputCheck(tool_call_id="f", error="bad"), tc("final_result", "f"), tc("search", "s"))
    )
    assert session.stage == Stage.RUN_TOOLS
    assert session.pending_tool_calls == [tc("search", "s")] == step.tool_calls
    assert machine.next_action(session, LoopConfig(), 0) == machine.RunTools(calls=[tc("search", "s")])


def test_run_output_prefers_the_final_result_over_the_last_text():
    session = machine.new_session("hi")
    session.messages.append(Message(role="assistant", content="some text"))
    assert machine.run_output(session) == "some text" and machine.run_data(session) is None
    session.output_json = '{"n": 1}'
    assert machine.run_output(session) == '{"n": 1}' and machine.run_data(session) == {"n": 1}


# ---------------------------------------------------------------- tool results


def test_tool_steps_summarise_the_result_and_close_the_batch():
    session = waiting_on(tc("search", "a"), tc("fetch", "b"))
    steps = machine.apply_tool_results(
        session,
        [ToolResult(tool_call_id="b", content="short", is_error=True), ToolResult(tool_call_id="a", content="r" * 100)],
        duration_s=0.5,
    )
    assert [s.summary for s in steps] == ["search → " + "r" * 80 + "…", "fetch → short"]
    assert [s.is_error for s in steps] == [False, True]
    assert all(s.kind == "tool" and s.duration_s == 0.5 for s in steps)
    assert session.pending_tool_calls == [] and session.stage == Stage.CALL_MODEL


def test_a_denial_tells_the_model_who_denied_and_why():
    session = waiting_on(tc("rm", "a"), tc("rm", "b"))
    machine.decide(session, False, "a", approver="alice", reason="too risky")
    machine.decide(session, False, "b")
    machine.apply_tool_results(session, [])
    assert [m.content for m in session.messages[-2:]] == [
        "Denied by alice: the call to 'rm' was not run. Reason: too risky Continue without it or try another approach.",
        "Denied: the call to 'rm' was not run. Continue without it or try another approach.",
    ]
    assert [(d.approver, d.reason) for d in session.decisions] == [("alice", "too risky"), ("", "")]


# ---------------------------------------------------------------- people: decide, answer, resume


def test_answer_to_a_pending_question_is_its_result_and_is_recorded():
    session = waiting_on(tc(ASK, "q", question="Which city?"))
    assert machine.answer(session, "Oslo", approver="bob", input_tools=frozenset({ASK})) == "tool"
    assert session.decisions == [Decision(tool_call_id="q", approved=True, approver="bob", answer="Oslo", batch=1)]
    machine.answer(waiting := waiting_on(tc(ASK, "q")), "Rome", input_tools=frozenset({ASK}))
    assert waiting.decisions[0].approver == ""
    assert machine.next_action(session, LoopConfig(), 0, input_tools=frozenset({ASK})) == machine.RunTools(calls=[])
    machine.apply_tool_results(session, [])
    assert session.messages[-1] == Message(role="tool", tool_call_id="q", content="Oslo")


def test_an_answer_while_approval_is_pending_is_a_new_message_not_a_tool_result():
    session = waiting_on(tc("rm", "a"))
    assert machine.answer(session, "do something else", input_tools=frozenset({ASK})) == "message"
    assert session.decisions == []
    assert session.messages[-1] == Message(role="user", content="do something else")
    assert session.stage == Stage.CALL_MODEL and session.pending_tool_calls == []


def test_an_answer_after_a_finished_turn_resets_the_loop_for_the_next_call():
    session = machine.new_session("hi")
    machine.apply_completion(session, final(OutputCheck(tool_call_id="f", data_json="{}"), tc("final_result", "f")))
    session.output_failures = 1
    assert machine.answer(session, "and now?") == "message"
    state = loop_state(session)
    assert (state["stage"], state["done"], state["stop_reason"]) == (Stage.CALL_MODEL, False, None)
    assert (state["pending_tool_calls"], state["output_json"], state["output_failures"]) == ([], None, 0)
    assert machine.next_action(session, LoopConfig(), 0) == machine.CallModel(iteration=2)


def test_a_new_turn_starts_with_fresh_budgets_and_keeps_the_conversation():
    session = waiting_on(tc("search", "a"))
    machine.apply_completion(session, calling(tc("search", "a"), usage=Usage(input_tokens=9)))
    session.done, session.stop_reason, session.output_json, session.output_failures = True, "loop_detected", "{}", 2
    before = len(session.messages)
    machine.prepare_turn(session, "next question")
    assert loop_state(session) == loop_state(Session())
    assert len(session.messages) == before + 1 and session.messages[-1] == Message(role="user", content="next question")


def test_resume_approves_the_pending_batch_by_default():
    session = waiting_on(tc("rm", "a"))
    machine.prepare_resume(session)
    assert session.decisions == [Decision(tool_call_id="a", approved=True, batch=1)]
    assert machine.next_action(session, LoopConfig(permission="ask"), 0) == machine.RunTools(calls=[tc("rm", "a")])


def test_resume_without_an_answer_leaves_a_pending_question_waiting():
    session = waiting_on(tc(ASK, "q", question="Which city?"), tc("search", "a"))
    session.done, session.stop_reason = True, "interrupted"
    machine.prepare_resume(session, approve=True, input_tools=frozenset({ASK}))
    assert (session.done, session.stop_reason) == (False, None)
    action = machine.next_action(session, LoopConfig(), 0, input_tools=frozenset({ASK}))
    assert isinstance(action, machine.Wait) and action.interrupt.type == "need_input"
    assert action.interrupt.message == "Which city?"


def test_resume_with_an_answer_is_never_dropped():
    # a Session from outside may say RUN_TOOLS with nothing pending: the answer is a new message
    session = Session(messages=[Message(role="user", content="hi")], stage=Stage.RUN_TOOLS)
    machine.prepare_resume(session, answer_text="more context", input_tools=frozenset({ASK}))
    assert session.messages[-1] == Message(role="user", content="more context")
    assert session.stage == Stage.CALL_MODEL


def test_forget_pending_decisions_keeps_the_decisions_of_closed_calls():
    session = waiting_on(tc("rm", "new"))
    session.decisions = [Decision(tool_call_id="old", approved=True), Decision(tool_call_id="new", approved=True)]
    machine.forget_pending_decisions(session)
    assert session.decisions == [Decision(tool_call_id="old", approved=True)]
    assert isinstance(machine.next_action(session, LoopConfig(permission="ask"), 0), machine.Wait)


def next_batch(session: Session, *calls: ToolCall) -> None:
    """The pending batch runs (results), and the model asks for `calls`."""
    machine.apply_tool_results(session, [ToolResult(tool_call_id=c.id, content="ok") for c in session.pending_tool_calls])
    machine.apply_completion(session, calling(*calls))


def test_a_decision_belongs_to_its_batch_when_the_next_batch_repeats_the_call_id():
    # LiteLLM falls back to call_0, call_1... in every turn: approving wipe(alpha) must not approve wipe(prod)
    session = waiting_on(tc("wipe", "call_0", target="alpha"))
    assert machine.decide(session, True) == ["call_0"]
    assert isinstance(machine.next_action(session, LoopConfig(permission="ask"), 0), machine.RunTools)
    next_batch(session, tc("wipe", "call_0", target="prod"))
    assert session.batch == 2 and machine.decisions_for_pending(session) == {}
    action = machine.next_action(session, LoopConfig(permission="ask"), 0)
    assert isinstance(action, machine.Wait) and action.interrupt.tool_call.arguments == {"target": "prod"}
    assert machine.waiting_on(session, "need_approval") == session.pending_tool_calls
    assert [d.tool_call_id for d in machine.stale_decisions(session)] == ["call_0"]


def test_reopen_stale_is_the_earlier_builds_rule():
    session = waiting_on(tc("wipe", "call_0", target="alpha"))
    machine.decide(session, True)
    next_batch(session, tc("wipe", "call_0", target="prod"))
    machine.reopen_stale(session)
    assert isinstance(machine.next_action(session, LoopConfig(permission="ask"), 0), machine.RunTools)
    assert machine.stale_decisions(session) == []


def test_decide_takes_exactly_the_named_calls():
    session = waiting_on(tc("rm", "a"), tc("rm", "b"), tc("rm", "c"))
    assert machine.decide(session, False, tool_call_ids=["c", "a", "zz"], reason="no") == ["a", "c"]
    assert sorted(machine.decisions_for_pending(session)) == ["a", "c"]
    assert [c.id for c in machine.waiting_on(session, "need_approval")] == ["b"]
    assert machine.decide(session, True, tool_call_ids=[]) == []


def test_a_session_of_an_earlier_rein_keeps_its_pending_decisions():
    # no `batch` fields: the pending batch and its decisions are both batch 0
    raw = waiting_on(tc("rm", "a")).model_dump(mode="json")
    raw.pop("batch")
    raw["decisions"] = [{"tool_call_id": "a", "approved": True}]
    session = Session.model_validate(raw)
    assert session.batch == 0 and "a" in machine.decisions_for_pending(session)
    assert "batch" not in Session().model_dump(mode="json")  # nothing new recorded for a run without tool calls


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [(None, 3, ""), ("", 3, ""), ("abc", 3, "abc"), ("abcd", 3, "abc…")],
)
def test_truncate_marks_what_it_cut(text, limit, expected):
    assert machine.truncate(text, limit) == expected

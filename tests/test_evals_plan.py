"""rein.core.evals, the pure part of what-if runs: which recorded call answers a new one, which decision
applies, where two runs' tool calls first differ."""

from __future__ import annotations

from rein.core import evals
from rein.core.ir import Message, ToolCall
from rein.core.result import Interrupt, Step
from rein.core.session import Decision, Session, Stage


def recorded_session() -> Session:
    """`next_ticket()` twice (1, then 2), `close(id=1)` denied, `ask` answered."""
    calls = [ToolCall(id="a", name="next_ticket", arguments={}), ToolCall(id="b", name="next_ticket", arguments={}),
             ToolCall(id="c", name="close", arguments={"id": 1}), ToolCall(id="d", name="ask", arguments={"q": "?"})]
    messages = [Message(role="user", content="go")]
    for call, result in zip(calls, ["1", "2", "Denied by ops: ...", "yes"], strict=True):
        messages += [Message(role="assistant", tool_calls=[call]), Message(role="tool", tool_call_id=call.id, content=result)]
    return Session(messages=messages, decisions=[Decision(tool_call_id="c", approved=False, approver="ops"),
                                                 Decision(tool_call_id="d", approved=True, answer="yes")])


def test_equal_calls_answer_in_the_recorded_order_then_the_last_again() -> None:
    plan = evals.EvalPlan(of="r", calls=evals.recorded_calls(recorded_session()))
    used: set[int] = set()
    ticket = ToolCall(id="x", name="next_ticket", arguments={})
    answers = [evals.replayed_result(plan, ticket, used) for _ in range(3)]
    assert [a.content for a in answers if a is not None] == ["1", "2", "2"]
    assert evals.replayed_result(plan, ToolCall(id="y", name="next_ticket", arguments={"n": 1}), used) is None
    assert evals.call_key("f", {"b": 1, "a": 2}) == evals.call_key("f", {"a": 2, "b": 1})


def test_recorded_decisions_are_taken_and_a_new_call_that_needs_a_person_ends_the_run() -> None:
    plan = evals.EvalPlan(of="r", calls=evals.recorded_calls(recorded_session()))
    close, ask = ToolCall(id="n1", name="close", arguments={"id": 1}), ToolCall(id="n2", name="ask", arguments={"q": "?"})
    session = Session(messages=[Message(role="assistant", tool_calls=[close, ask])], stage=Stage.RUN_TOOLS,
                      pending_tool_calls=[close, ask])
    waiting = Interrupt(type="need_approval", tool_call=close)
    assert evals.settle(plan, session, waiting, 3, [close, ask], frozenset({"ask"})) is None
    assert [(d.tool_call_id, d.approved, d.approver, d.answer) for d in session.decisions] == [
        ("n1", False, "ops", None), ("n2", True, "", "yes")]
    other = ToolCall(id="n3", name="close", arguments={"id": 2})
    session.pending_tool_calls = [other]
    why = evals.settle(plan, session, waiting, 5, [other])
    assert why == 'diverged at step 5: new call close({"id":2}) needs approval'
    failed = Interrupt(type="error", message="Model call failed: 401")
    assert evals.settle(plan, session, failed, 6, []) == "stopped at step 6: Model call failed: 401"


def test_the_first_difference_is_where_the_calls_differ_by_place() -> None:
    def model(index: int, *names: str) -> Step:
        return Step(index=index, kind="model", summary="", tool_calls=[ToolCall(id=n, name=n, arguments={}) for n in names])

    recorded = [model(0, "a", "b"), Step(index=1, kind="tool", summary=""), model(2, "c"), model(3)]
    assert evals.first_difference(recorded, [model(7, "b", "a"), model(8, "c"), model(9)]) is None
    assert evals.first_difference(recorded, [model(0, "a", "b"), model(1, "d")]) == 1
    assert evals.first_difference(recorded, [model(0, "a", "b"), model(1)]) == 2
    assert evals.first_difference(recorded, [model(0, "a"), model(1, "c")]) == 0

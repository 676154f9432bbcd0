"""What a page's answers to a wait become (rein.web.resume), without a server: which updates are sent in which
order, and what is refused before anything is sent. The threads themselves are in test_agui.py / test_ai_sdk.py."""

from __future__ import annotations

import pytest

from rein.core.contract import RunStatusView
from rein.core.errors import DecisionRejected
from rein.core.ir import ToolCall, Usage
from rein.core.result import Interrupt
from rein.web.resume import Answer, check, steps

WAIT = "4-9f2c1ab4"


def waiting(status: str, kind: str, calls: list[tuple[str, str]], wait: str | None = WAIT) -> RunStatusView:
    pending = [ToolCall(id=i, name=name, arguments={}) for i, name in calls]
    return RunStatusView(status=status, stage="run_tools", iteration=1, usage=Usage(), stop_reason="interrupted",
                         interrupt=Interrupt(type=kind, tool_call=pending[0] if pending else None, wait=wait),  # type: ignore[arg-type]
                         pending_tool_calls=pending, wait=wait, waiting_on=[i for i, _ in calls])


def test_denials_go_first_then_the_approvals_and_answers_in_the_order_the_run_takes_them() -> None:
    answers = [Answer("a", WAIT, "call_0", "approve"), Answer("b", WAIT, "call_1", "deny", "no"),
               Answer("c", WAIT, "call_2", "deny", "later"), Answer("d", WAIT, "call_3", "approve")]
    assert [(kind, text, [a.call for a in group]) for kind, text, group in steps(answers)] == [
        ("deny", "no", ["call_1"]), ("deny", "later", ["call_2"]), ("approve", "", ["call_0", "call_3"])]
    questions = [Answer("q1", WAIT, "call_1", "answer", "eu"), Answer("q0", WAIT, "call_0", "answer", "yes")]
    assert [group[0].call for _, _, group in steps(questions, ["call_0", "call_1"])] == ["call_0", "call_1"]


def test_a_stale_wait_an_unknown_call_or_a_question_out_of_order_is_refused_before_anything_is_sent() -> None:
    approval = waiting("waiting_approval", "need_approval", [("call_0", "wipe")])
    check(approval, "t", [Answer(f"rein.{WAIT}.call_0", WAIT, "call_0", "approve")])  # fits
    for answer, words in ((Answer("rein.3-9f2c1ab4.call_0", "3-9f2c1ab4", "call_0", "approve"), "stale"),
                          (Answer("call_0", None, "call_0", "approve"), "earlier build"),
                          (Answer(f"rein.{WAIT}.call_9", WAIT, "call_9", "approve"), "not pending"),
                          (Answer(f"rein.{WAIT}.retry", WAIT, None, "retry"), "not pending")):
        with pytest.raises(DecisionRejected, match=words) as refused:
            check(approval, "t", [answer])
        assert f"wait {WAIT} for approval of wipe() [call_0]" in str(refused.value) and "\n" not in str(refused.value)
    questions = waiting("waiting_input", "need_input", [("call_0", "ask_human"), ("call_1", "ask_human")])
    with pytest.raises(DecisionRejected, match="in their order"):
        check(questions, "t", [Answer("q", WAIT, "call_1", "answer", "eu")])  # the run would give it to call_0
    check(questions, "t", [Answer("q", WAIT, "call_0", "answer", "yes")])

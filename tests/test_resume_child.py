"""`agent.resume` on a parent run whose agent-as-tool child waits for a person resumes that same run
(the decision reaches the child through the parent), instead of starting a new run."""

from __future__ import annotations

from rein import Agent, LoopConfig, MockProvider, ToolCall


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_resume_of_a_parent_whose_child_waits_continues_the_same_run():
    child = Agent(provider=MockProvider([[ToolCall(id="c-add", name="add", arguments={"a": 1, "b": 2})], "child says 3"]),
                  tools=[add], name="resume-child", config=LoopConfig(permission="ask"), engine="temporal")
    parent = Agent(provider=MockProvider([[ToolCall(id="p-ask", name="resume_child", arguments={"prompt": "1+2?"})],
                                          "parent heard: child says 3"]),
                   tools=[child.as_tool()], name="resume-parent", engine="temporal")
    paused = parent.run("ask the child")
    assert paused.status == "interrupted" and paused.interrupt is not None
    assert paused.interrupt.type == "need_approval"  # the child's, shown by the parent

    resumed = parent.resume(paused.session, approve=True)
    assert resumed.run_id == paused.run_id  # the same run, not a new one
    assert resumed.status == "done" and resumed.output == "parent heard: child says 3"

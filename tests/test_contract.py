"""rein.core.contract's decisions, pure: what a client's config may change, what input starts a
run, and the Session patch a middleware step hands back to the workflow (see docs/mutation.md).
The same rules end to end, over a server: tests/test_bad_input.py, tests/test_workflow.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rein.core.config import LoopConfig
from rein.core.contract import AgentInput, StepOutcome, apply_overrides
from rein.core.ir import Message
from rein.core.result import Interrupt, Step
from rein.core.session import Session, Stage

STRICT = LoopConfig(
    permission="ask", max_iterations=10, max_tokens=1000, timeout_s=60, repeat_threshold=3,
    detect_loops=True, approvers=["alice", "bob"],
)
HINT = "; the agent can allow it with Agent(client_overrides=[...])"


# ---------------------------------------------------------------- config overrides


@pytest.mark.parametrize(
    ("override", "shown"),
    [
        ({"permission": "allow"}, "permission ('ask' -> 'allow')"),
        ({"max_iterations": 11}, "max_iterations (10 -> 11)"),
        ({"max_tokens": 1001}, "max_tokens (1000 -> 1001)"),
        ({"max_tokens": None}, "max_tokens (1000 -> None)"),
        ({"timeout_s": 60.5}, "timeout_s (60.0 -> 60.5)"),
        ({"timeout_s": None}, "timeout_s (60.0 -> None)"),
        ({"repeat_threshold": 4}, "repeat_threshold (3 -> 4)"),
        ({"detect_loops": False}, "detect_loops (True -> False)"),
        ({"approvers": ["alice", "mallory"]}, "approvers (['alice', 'bob'] -> ['alice', 'mallory'])"),
        ({"approvers": None}, "approvers (['alice', 'bob'] -> None)"),
    ],
)
def test_a_client_may_not_loosen_safety(override: dict[str, Any], shown: str):
    with pytest.raises(ValueError) as refused:
        apply_overrides(STRICT, override)
    assert str(refused.value) == "a client may tighten but not loosen " + shown + HINT


def test_every_loosening_is_named_in_one_error_in_field_order():
    # the same text in every process (a set's order would vary with hash seeding)
    with pytest.raises(ValueError) as refused:
        apply_overrides(STRICT, {"permission": "allow", "max_iterations": 50, "model_attempts": 9})
    assert str(refused.value) == (
        "a client may tighten but not loosen max_iterations (10 -> 50), permission ('ask' -> 'allow')" + HINT
    )


@pytest.mark.parametrize(
    "override",
    [
        {"permission": "ask"}, {"permission": "deny"},
        {"max_iterations": 10}, {"max_iterations": 1},
        {"max_tokens": 1000}, {"max_tokens": 1},
        {"timeout_s": 60}, {"timeout_s": 0.5},
        {"repeat_threshold": 3}, {"repeat_threshold": 1},
        {"detect_loops": True},
        {"approvers": ["alice", "bob"]}, {"approvers": ["bob"]}, {"approvers": []},
        # operational settings, not safety: either way
        {"approval_timeout_s": 5}, {"model_attempts": 9}, {"model_timeout_s": 1}, {"output_retries": 7},
        {"heartbeat_timeout_s": 3},
    ],
)
def test_a_client_may_tighten_or_keep_safety(override: dict[str, Any]):
    config = apply_overrides(STRICT, override)
    assert config == STRICT.model_copy(update=override)
    assert STRICT.max_iterations == 10 and STRICT.permission == "ask"  # the agent's own config is untouched


def test_an_unlimited_or_open_setting_may_be_set_to_anything():
    open_ = LoopConfig(permission="allow", max_tokens=None, timeout_s=None, detect_loops=False, approvers=None)
    override = {"permission": "ask", "max_tokens": 5, "timeout_s": 9, "detect_loops": False, "approvers": ["x"]}
    assert apply_overrides(open_, override) == open_.model_copy(update=override)
    assert apply_overrides(open_, {"detect_loops": True}).detect_loops is True
    assert apply_overrides(LoopConfig(permission="deny"), {"permission": "deny"}).permission == "deny"


def test_the_agent_decides_what_a_client_may_loosen():
    assert apply_overrides(STRICT, {"permission": "allow"}, ["permission"]).permission == "allow"
    with pytest.raises(ValueError, match=r"max_iterations \(10 -> 11\)"):
        apply_overrides(STRICT, {"permission": "allow", "max_iterations": 11}, ["permission"])
    loosened = apply_overrides(STRICT, {"permission": "allow", "max_tokens": None, "approvers": None}, ["*"])
    assert (loosened.permission, loosened.max_tokens, loosened.approvers) == ("allow", None, None)


def test_unknown_or_out_of_bounds_overrides_are_refused():
    with pytest.raises(ValueError, match="max_iteration"):
        apply_overrides(STRICT, {"max_iteration": 5})
    with pytest.raises(ValueError, match="max_iterations"):
        apply_overrides(STRICT, {"max_iterations": 0}, ["*"])


# ---------------------------------------------------------------- workflow input


def test_an_input_needs_a_prompt_or_a_session():
    with pytest.raises(ValidationError) as refused:
        AgentInput(agent="a")
    assert [e["msg"] for e in refused.value.errors()] == ["Value error, give a 'prompt', a 'session' to resume, or both"]
    from rein.core.errors import validation_text  # what a person reads: rein's sentence, not pydantic's prefix

    assert validation_text(refused.value, "input") == "input: give a 'prompt', a 'session' to resume, or both"
    assert validation_text(refused.value, "") == "give a 'prompt', a 'session' to resume, or both"
    assert AgentInput(agent="a", prompt="hi").session is None
    assert AgentInput(agent="a", session=Session()).prompt is None


# ---------------------------------------------------------------- middleware step outcome


def msg(text: str, role: str = "user") -> Message:
    return Message(role=role, content=text)


def after_session(messages: list[Message]) -> Session:
    return Session(messages=messages, stage=Stage.RUN_TOOLS, iteration=3, repeat_count=2, stop_reason="x")


def test_a_step_that_only_appended_sends_just_the_new_messages():
    before = [msg("a"), msg("b", "assistant")]
    after = after_session(before + [msg("c", "tool"), msg("d", "assistant")])
    steps, interrupt = [Step(index=0, kind="model", summary="s")], Interrupt(type="error", message="m")
    outcome = StepOutcome.between(before, after, steps, interrupt, "token-1")
    assert (outcome.keep, outcome.tail, outcome.conversation) == (2, after.messages[2:], None)
    assert outcome.state.messages == [] and outcome.steps == steps and outcome.interrupt == interrupt
    assert outcome.session_from(Session(messages=before)) == after


@pytest.mark.parametrize(
    ("after", "keep"),
    [
        ([msg("a"), msg("B"), msg("c")], 1),  # an earlier message rewritten (compaction)
        ([msg("a")], 1),  # messages dropped
        ([], 0),
    ],
)
def test_a_step_that_rewrote_history_gets_a_new_conversation_token(after: list[Message], keep: int):
    before = [msg("a"), msg("b"), msg("c")]
    outcome = StepOutcome.between(before, after_session(after), [], None, "token-2")
    assert (outcome.keep, outcome.conversation) == (keep, "token-2")
    assert outcome.tail == after[keep:]
    assert outcome.session_from(Session(messages=before)) == after_session(after)


def test_every_model_on_the_wire_is_complete_at_import():
    """A model left incomplete (a forward reference never rebuilt) has its schema rebuilt by pydantic for
    every TypeAdapter; temporalio's converter builds one per activity and workflow context."""
    import importlib
    import inspect

    from pydantic import BaseModel

    incomplete = [
        f"{module}.{name}"
        for module in ("rein.core.contract", "rein.core.ir", "rein.core.session", "rein.core.result", "rein.core.config",
                       "rein.core.events")
        for name, obj in vars(importlib.import_module(module)).items()
        if inspect.isclass(obj) and issubclass(obj, BaseModel) and obj.__module__ == module
        and not obj.__pydantic_complete__
    ]
    assert incomplete == []


# ---------------------------------------------------------------- the description a lean start records


@pytest.mark.parametrize("config", [
    LoopConfig(),
    LoopConfig(max_tokens=None, timeout_s=None, max_iterations=7, detect_loops=False),
    LoopConfig(max_cost_usd=0.5, approval_timeout_s=60, approvers=["ops"], heartbeat_timeout_s=5, permission="ask"),
], ids=["defaults", "limits-off", "set"])
def test_a_recorded_description_reads_back_as_the_agents_loop_config(config):
    """A limit the agent turned off (None) is recorded as off: left out, it would read back as the default
    (a run stopped at 200,000 tokens or 120 s that its agent let go on)."""
    from rein.core.contract import AgentDescription

    described = AgentDescription(name="a", model="m", config=config, max_payload_bytes=52_428_800)
    assert AgentDescription.model_validate(described.recorded()) == described


def test_what_a_recorded_description_leaves_out_reads_back_as_these_defaults():
    """A recorded description leaves out what equals its default, so the defaults are recorded data:
    a changed default would change what every run recorded before it replays. Add a field; never change
    a default here."""
    from rein.core.contract import AgentDescription

    loop = {name: f.get_default(call_default_factory=True) for name, f in LoopConfig.model_fields.items()}
    assert loop == {
        "max_iterations": 50, "max_tokens": 200_000, "max_cost_usd": None, "thread_max_tokens": None,
        "thread_max_cost_usd": None, "timeout_s": 120, "detect_loops": True,
        "repeat_threshold": 3, "permission": "allow", "approval_timeout_s": None, "model_attempts": 3,
        "model_timeout_s": 300, "model_retry_interval_s": 1, "heartbeat_timeout_s": 20, "approvers": None,
        "output_retries": 1,
    }
    described = {name: f.get_default(call_default_factory=True) for name, f in AgentDescription.model_fields.items()
                 if not f.is_required()}
    assert described == {
        "system": None, "tools": [], "search_attributes": [], "max_payload_bytes": 1_500_000, "middleware": False,
        "compaction": None, "client_overrides": [], "model_queue": None, "version": "", "close_canceled": False,
        "timed_counters": False, "notify_retry_s": 0.0, "in_flight": "stricter",
    }
    assert AgentDescription(name="a", model="m", config=LoopConfig()).recorded() == {
        "name": "a", "model": "m", "config": {}, "tools": []}


def test_a_recorded_description_keeps_every_tools_flags_whole_specs_or_not():
    """A tool listed from an MCP server keeps its whole spec; every tool keeps what the run acts on (a flag
    lost here is a tool call run without the approval its server requires)."""
    from rein.core.contract import AgentDescription, ToolInfo, ToolSpec

    flagged = {"requires_approval": True, "asks_human": False, "local": True, "retries": 2, "timeout_s": 5.0}
    described = AgentDescription(name="a", model="m", config=LoopConfig(), tools=[
        ToolInfo(spec=ToolSpec(name="mcp_tool", description="d", parameters={"type": "object"}), **flagged),
        ToolInfo(spec=ToolSpec(name="code_tool", description="d", parameters={"type": "object"}), **flagged),
    ])
    recorded = AgentDescription.model_validate(described.recorded(whole={"mcp_tool"}))
    whole, by_name = recorded.tools
    assert whole.spec == described.tools[0].spec and not whole.spec_digest
    assert by_name.spec.parameters != described.tools[1].spec.parameters and by_name.same_spec(described.tools[1])
    for tool in recorded.tools:
        assert {k: getattr(tool, k) for k in flagged} == flagged

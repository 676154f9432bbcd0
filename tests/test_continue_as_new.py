"""Long runs continue-as-new with their Session, steps and counters; clients follow them."""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import EventType

import rein
from rein import Agent, Completion, LoopConfig, Message, ToolCall, Usage
from rein.client import ReinClient
from rein.core.contract import WaitRequest
from rein.testing import full_result


class Counter:
    """Stateless scripted model: calls `bump` until it has `rounds` results, then answers."""

    def __init__(self, rounds: int):
        self.rounds = rounds

    async def complete(self, messages, tools=None, **kw):
        done = sum(1 for m in messages if m.role == "tool")
        if done < self.rounds:
            call = ToolCall(id=f"c{done}", name="bump", arguments={"n": done})
            return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls",
                              usage=Usage(input_tokens=1, output_tokens=1))
        return Completion(message=Message(role="assistant", content=f"bumped {done} times"), finish_reason="stop",
                          usage=Usage(input_tokens=1, output_tokens=1))

    async def stream(self, messages, tools=None, **kw):  # pragma: no cover - not used here
        yield


def bump(n: int) -> int:
    """Return n + 1."""
    return n + 1


async def test_long_run_continues_as_new_and_keeps_everything(env):
    agent = Agent(provider=Counter(8), tools=[bump], name="counter", config=LoopConfig(detect_loops=False))
    tq = f"can-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow",
            {"agent": "counter", "prompt": "go", "continue_as_new_after": 20},
            id=f"can-{uuid.uuid4().hex[:8]}",
            task_queue=tq,
        )
        first_run = handle.result_run_id
        result = await full_result(handle)
    assert result["output"] == "bumped 8 times"
    assert result["session"]["iteration"] == 9
    assert [s["kind"] for s in result["steps"]] == ["model", "tool"] * 8 + ["model"]
    assert [s["index"] for s in result["steps"]] == list(range(17))
    # Active time is carried across runs: the whole run took at least what all its steps took.
    assert all(s["duration_s"] > 0 for s in result["steps"]), result["steps"]
    assert result["elapsed_s"] >= sum(s["duration_s"] for s in result["steps"]), result["elapsed_s"]
    tool_messages = [m for m in result["session"]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [str(i + 1) for i in range(8)]
    first = env.client.get_workflow_handle(handle.id, run_id=first_run)
    history = await first.fetch_history()
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert (await env.client.get_workflow_handle(handle.id).describe()).run_id != first_run


async def test_waiting_client_follows_the_run_across_continue_as_new(dev):
    # The Java time-skipping server takes ~10 s to reject an update aimed at a run that
    # just continued as new; the dev server answers at once, as production servers do.
    env = dev
    agent = Agent(provider=Counter(4), tools=[bump], name="asker", config=LoopConfig(permission="ask", detect_loops=False))
    tq = f"can-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        client = ReinClient(env.client, tq)
        handle = await env.client.start_workflow(
            "AgentWorkflow",
            {"agent": "asker", "prompt": "go", "continue_as_new_after": 20},
            id=f"can-{uuid.uuid4().hex[:8]}",
            task_queue=tq,
        )
        run_ids, pauses = set(), 0
        result = await client.wait(handle.id, WaitRequest(after_pause=pauses))
        while result.status == "interrupted":
            assert result.interrupt.type == "need_approval"
            run_ids.add((await client.handle(handle.id).describe()).run_id)
            pauses += 1
            await client.approve(handle.id, approver="ops", wait=True)
            result = await client.wait(handle.id, WaitRequest(after_pause=pauses))
    assert result.output == "bumped 4 times"
    assert pauses == 4
    assert len(run_ids) >= 2, "the run should have continued as new while waiting clients followed it"
    assert len(result.session.decisions) == 4 and {d.approver for d in result.session.decisions} == {"ops"}


def blob(n: int) -> str:
    """Return a large text."""
    return "x" * 600_000


async def test_a_session_too_large_to_carry_keeps_its_history(env):
    class Blobs(Counter):
        async def complete(self, messages, tools=None, **kw):
            done = sum(1 for m in messages if m.role == "tool")
            if done < self.rounds:
                call = ToolCall(id=f"b{done}", name="blob", arguments={"n": done})
                return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls")
            return Completion(message=Message(role="assistant", content="done"), finish_reason="stop")

    agent = Agent(provider=Blobs(4), tools=[blob], name="blobs", config=LoopConfig(detect_loops=False))
    tq = f"can-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow",
            {"agent": "blobs", "prompt": "go", "continue_as_new_after": 20},
            id=f"can-{uuid.uuid4().hex[:8]}",
            task_queue=tq,
        )
        result = await full_result(handle)
        history = await env.client.get_workflow_handle(handle.id).fetch_history()  # the last run
        first = await env.client.get_workflow_handle(handle.id, run_id=handle.result_run_id).fetch_history()
    assert first.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    assert result["output"] == "done"
    assert len([m for m in result["session"]["messages"] if m["role"] == "tool"]) == 4
    types = [e.event_type for e in history.events]
    # It continued as new while the Session was small, then stayed in one history.
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in types


HANDED_OVER = {
    # RunCarry fields the run keeps in another form while it runs, and writes only at the hand-over.
    "step_count": "first_step + len(steps)",
    "produced": "a set of hashes",
    "input_tools": "a frozenset, re-derived from the agent",
    "approval_tools": "a frozenset, re-derived from the agent",
    "interrupt": "the wait in progress, if any",
    "agent_version": "the described agent's",
    "permission": "the config's",
}


def test_the_carried_state_has_one_copy():
    """What outlives a run's history lives once, in `RunState.carry` (the continuation's input itself): no
    workflow attribute mirrors a carried field, so a new carried field is one edit of RunCarry."""
    import ast
    from pathlib import Path

    from rein.core.contract import RunCarry

    assigned = set()
    for path in Path(rein.__file__).resolve().parent.parent.joinpath("workflows").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else [])
            for target in targets:
                for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name) and element.value.id == "self":
                        assigned.add(element.attr)
    mirrored = (set(RunCarry.model_fields) - set(HANDED_OVER)) & assigned
    assert not mirrored, f"workflow attributes that copy RunCarry fields (use self.carry.<field>): {sorted(mirrored)}"
    assert "carry" in assigned
    assert set(HANDED_OVER) <= set(RunCarry.model_fields)

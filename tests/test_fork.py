"""Fork and rewind on a real dev server: nothing before the fork point runs again, the original
is untouched, edits reach the model, approvals are asked again, every misfit is a clear error."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

import rein
from rein import Agent, LoopConfig, ToolCall
from rein.client import ReinClient
from rein.core.fork_edits import ForkError
from rein.durable.fork import FORK_MEMO
from rein.ops.runs import RunNotFound, list_runs
from tests.support.providers import AuthFailed, RecordingProvider
from tests.support.waiting import poll


class Counted:
    """Tools whose every execution is counted (the side effects a fork must not repeat)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tools(self) -> list:
        def lookup(key: str) -> str:
            """Look a key up."""
            self.calls.append(key)
            return f"value of {key}"

        return [lookup]


def calls(*keys: str) -> list[ToolCall]:
    return [ToolCall(id=f"c-{k}", name="lookup", arguments={"key": k}) for k in keys]


def five_steps() -> list:
    """model(call a) · tool · model(call b) · tool · model(text): steps 0..4."""
    return [calls("a"), calls("b"), "original answer", "fork answer", "second fork answer"]


async def _run(client: ReinClient, agent: str, prompt: str = "go") -> str:
    handle = await client.start(agent, prompt)
    await handle.result()
    return handle.id


@pytest.fixture
def names() -> str:
    return uuid.uuid4().hex[:6]


async def test_fork_mid_run_with_edited_tool_result(dev, names):
    tools, model = Counted(), RecordingProvider(five_steps())
    agent = Agent(provider=model, tools=tools.tools(), name=f"five-{names}")
    tq = f"fork-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        original = await _run(client, agent.name)
        assert [s.kind for s in await client.steps(original)] == ["model", "tool", "model", "tool", "model"]
        fork_id = await client.fork(original, at_step=3, edits={"tool_results": {"c-b": "EDITED b"}}, by="ops-alice")
        result = await client.result(fork_id)
        original_result = await client.result(original)
    assert result.output == "fork answer"
    # The fork's one model call saw the conversation up to step 3 with the edit; nothing before re-ran.
    assert len(model.seen) == 4
    last_input = model.seen[3]
    assert [m.content for m in last_input if m.role == "tool"] == ["value of a", "EDITED b"]
    assert tools.calls == ["a", "b"]
    assert original_result.output == "original answer"  # untouched
    description = await dev.client.get_workflow_handle(fork_id).describe()
    lineage = await description.memo_value(FORK_MEMO)
    assert lineage["of"] == original and lineage["at_step"] == 3 and lineage["by"] == "ops-alice"
    assert lineage["edits"] == ["tool result c-b replaced"]
    assert "fork of" in (await description.static_summary() or "")
    rows = await poll(lambda: list_runs(client, fork_of=original), "the fork listed by ReinForkOf")
    assert [r.id for r in rows] == [fork_id]


async def test_fork_at_a_tool_step_inside_a_batch_runs_the_rest_of_the_batch_again(dev, names):
    tools = Counted()
    model = RecordingProvider([calls("a", "b", "c"), "done", "fork done"])
    agent = Agent(provider=model, tools=tools.tools(), name=f"batch-{names}")
    tq = f"fork-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        original = await _run(client, agent.name)
        fork_id = await client.fork(original, at_step=1)  # the result of call a only
        assert (await client.result(fork_id)).output == "fork done"
    # a batch's tool calls run concurrently, so only each run's set of calls is fixed
    assert sorted(tools.calls[:3]) == ["a", "b", "c"] and sorted(tools.calls[3:]) == ["b", "c"]
    assert [m.content for m in model.seen[2] if m.role == "tool"] == ["value of a", "value of b", "value of c"]


async def test_fork_of_a_run_that_continued_as_new(dev, names):
    tools = Counted()
    script = [calls(str(i)) for i in range(8)] + ["original done", calls("7"), "fork done"]
    model = RecordingProvider(script)
    agent = Agent(provider=model, tools=tools.tools(), name=f"long-{names}", config=LoopConfig(detect_loops=False))
    tq = f"fork-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": agent.name, "prompt": "go", "continue_as_new_after": 20},
            id=f"long-{names}", task_queue=tq,
        )
        await handle.result()
        assert (await client.status(handle.id)).first_step > 13  # step 13 lies in an earlier run
        fork_id = await client.fork(handle.id, at_step=13, edits={"tool_results": {"c-6": "seven"}})
        assert (await client.result(fork_id)).output == "fork done"
        fork_session = await client.session(fork_id)
    assert tools.calls == [str(i) for i in range(8)] + ["7"]
    assert [m.content for m in fork_session.messages if m.role == "tool"][6:] == ["seven", "value of 7"]
    assert len(model.seen) == 9 + 2


async def test_fork_of_a_waiting_run_asks_for_approval_again(dev, names):
    tools = Counted()
    model = RecordingProvider([calls("a", "b"), "original done", "fork done"])
    agent = Agent(provider=model, tools=tools.tools(), name=f"ask-{names}", config=LoopConfig(permission="ask"))
    tq = f"fork-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        original = (await client.start(agent.name, "go")).id
        await poll(lambda: _status_is(client, original, "waiting_approval"), "the original waiting")
        waiting_fork = await client.fork(original, at_step=0)
        await poll(lambda: _status_is(client, waiting_fork, "waiting_approval"), "the fork waiting")
        assert [c.id for c in (await client.status(waiting_fork)).pending_tool_calls] == ["c-a", "c-b"]
        assert tools.calls == []
        # Approve the original: both calls run there; a fork inside that batch asks again for call b.
        await client.approve(original, approver="ops", wait=True)
        assert (await client.result(original)).output == "original done"
        assert (await client.status(waiting_fork)).status == "waiting_approval"  # the fork is its own run
        integrity_fork = await client.fork(original, at_step=1)
        await poll(lambda: _status_is(client, integrity_fork, "waiting_approval"), "approval asked again")
        assert [c.id for c in (await client.status(integrity_fork)).pending_tool_calls] == ["c-b"]
        assert await client.approve(integrity_fork, approver="ops", wait=True) == ["c-b"]
        assert (await client.result(integrity_fork)).output == "fork done"
    # The original's two calls run at once (either may start first); the fork's b runs after both.
    assert sorted(tools.calls[:2]) == ["a", "b"] and tools.calls[2:] == ["b"]


async def _status_is(client: ReinClient, run_id: str, status: str) -> bool:
    return (await client.status(run_id)).status == status


class FailsAfterOneTool(RecordingProvider):
    """Asks for one call, then fails for good (401) while `failing`: the outage a bulk fork recovers from."""

    failing = True

    async def complete(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201
        if any(m.role == "tool" for m in messages):
            if self.failing:
                raise AuthFailed("key revoked during the outage")
            return await RecordingProvider.complete(self, messages, tools, **kwargs)
        key = next(m.content for m in messages if m.role == "user")
        self.seen.append(messages)
        from rein import Completion, Message

        return Completion(message=Message(role="assistant", tool_calls=calls(key)), finish_reason="tool_calls")


async def test_bulk_fork_of_failed_runs(dev, names):
    tools = Counted()
    model = FailsAfterOneTool(["recovered x", "recovered y"])
    agent = Agent(provider=model, tools=tools.tools(), name=f"outage-{names}", config=LoopConfig(model_attempts=1))
    tq = f"fork-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        failed = [(await client.start(agent.name, key)).id for key in ("x", "y")]
        for run_id in failed:
            with pytest.raises(rein.client.RunFailed):
                await client.result(run_id)
        model.failing = False
        query = f'ReinAgent="{agent.name}"'
        await poll(lambda: _listed_failed(client, query, 2), "both failed runs visible")
        rows = await client.fork_failed(since=timedelta(hours=1), query=query, by="ops")
        assert sorted(r.run_id for r in rows) == sorted(failed)
        assert all(r.at_step == 1 and r.error is None for r in rows), rows
        outputs = sorted([(await client.result(r.fork_id)).output for r in rows])
        again = await client.fork_failed(since=timedelta(hours=1), query=query)  # idempotent
    assert outputs == ["recovered x", "recovered y"]
    assert sorted(tools.calls) == ["x", "y"]  # each run's tool ran once, in the original only
    assert all(r.fork_id is None and "exists already" in r.error for r in again), again


async def _listed_failed(client: ReinClient, query: str, count: int) -> bool:
    from rein.ops.runs import list_query

    found = [e async for e in client.client.list_workflows(f"{list_query('failed')} AND {query}")]
    return len(found) == count


async def test_rewind_in_place(dev, names):
    tools = Counted()
    model = RecordingProvider(five_steps())
    agent = Agent(provider=model, tools=tools.tools(), name=f"rewind-{names}")
    tq = f"fork-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        original = await _run(client, agent.name)
        first_run = (await client.handle(original).describe()).run_id
        with pytest.raises(ForkError, match="tool step"):
            await client.rewind(original, to_step=1)  # step 3, a tool, ran after it
        new_run = await client.rewind(original, to_step=3, reason="try the answer again", by="ops")
        assert new_run != first_run
        result = await client.result(original)
    assert result.output == "fork answer"  # the model answered step 4 again; the same workflow id
    assert [s.kind for s in result.steps] == ["model", "tool", "model", "tool", "model"]
    assert tools.calls == ["a", "b"]
    assert len(model.seen) == 4


async def test_every_misfit_is_a_clear_error_before_anything_starts(dev, names):
    tools, model = Counted(), RecordingProvider(five_steps())
    agent = Agent(provider=model, tools=tools.tools(), name=f"bad-{names}")

    def other_lookup(key: int) -> str:
        """Same name, other parameters."""
        return str(key)

    other_lookup.__name__ = "lookup"
    other = Agent(provider=RecordingProvider([]), tools=[other_lookup], name=f"other-{names}")
    bare = Agent(provider=RecordingProvider([]), tools=[], name=f"bare-{names}")
    tq = f"fork-{names}"
    async with rein.create_worker(dev.client, agents=[agent, other, bare], task_queue=tq):
        client = ReinClient(dev.client, tq)
        original = await _run(client, agent.name)
        cases = [
            (dict(at_step=9), "has no step 9: its steps are 0..4"),
            (dict(at_step=-1), "at_step must be 0 or more"),
            (dict(at_step=3, edits={"tool_results": {"nope": "x"}}), "no tool call 'nope' before step 3; tool calls there: c-a, c-b"),
            (dict(at_step=3, edits={"colour": "red"}), "invalid fork edits: colour: Extra inputs are not permitted"),
            (dict(at_step=3, edits={"prompt": ""}), "invalid fork edits: prompt: String should have at least 1 character"),
            (dict(at_step=0, edits={"append_prompt": "more"}), "tool calls are still pending (c-a)"),
            (dict(at_step=3, config={"max_iterations": 0}), "invalid config for the fork: max_iterations"),
            (dict(at_step=3, config={"permission": "allow", "colour": 1}), "invalid config for the fork: colour"),
            (dict(at_step=3, agent=f"bare-{names}"), "tools do not fit: lookup (missing)"),
            (dict(at_step=3, agent=f"other-{names}"), "tools do not fit: lookup (different parameters)"),
            (dict(at_step=3, agent="nobody"), "could not learn agent 'nobody'"),
        ]
        before = [e.id async for e in dev.client.list_workflows(f'ReinForkOf="{original}"')]
        for kwargs, message in cases:
            with pytest.raises(ForkError) as caught:
                await client.fork(original, **kwargs)
            assert message in str(caught.value), (kwargs, str(caught.value))
        with pytest.raises(RunNotFound):
            await client.fork(f"missing-{names}", at_step=0)
        with pytest.raises(ForkError, match="exists already"):
            await client.fork(original, at_step=3, id=original)
        # Fits: the same tools under another agent; a tightened config.
        moved = await client.fork(original, at_step=3, agent=agent.name, config={"max_iterations": 10})
        assert (await client.result(moved)).output == "fork answer"
    assert before == []
    assert tools.calls == ["a", "b"]

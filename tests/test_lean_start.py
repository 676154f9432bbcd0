"""Lean starts (rein.workflows.start): a run learns its agent with its first model call, not a describe
marker first. On a real dev server, with ReinClient and with a plain Temporal client (as ops tooling starts runs).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

import rein
from rein import Agent, LoopConfig
from rein.client import ReinClient
from rein.core.contract import CALL_MODEL, spec_digest
from rein.core.ir import ToolSpec
from tests.support.history import first_call_result, scheduled, summaries
from tests.support.providers import OutageProvider, RecordingProvider, Unavailable
from tests.support.tools import add, tc
from tests.support.waiting import poll, wait_status

BILLED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_MARKER_RECORDED, EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    EventType.EVENT_TYPE_TIMER_STARTED, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
}


def ids() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"lean-start-{suffix}", f"lean-start-wf-{suffix}"


def adding(name: str, **kwargs: Any) -> Agent:
    provider = RecordingProvider([[tc("add", "c1", a=1, b=2)], "3"])
    return Agent(provider=provider, tools=[add], system="You add numbers.", name=name, **kwargs)



def upserts(history: Any) -> list[dict[str, Any]]:
    """rein's upserts and Temporal's own for patches, but the one for the run's recorded start (its first)."""
    import json

    found = [{k: json.loads(v.data) for k, v in
              e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields.items()}
             for e in history.events if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES]
    assert found[:1] == [{"TemporalChangeVersion": ["rein-recorded-start"]}], found
    return found[1:]


def billed(history: Any) -> int:
    """Billable actions: a patch marker and the TemporalChangeVersion upsert the SDK adds to it are none (Temporal
    Cloud exempts versioning; the run's recorded start is one: rein.workflows.window)."""
    return sum(e.event_type in BILLED and not _versioning(e) for e in history.events)


def _versioning(event: Any) -> bool:
    if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
        return event.marker_recorded_event_attributes.marker_name == "core_patch"
    if event.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        return set(fields) == {"TemporalChangeVersion"}
    return False


def markers(history: Any) -> list[str]:
    """The markers but the run's recorded start (a patch marker every run records first: rein.workflows.window)."""
    found = [e.marker_recorded_event_attributes.marker_name for e in history.events
             if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert found[:1] == ["core_patch"], found
    return found[1:]


async def test_a_lean_run_pays_no_describe_marker_and_the_worker_adds_the_system_prompt(dev):
    tq, wf_id = ids()
    lean = adding("lean-adder")
    client = ReinClient(dev.client, tq)
    async with rein.create_worker(dev.client, [lean], task_queue=tq):
        handle = await client.start("lean-adder", "1 + 2?", run_id=wf_id)
        assert (await handle.result()).output == "3"
        session = await client.session(wf_id)
    history = await dev.client.get_workflow_handle(wf_id).fetch_history()
    assert markers(history) == []
    assert billed(history) == 5  # start, two model calls, the tool, the final status: the floor's 4 + 1
    first = await first_call_result(history.events, dev.client.data_converter)
    assert first["agent"]["name"] == "lean-adder" and first["agent"]["version"]
    [tool] = first["agent"]["tools"]  # name and flags, the schema only as a digest
    assert tool == {"spec": {"name": "add"}, "spec_digest": spec_digest(ToolSpec(**lean.registry.get("add").spec().model_dump()))}
    assert first["reply"]["tool_calls"][0]["name"] == "add"
    # The model saw the agent's system prompt first although the run did not know it when it called.
    assert [(m.role, m.content) for m in lean.provider.seen[0]] == [("system", "You add numbers."), ("user", "1 + 2?")]
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]
    # The first call was scheduled before the run knew its agent's model: its summary names the agent.
    assert await summaries(history, dev.client.data_converter, CALL_MODEL) == [
        "model of agent lean-adder · iteration 1", "model RecordingProvider · iteration 2"]


async def test_a_plain_clients_lean_run_publishes_its_status_once_when_short(dev):
    tq, wf_id = ids()
    agent = adding("lean-plain")
    async with rein.create_worker(dev.client, [agent], task_queue=tq):
        handle = await dev.client.start_workflow("AgentWorkflow", {"agent": "lean-plain", "prompt": "1 + 2?"},
                                                 id=wf_id, task_queue=tq)
        assert (await handle.result())["output"] == "3"
    history = await handle.fetch_history()
    [only] = upserts(history)  # no `running` upsert at the start: one, with the final status
    assert (only["ReinAgent"], only["ReinStatus"], only["ReinIterations"]) == ("lean-plain", "done", 2)
    assert billed(history) == 5
    found = f'WorkflowId="{wf_id}" AND ReinStatus="done" AND ReinAgent="lean-plain"'
    await poll(lambda: _listed(dev.client, found), "visibility to list the run by its rein search attributes")


async def _listed(client: Any, query: str) -> bool:
    return bool([w async for w in client.list_workflows(query)])


async def test_a_plain_clients_lean_run_that_waits_publishes_who_it_is(dev):
    tq, wf_id = ids()
    agent = adding("lean-asks", config=LoopConfig(permission="ask"))
    async with rein.create_worker(dev.client, [agent], task_queue=tq):
        await dev.client.start_workflow("AgentWorkflow", {"agent": "lean-asks", "prompt": "1 + 2?"}, id=wf_id,
                                        task_queue=tq)
        client = ReinClient(dev.client, tq)
        await wait_status(dev.client.get_workflow_handle(wf_id), "waiting_approval")
        waiting = upserts(await dev.client.get_workflow_handle(wf_id).fetch_history())
        # Its first wait asks the rein-inbox and rein-waiting-timer patches (Temporal's own TemporalChangeVersion
        # upserts), then the run publishes who it is with the status.
        assert [(u["ReinAgent"], u["ReinStatus"]) for u in waiting if "ReinStatus" in u] == [("lean-asks", "waiting_approval")]
        assert [sorted(u["TemporalChangeVersion"]) for u in waiting if "ReinStatus" not in u] == [
            ["rein-inbox", "rein-recorded-start"], ["rein-inbox", "rein-recorded-start", "rein-waiting-timer"]]
        await client.approve(wf_id, wait=True)
        assert (await client.result(wf_id)).output == "3"


@pytest.mark.parametrize(("start", "kind", "reason"), [
    ({"config": {"max_iterations": "many"}}, "InvalidInput", "Invalid config override: "),
    ({"config": {"permission": "allow"}}, "InvalidInput", "Invalid config override: a client may tighten but not loosen"),
    ({"model": "openai/gpt-4o"}, "InvalidInput", "Invalid model override: agent 'lean-strict' does not let"),
    ({"agent": "nobody-serves-this"}, "UnknownAgent", "Unknown agent 'nobody-serves-this'"),
])
async def test_a_lean_runs_bad_input_fails_the_run_before_any_model_call(dev, start, kind, reason):
    tq, wf_id = ids()
    agent = adding("lean-strict", config=LoopConfig(permission="ask"))
    async with rein.create_worker(dev.client, [agent], task_queue=tq):
        handle = await dev.client.start_workflow(
            "AgentWorkflow", {"agent": "lean-strict", "prompt": "1 + 2?", **start}, id=wf_id, task_queue=tq)
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == kind and cause.message.startswith(reason), cause
    assert agent.provider.seen == []
    history = await handle.fetch_history()
    assert markers(history) == []  # the refusal carried what publishing the failed status needs
    assert [u["ReinStatus"] for u in upserts(history)] == ["failed"]


async def test_an_agent_with_middleware_takes_its_first_step_itself(dev):
    """A new conversation starts lean whatever the agent (the run cannot know it yet): the worker that takes
    the first call describes the agent only, recorded as that call's result, and the step runs the hooks."""
    tq, wf_id = ids()
    agent = adding("lean-middleware")
    seen: list[str] = []

    @agent.before_model
    async def note(ctx):  # noqa: ANN001, ANN202
        seen.append(f"before model {ctx.session.iteration}")

    async with rein.create_worker(dev.client, [agent], task_queue=tq):
        assert (await (await ReinClient(dev.client, tq).start("lean-middleware", "1 + 2?", run_id=wf_id)).result()).output == "3"
    history = await dev.client.get_workflow_handle(wf_id).fetch_history()
    assert seen == ["before model 0", "before model 1"] and len(agent.provider.seen) == 2
    first = await first_call_result(history.events, dev.client.data_converter)
    assert "reply" not in first and first["agent"]["middleware"] is True  # described only: the step ran hooks
    assert markers(history) == []


async def test_an_agent_with_options_of_its_own_leaves_the_first_call_to_the_run(dev):
    """The first call is scheduled with LoopConfig's defaults (the run knows only its input); the agent says
    another model timeout: the worker that takes the call describes the agent only, and the run calls with
    the agent's options."""
    tq, wf_id = ids()
    agent = adding("lean-own-options", config=LoopConfig(model_timeout_s=120))
    async with rein.create_worker(dev.client, [agent], task_queue=tq):
        assert (await (await ReinClient(dev.client, tq).start("lean-own-options", "1 + 2?", run_id=wf_id)).result()).output == "3"
    history = await dev.client.get_workflow_handle(wf_id).fetch_history()
    calls = scheduled(history.events, CALL_MODEL)
    timeouts = [c.activity_task_scheduled_event_attributes.start_to_close_timeout.seconds for c in calls]
    assert timeouts == [LoopConfig().model_timeout_s, 120, 120]
    assert "reply" not in await first_call_result(history.events, dev.client.data_converter)
    assert len(agent.provider.seen) == 2
    assert markers(history) == []


async def test_a_first_call_that_fails_waits_for_retry(dev):
    tq, wf_id = ids()
    provider = OutageProvider(Unavailable, "the vendor is down")
    agent = Agent(provider=provider, name="lean-outage")  # LoopConfig's default options: the first call is the run's
    client = ReinClient(dev.client, tq)
    async with rein.create_worker(dev.client, [agent], task_queue=tq):
        await client.start("lean-outage", "hello", run_id=wf_id)
        view = await wait_status(dev.client.get_workflow_handle(wf_id), "waiting_retry")
        assert view["interrupt"]["type"] == "error" and "the vendor is down" in view["interrupt"]["message"]
        provider.failing = False
        await client.retry(wf_id, wait=True)
        assert (await client.result(wf_id)).output == "recovered"
    # Only this path learns the agent the old way: the call failed, so no reply recorded it (the wait's patches first).
    assert markers(await dev.client.get_workflow_handle(wf_id).fetch_history()) == [
        "core_patch", "core_patch", "core_local_activity"]


async def test_a_first_replys_tool_call_runs_on_a_worker_that_never_saw_it(dev):
    """The call travels whole (a worker of an older build could not find it in a first call's result by
    reference), so a new worker with an empty cache runs it."""
    tq, wf_id = ids()
    first = adding("lean-handover", config=LoopConfig(permission="ask"))
    second = Agent(provider=RecordingProvider(["3"]), tools=[add], system="You add numbers.", name="lean-handover",
                   config=LoopConfig(permission="ask"))  # the same definition; its model answers the rest
    client = ReinClient(dev.client, tq)
    async with rein.create_worker(dev.client, [first], task_queue=tq):
        await client.start("lean-handover", "1 + 2?", run_id=wf_id)
        await wait_status(dev.client.get_workflow_handle(wf_id), "waiting_approval")
    async with rein.create_worker(dev.client, [second], task_queue=tq):
        await client.approve(wf_id, wait=True)
        assert (await client.result(wf_id)).output == "3"
        session = await client.session(wf_id)
    assert [m.content for m in session.messages if m.role == "tool"] == ["3"]  # add(1, 2) ran
    history = await dev.client.get_workflow_handle(wf_id).fetch_history()
    tools = scheduled(history.events, "rein.run_tool")
    [tool] = tools
    sent = await dev.client.data_converter.decode(tool.activity_task_scheduled_event_attributes.input.payloads)
    assert sent[0]["call"]["name"] == "add" and "ref" not in sent[0] and sent[0]["version"]
    assert first.provider.seen and len(second.provider.seen) == 1

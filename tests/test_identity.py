"""Agent identity across deploys: a run's fingerprint (ReinAgentVersion), a worker whose definition of
the agent differs (never silent), stricter rules reaching runs in flight, a tool changed under a
waiting approval. A "deploy" here stops the worker serving a waiting run and starts one with the
changed definition on the same task queue of a real dev server.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import WorkflowHandle
from temporalio.common import SearchAttributeKey

import rein
from rein import Agent, LoopConfig, MockProvider, ToolCall
from rein.core.agent_identity import VERSION_CHARS, adopt, changes, fingerprint
from rein.core.contract import AgentDescription, ToolInfo
from rein.core.ir import ToolSpec
from tests.support.history import assert_no_task_failures, first_call_result, history_events, scheduled, summaries
from tests.support.waiting import poll, wait_status

VERSION = SearchAttributeKey.for_keyword("ReinAgentVersion")
ran: list[str] = []
"""Tool calls that really ran, as `name(args)`."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    ran.append(f"add({a},{b})")
    return a + b


def plus(x: int, y: int) -> int:
    """Add two integers (the renamed `add`)."""
    ran.append(f"plus({x},{y})")
    return x + y


def wipe(target: str) -> str:
    """Wipe a target."""
    ran.append(f"wipe({target})")
    return f"wiped {target}"


def call(name: str, cid: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=arguments)


@pytest_asyncio.fixture
async def deploy(dev):  # noqa: ANN001
    """`dev` with a slot for the worker of the deployed build (`started`), stopped when the test ends."""
    dev.deployed = None
    yield dev
    if dev.deployed is not None:
        await dev.deployed.__aexit__(None, None, None)


ASKED_FIRST = {"session": {"messages": []}}
"""A run given a Session (as a fork or a resumed conversation is) asks describe_agent first; a new one starts lean."""
STARTS = pytest.mark.parametrize("start", [ASKED_FIRST, {}], ids=["asked-first", "lean-start"])


async def started(dev: Any, before: Agent, after: Agent, prompt: str, waits_for: str,
                  start: dict[str, Any] | None = None) -> WorkflowHandle:
    """Start a run on a worker serving `before`, let it wait (`waits_for`), then replace that worker
    by one serving `after` on the same task queue (the deploy) and leave it running."""
    tq, wf_id = f"identity-{uuid.uuid4().hex[:8]}", f"identity-{uuid.uuid4().hex[:8]}"
    async with rein.create_worker(dev.client, agents=[before], task_queue=tq):
        handle = await dev.client.start_workflow("AgentWorkflow", {"agent": before.name, "prompt": prompt, **(start or {})},
                                                 id=wf_id, task_queue=tq)
        await wait_status(handle, waits_for)
    dev.deployed = rein.create_worker(dev.client, agents=[after], task_queue=tq)
    await dev.deployed.__aenter__()
    return handle


async def steps_of(handle: WorkflowHandle) -> list[dict]:
    return await handle.query("steps")


# --------------------------------------------------------------------------- the fingerprint (pure)


def description(**changes_: Any) -> AgentDescription:
    fields: dict[str, Any] = {
        "name": "a", "model": "openai/gpt-4o", "system": "Be brief.", "config": LoopConfig(),
        "tools": [ToolInfo(spec=ToolSpec(name="wipe", description="Wipe.", parameters={"type": "object"}))],
    }
    fields.update(changes_)
    return AgentDescription(**fields)


def test_fingerprint_names_the_definition_not_the_worker() -> None:
    base = fingerprint(description())
    assert len(base) == VERSION_CHARS and int(base, 16) >= 0
    assert fingerprint(description(search_attributes=["ReinAgent"], max_payload_bytes=5)) == base
    other = ToolInfo(spec=ToolSpec(name="add", description="Add.", parameters={"type": "object"}))
    assert fingerprint(description(tools=[other, *description().tools])) == \
        fingerprint(description(tools=[*description().tools, other]))
    flagged = [ToolInfo(spec=description().tools[0].spec, requires_approval=True)]
    for different in (description(model="x"), description(system="Be long."), description(tools=flagged),
                      description(config=LoopConfig(permission="ask")), description(tools=[])):
        assert fingerprint(different) != base


def test_adopt_takes_stricter_rules_and_looser_ones_only_on_opt_in() -> None:
    old = description(config=LoopConfig(permission="ask"),
                      tools=[ToolInfo(spec=description().tools[0].spec, requires_approval=True)])
    looser = description()
    _, config, approval = adopt(old, looser, old.config, frozenset({"wipe"}))
    assert (config.permission, approval) == ("ask", frozenset({"wipe"}))  # the run keeps its rules
    _, config, approval = adopt(old, looser.model_copy(update={"in_flight": "current"}), old.config, frozenset({"wipe"}))
    assert (config.permission, approval) == ("allow", frozenset())  # the explicit opt-in
    stricter = description(config=LoopConfig(permission="deny"))
    _, config, _ = adopt(description(), stricter, LoopConfig(), frozenset())
    assert config.permission == "deny"
    said = changes(old, looser)
    assert "permission ask → allow" in said and "tool 'wipe' no longer requires approval" in said


# --------------------------------------------------------------------------- deploys on a dev server


@STARTS
async def test_run_records_its_agent_version(deploy, start) -> None:  # noqa: ANN001
    """In the described agent (a lean start's: its first model call's result), in every later model
    call's input, and in the search attribute."""
    ran.clear()
    agent = Agent(provider=MockProvider([[call("add", "c1", a=1, b=2)], "3"]), tools=[add], name=f"v-{uuid.uuid4().hex[:6]}")
    tq = f"identity-{uuid.uuid4().hex[:8]}"
    async with rein.create_worker(deploy.client, agents=[agent], task_queue=tq):
        handle = await deploy.client.start_workflow("AgentWorkflow", {"agent": agent.name, "prompt": "hi", **start},
                                                    id=f"v-{uuid.uuid4().hex[:8]}", task_queue=tq)
        await handle.result()
        events = await history_events(handle)
    converter = deploy.client.data_converter
    first, second = scheduled(events, "rein.call_model")
    sent = [(await converter.decode(c.activity_task_scheduled_event_attributes.input.payloads))[0] for c in (first, second)]
    if not start:
        version = (await first_call_result(events, converter))["agent"]["version"]
        assert "version" not in sent[0]  # the run knew no agent yet
    else:
        version = sent[0]["version"]
    assert len(version) == VERSION_CHARS
    assert sent[1]["version"] == version
    assert ran == ["add(1,2)"]
    attributes = (await handle.describe()).typed_search_attributes
    assert attributes.get(VERSION) == version


async def test_a_different_model_answering_is_never_silent(deploy) -> None:  # noqa: ANN001
    """The issue's case: a run started with a real model; a worker with an offline model takes it over."""
    name = f"calc-{uuid.uuid4().hex[:6]}"
    real = Agent(model="openai/gpt-4o", provider=MockProvider([[call("add", "c1", a=1, b=2)], "3 (real)"]),
                 tools=[add], config=LoopConfig(permission="ask"), name=name)
    offline = Agent(provider=MockProvider(["3 (offline)"]), tools=[add], config=LoopConfig(permission="ask"), name=name)
    handle = await started(deploy, real, offline, "1+2?", "waiting_approval")
    await handle.signal("approve", {})
    outcome = await handle.result()
    assert outcome["output"] == "3 (offline)"
    steps = await steps_of(handle)
    [changed] = [s for s in steps if s["kind"] == "agent"]
    assert "model openai/gpt-4o → MockProvider" in changed["summary"] and changed["is_error"]
    events = await history_events(handle)
    assert_no_task_failures(events)
    said = await summaries(events, activity="rein.call_model")
    # The first call was scheduled before the run knew its model (a lean start): its summary names the agent.
    assert said[0] == f"model of agent {name} · iteration 1" and said[-1].startswith("model MockProvider")
    version = (await handle.describe()).typed_search_attributes.get(VERSION)
    assert version and changed["summary"].split(" → ", 1)[1].startswith(version)  # the definition it follows now


@STARTS
async def test_tool_that_now_requires_approval_asks_in_flight_runs(deploy, start) -> None:  # noqa: ANN001
    """add needs approval on both builds, wipe only on the new one: approving add must not run wipe.
    A lean run's first reply came from a call that carried no version: its tool calls carry it."""
    ran.clear()
    name = f"ops-{uuid.uuid4().hex[:6]}"
    script = [[call("add", "c1", a=1, b=2), call("wipe", "c2", target="prod")], "done"]
    before = Agent(provider=MockProvider(script), tools=[rein.tool(requires_approval=True)(add), wipe], name=name)
    after = Agent(provider=MockProvider(script[1:]), name=name,
                  tools=[rein.tool(requires_approval=True)(add), rein.tool(requires_approval=True)(wipe)])
    handle = await started(deploy, before, after, "go", "waiting_approval", start)
    await handle.signal("approve", {"tool_call_id": "c1"})
    view = await wait_status(handle, "waiting_approval", until=lambda v: "wipe" in v["interrupt"]["message"])
    assert ran == [] and "add" not in view["interrupt"]["message"]  # add is approved; nothing ran yet
    await handle.signal("approve", {"tool_call_id": "c2", "approver": "ops"})
    assert (await handle.result())["output"] == "done"
    assert sorted(ran) == ["add(1,2)", "wipe(prod)"]
    assert any(s["kind"] == "agent" and "tool 'wipe' now requires approval" in s["summary"] for s in await steps_of(handle))
    assert_no_task_failures(await history_events(handle))


async def test_permission_moved_to_deny_holds_for_in_flight_runs(deploy) -> None:  # noqa: ANN001
    ran.clear()
    name = f"deny-{uuid.uuid4().hex[:6]}"
    script = [[call("add", "c1", a=1, b=2), call("wipe", "c2", target="prod")], "done"]
    before = Agent(provider=MockProvider(script), tools=[rein.tool(requires_approval=True)(add), wipe], name=name)
    after = Agent(provider=MockProvider(script[1:]), tools=[rein.tool(requires_approval=True)(add), wipe], name=name,
                  config=LoopConfig(permission="deny"))
    handle = await started(deploy, before, after, "go", "waiting_approval")
    await handle.signal("approve", {"tool_call_id": "c1"})
    await handle.result()
    assert ran == ["add(1,2)"]  # approved by a person before the change: runs; wipe is refused by policy
    session = await handle.query("session")
    wiped = next(m for m in session["messages"] if m.get("tool_call_id") == "c2")
    assert wiped["content"].startswith("Denied by policy")


@STARTS
async def test_a_renamed_tool_does_not_make_an_approved_call_vanish(deploy, start) -> None:  # noqa: ANN001
    """add becomes plus while a person approves add(1,2): not run, the model is told, its new call is asked again.
    A lean run recorded add by name and digest: the tool that stayed is told apart from the one that went."""
    ran.clear()
    name = f"rename-{uuid.uuid4().hex[:6]}"
    before = Agent(provider=MockProvider([[call("add", "c1", a=1, b=2)]]), tools=[rein.tool(requires_approval=True)(add)],
                   name=name)
    after = Agent(provider=MockProvider([[call("plus", "c2", x=1, y=2)], "3"]),
                  tools=[rein.tool(requires_approval=True)(plus)], name=name)
    handle = await started(deploy, before, after, "1+2?", "waiting_approval", start)
    await handle.signal("approve", {})
    view = await wait_status(handle, "waiting_approval", until=lambda v: "plus" in v["interrupt"]["message"])
    assert ran == [] and view["pending_tool_calls"][0]["name"] == "plus"
    session = await handle.query("session")
    told = next(m for m in session["messages"] if m.get("tool_call_id") == "c1")
    assert "was not run: tool 'add' was removed" in told["content"]
    steps = await steps_of(handle)
    assert any(s["kind"] == "agent" and "tool 'add' removed" in s["summary"] for s in steps)
    await handle.signal("approve", {})
    assert (await handle.result())["output"] == "3" and ran == ["plus(1,2)"]


def add_three(a: int, b: int, c: int) -> int:
    """Add three integers."""
    ran.append(f"add({a},{b},{c})")
    return a + b + c


@STARTS
async def test_a_retyped_tool_does_not_run_the_call_made_for_its_old_parameters(deploy, start) -> None:  # noqa: ANN001
    """add takes a third parameter on the new build while add(1,2) waits for approval: not run, the model is
    told. A lean run recorded add's spec by digest only, which still tells the change."""
    ran.clear()
    name = f"retype-{uuid.uuid4().hex[:6]}"
    before = Agent(provider=MockProvider([[call("add", "c1", a=1, b=2)]]), tools=[rein.tool(requires_approval=True)(add)],
                   name=name)
    after = Agent(provider=MockProvider(["I will ask again."]), name=name,
                  tools=[rein.tool(name="add", requires_approval=True)(add_three)])
    handle = await started(deploy, before, after, "1+2?", "waiting_approval", start)
    await handle.signal("approve", {})
    assert (await handle.result())["output"] == "I will ask again." and ran == []
    session = await handle.query("session")
    told = next(m for m in session["messages"] if m.get("tool_call_id") == "c1")
    assert "was not run: tool 'add' changed its parameters" in told["content"]


# --------------------------------------------------------------------------- real worker processes


async def test_offline_worker_taking_over_a_real_model_run_says_so(dev, tmp_path) -> None:  # noqa: ANN001
    """The issue's case with real `worker.py` processes: the run starts on a worker whose calculator uses
    openai/gpt-4o (LiteLLM over HTTP to a scripted vendor); that worker goes, an offline one takes over."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from vendor_server import Reply, VendorServer

    from tests.support.processes import WorkerProcess

    address = dev.client.service_client.config.target_host
    tq = f"identity-proc-{uuid.uuid4().hex[:8]}"
    with VendorServer() as vendor:
        vendor.script([Reply(tool_calls=[("call-add", "add", {"a": 12, "b": 30})])])
        real = WorkerProcess(address, ["rein.examples.calculator:agent"], tq, tmp_path / "real.log",
                             REIN_MODEL="openai/gpt-4o", OPENAI_API_BASE=vendor.base_url + "/v1",
                             OPENAI_BASE_URL=vendor.base_url + "/v1", OPENAI_API_KEY="sk-test").start()
        try:
            handle = await dev.client.start_workflow("AgentWorkflow", {"agent": "calculator", "prompt": "12 + 30?"},
                                                     id=f"calc-{uuid.uuid4().hex[:8]}", task_queue=tq)
            await wait_status(handle, "waiting_approval", timeout=60)
        finally:
            real.stop()
        assert len(vendor.requests) == 1
    offline = WorkerProcess(address, ["rein.examples.calculator:agent"], tq, tmp_path / "offline.log").start()
    try:
        await handle.signal("approve", {})
        outcome = await handle.result()
        steps = await steps_of(handle)
        events = await history_events(handle)
    finally:
        offline.stop()
    assert outcome["output"] == "The answer is 42."
    [changed] = [s for s in steps if s["kind"] == "agent"]
    assert "model openai/gpt-4o → ScriptedCalculatorModel" in changed["summary"]
    said = await summaries(events, activity="rein.call_model")
    assert said[0] == "model of agent calculator · iteration 1"  # a lean start's first call: before the model is known
    assert said[-1].startswith("model ScriptedCalculatorModel")
    assert_no_task_failures(events)


async def test_a_continuation_described_differently_says_so_and_keeps_stricter_rules(deploy) -> None:  # noqa: ANN001
    """A waiting run continues as new (signals piled up) on a worker whose agent allows everything."""
    ran.clear()
    name = f"can-{uuid.uuid4().hex[:6]}"
    strict = Agent(provider=MockProvider([[call("add", "c1", a=1, b=2)]]), tools=[add], name=name,
                   config=LoopConfig(permission="ask"))
    loose = Agent(provider=MockProvider([[call("add", "c2", a=3, b=4)], "7"]), tools=[add], name=name)
    tq, wf_id = f"identity-{uuid.uuid4().hex[:8]}", f"identity-{uuid.uuid4().hex[:8]}"
    async with rein.create_worker(deploy.client, agents=[strict], task_queue=tq):
        handle = await deploy.client.start_workflow(
            "AgentWorkflow", {"agent": name, "prompt": "sums", "continue_as_new_after": 20}, id=wf_id, task_queue=tq)
        await wait_status(handle, "waiting_approval")
        first_run = (await handle.describe()).run_id
    deploy.deployed = rein.create_worker(deploy.client, agents=[loose], task_queue=tq)
    await deploy.deployed.__aenter__()
    for _ in range(20):  # misfits: recorded and ignored, but they pile up the history
        await handle.signal("approve", {"tool_call_id": "nope"})
    latest = deploy.client.get_workflow_handle(wf_id)
    await poll(lambda: _continued(latest, first_run), "the run to continue as new", 30)

    async def noted() -> bool:
        return any(s["kind"] == "agent" and "across continue-as-new" in s["summary"] for s in await steps_of(latest))

    await poll(noted, "the successor to record the agent change", 30)
    await latest.signal("approve", {})
    view = await wait_status(latest, "waiting_approval", until=lambda v: v["pending_tool_calls"][0]["id"] == "c2")
    assert ran == ["add(1,2)"] and view["interrupt"]["type"] == "need_approval"  # still asks: the looser rule waits
    await latest.signal("approve", {})
    assert (await latest.result())["output"] == "7"


async def _continued(handle: WorkflowHandle, first_run: str) -> bool:
    return (await handle.describe()).run_id != first_run


def test_stored_history_of_an_agent_change_replays() -> None:
    """tests/histories/agent_changed_v2.json (make_histories.py changed): the refused call, the agent step
    and the repeated call are part of the command sequence later builds must replay."""
    import json
    from pathlib import Path

    import rein.testing

    path = Path(__file__).parent / "histories" / "agent_changed_v2.json"
    events = json.loads(path.read_text())["events"]
    failures = [e["activityTaskFailedEventAttributes"]["failure"] for e in events if "activityTaskFailedEventAttributes" in e]
    assert [f["applicationFailureInfo"]["type"] for f in failures] == ["AgentChanged"]
    assert rein.testing.replay(path).ok


async def test_agent_with_middleware_repeats_a_refused_step_under_the_new_definition(deploy) -> None:  # noqa: ANN001
    """Steps of agents with middleware run whole on the worker: a changed definition refuses the step too."""
    ran.clear()
    name = f"mw-{uuid.uuid4().hex[:6]}"
    seen: list[str] = []

    def build(script: list, requires_approval: bool) -> Agent:
        agent = Agent(provider=MockProvider(script), name=name, config=LoopConfig(permission="ask"),
                      tools=[rein.tool(requires_approval=requires_approval)(add)])

        @agent.middleware
        async def note(ctx, call_next):  # noqa: ANN001, ANN202
            seen.append(f"{'new' if requires_approval else 'old'}:{ctx.stage.value}")
            return await call_next(ctx)

        return agent

    before = build([[call("add", "c1", a=1, b=2)]], requires_approval=False)
    after = build(["3"], requires_approval=True)
    handle = await started(deploy, before, after, "1+2?", "waiting_approval")
    await handle.signal("approve", {})
    assert (await handle.result())["output"] == "3"
    assert ran == ["add(1,2)"]
    steps = await steps_of(handle)
    assert any(s["kind"] == "agent" and "tool 'add' now requires approval" in s["summary"] for s in steps)
    assert any(s.startswith("new:") for s in seen) and seen[-1].startswith("new:")
    assert_no_task_failures(await history_events(handle))

"""A decision is bound to what was shown: the batch it was made for, the wait it answers, the calls it names.

Call ids repeat across turns (LiteLLM falls back to `call_0`, `call_1`... in every turn): an approval of
`wipe(target="alpha")` must never run `wipe(target="prod")` that a later turn asks with the same id. Every wait has
an id (status, interrupt, memo, stream); a decision naming a wait or calls the run no longer waits on is refused in
one line naming what it waits on now (a signal: recorded and ignored). Who decided is the person the CLI runs for
(REIN_IDENTITY), never a process; a `rule` or `via` field a raw Temporal client sends decides nothing and is not
recorded. Real parts: the in-process engine, a dev server, the `rein` console script, a raw temporalio Client.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError

import rein
from rein import Agent, Completion, LoopConfig, Message, MockProvider, ToolCall, Usage, settings
from rein.cli import EXIT_REJECTED
from rein.client import DecisionRejected, ReinClient
from rein.core.contract import APPROVE_UPDATE, DENY_UPDATE
from tests.support.history import assert_no_task_failures
from tests.support.in_process import rein_async
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
SUFFIX = uuid.uuid4().hex[:6]
QUEUE = f"bound-{SUFFIX}"
WIPE, GUARDED, CHAT = f"wipe-{SUFFIX}", f"guarded-{SUFFIX}", f"chat-{SUFFIX}"
ME = "carol@ops.example"
"""Who this test's processes decide as (REIN_IDENTITY)."""

wiped: list[str] = []
"""Targets the `wipe` tool really ran for (this process's worker)."""


def wipe(target: str) -> str:
    """Wipe a target.

    Args:
        target: What to wipe.
    """
    wiped.append(target)
    return f"wiped {target}"


class RepeatsCallIds:
    """Stateless, as a vendor behind LiteLLM: every batch is `call_0`. A run's prompt lists targets (`alpha prod`):
    one wipe per model turn, each `call_0`; then `done`. A thread's turn wipes its message's one target."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        usage = Usage(input_tokens=3, output_tokens=2)
        last = messages[-1]
        prompt = next(m.content for m in reversed(messages) if m.role == "user") or ""
        done = [m for m in messages[messages.index(next(m for m in reversed(messages) if m.role == "user")):]
                if m.role == "tool"]
        targets = prompt.split()
        if last.role == "tool" and len(done) >= len(targets):
            return Completion(message=Message(role="assistant", content=f"done: {last.content}"), finish_reason="stop",
                              usage=usage)
        call = ToolCall(id="call_0", name="wipe", arguments={"target": targets[len(done)]})
        return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls", usage=usage)


def agents() -> list[Agent]:
    return [Agent(provider=RepeatsCallIds(), tools=[wipe], config=LoopConfig(permission="ask"), name=WIPE),
            Agent(provider=RepeatsCallIds(), tools=[wipe], config=LoopConfig(permission="ask", approvers=["alice"]),
                  name=GUARDED),
            Agent(provider=RepeatsCallIds(), tools=[wipe], config=LoopConfig(permission="ask"), name=CHAT)]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def runs(dev) -> AsyncIterator[ReinClient]:  # noqa: ANN001
    saved = os.environ.get("REIN_IDENTITY")
    os.environ["REIN_IDENTITY"] = ME
    try:
        async with rein.create_worker(dev.client, agents=agents(), task_queue=QUEUE):
            yield ReinClient(dev.client, QUEUE)
    finally:
        os.environ.pop("REIN_IDENTITY") if saved is None else os.environ.__setitem__("REIN_IDENTITY", saved)


async def waiting(runs: ReinClient, run_id: str, after: str | None = None) -> Any:
    """The run's status once it waits for approval in a wait other than `after`."""
    async def reached() -> Any:
        view = await runs.status(run_id)
        return view if view.status == "waiting_approval" and view.wait not in (None, after) else None

    return await poll(reached, f"{run_id} waiting for approval (not in wait {after})", 30, interval=0.1)


def tool_texts(result: rein.RunResult) -> list[str]:
    return [m.content or "" for m in result.session.messages if m.role == "tool"]


# ---------------------------------------------------------------- the in-process engine


def test_an_approval_never_runs_a_later_call_that_repeats_its_id_in_process() -> None:
    ran: list[str] = []
    script = [[ToolCall(id="call_0", name="wipe", arguments={"target": "alpha"})],
              [ToolCall(id="call_0", name="wipe", arguments={"target": "prod"})], "done"]
    agent = Agent(provider=MockProvider(script), config=LoopConfig(permission="ask"), engine="local", name="w")

    @agent.tool
    def wipe(target: str) -> str:
        """Wipe a target."""
        ran.append(target)
        return f"wiped {target}"

    first = agent.run("wipe alpha, then prod")
    assert first.status == "interrupted" and first.interrupt.tool_call.arguments == {"target": "alpha"}
    with settings.override(identity=ME):
        second = agent.resume(first.session, approve=True)
    assert ran == ["alpha"]  # before the fix: ["alpha", "prod"], nobody asked about prod
    assert second.status == "interrupted" and second.interrupt.tool_call.arguments == {"target": "prod"}
    third = agent.resume(second.session, approve=False, approver="dave@ops.example")
    assert ran == ["alpha"] and third.output == "done"
    # Who decided: the person the script runs for (REIN_IDENTITY), or the approver the caller names.
    assert [(d.tool_call_id, d.approved, d.batch, d.approver) for d in third.session.decisions] == [
        ("call_0", True, 1, ME), ("call_0", False, 2, "dave@ops.example")]


# ---------------------------------------------------------------- durable runs


async def test_a_stale_decision_is_refused_naming_what_the_run_waits_on_now(runs: ReinClient) -> None:
    handle = await runs.start(WIPE, "alpha prod")
    first = await waiting(runs, handle.id)
    assert first.waiting_on == ["call_0"] and first.interrupt is not None and first.interrupt.wait == first.wait
    assert (await runs.wait(handle.id)).interrupt.wait == first.wait  # the interrupt the run returns (RunOutcome)
    chunks = [c async for c in runs.stream(handle.id, until_pause=True)]
    assert chunks[-1].type == "interrupt" and chunks[-1].data["wait"] == first.wait  # what a stream reader binds to
    [item] = await poll(lambda: _listed(runs, handle.id), f"{handle.id} in the inbox", 30)
    assert item.wait == first.wait and item.calls[0].id == "call_0"

    decided = await runs.approve(handle.id)  # names nothing: the client names what the run waits on as read now
    assert decided == ["call_0"] and decided.wait == first.wait
    assert decided.lines() == ['wipe(target="alpha") [call_0]']
    second = await waiting(runs, handle.id, after=first.wait)
    assert wiped.count("alpha") == 1 and "prod" not in wiped  # the approval of alpha did not run prod's call_0
    assert second.pending_tool_calls[0].arguments == {"target": "prod"} and second.waiting_on == ["call_0"]

    now = f'wait {second.wait} for approval of wipe(target="prod") [call_0]'
    with pytest.raises(DecisionRejected) as stale:  # the card a person still sees: alpha's wait
        await runs.approve(handle.id, wait=first.wait, tool_call_ids=["call_0"])
    assert str(stale.value) == (f"approve rejected by run {handle.id}: stale: wait {first.wait} is over; "
                                f"the run now waits on {now}")
    with pytest.raises(DecisionRejected) as unknown:
        await runs.deny(handle.id, tool_call_ids=["call_9"])
    assert str(unknown.value) == (f"deny rejected by run {handle.id}: no pending tool call with id 'call_9'; "
                                  f"the run now waits on {now}")
    with pytest.raises(DecisionRejected) as answer:
        await runs.answer(handle.id, "prod is fine", wait="0-feedbeef")
    assert str(answer.value).endswith(f": stale: wait 0-feedbeef is over; the run now waits on {now}")
    signals = runs.client.get_workflow_handle(handle.id)
    await signals.signal("approve", {"wait": first.wait, "tool_call_ids": ["call_0"], "approver": "bob"})
    await signals.signal("approve", {"tool_call_ids": "call_0"})  # not a list: malformed, ignored
    await signals.signal("rein.rules", {"version": "soon"})  # the rules' news, garbled: ignored
    ignored = await poll(lambda: _ignored(runs, handle.id, 3), "the three signals recorded as ignored", 30)
    assert ignored.status == "waiting_approval" and ignored.wait == second.wait and "prod" not in wiped

    denied = await runs.deny(handle.id, wait=second.wait, tool_call_ids=["call_0"], reason="never prod")
    assert denied == ["call_0"] and denied.wait == second.wait  # named whole: sent as it is, nothing read first
    result = await runs.result(handle.id)
    assert result.output == "done: " + tool_texts(result)[-1] and "prod" not in wiped
    assert tool_texts(result)[-1] == (f"Denied by {ME}: the call to 'wipe' was not run. Reason: never prod "
                                      "Continue without it or try another approach.")
    assert [(d.tool_call_id, d.approved, d.approver, d.batch) for d in result.session.decisions] == [
        ("call_0", True, ME, 1), ("call_0", False, ME, 2)]
    history = await handle.fetch_history()
    assert_no_task_failures(history)  # bad input and stale decisions failed no workflow task
    assert "rein-bound-decisions" in _patches(history)


async def test_each_wait_of_a_thread_has_its_own_id_and_an_earlier_one_decides_nothing(runs: ReinClient) -> None:
    thread = f"chat-{uuid.uuid4().hex[:8]}"
    await runs.send(thread, "alpha2", agent=CHAT)
    first = await waiting(runs, thread)
    await runs.approve(thread, wait=first.wait, tool_call_ids=first.waiting_on)
    await poll(lambda: _turn_ended(runs, thread, 1), "the first turn to end", 30)
    await runs.send(thread, "prod2", agent=CHAT)
    second = await waiting(runs, thread, after=first.wait)
    assert second.waiting_on == ["call_0"] and second.pending_tool_calls[0].arguments == {"target": "prod2"}
    with pytest.raises(DecisionRejected) as stale:
        await runs.approve(thread, wait=first.wait, tool_call_ids=["call_0"])
    assert f"stale: wait {first.wait} is over" in str(stale.value)
    assert "prod2" not in wiped
    await runs.deny(thread, wait=second.wait)
    await poll(lambda: _turn_ended(runs, thread, 2), "the second turn to end", 30)
    assert "prod2" not in wiped
    await runs.cancel(thread)


async def test_the_cli_shows_and_records_exactly_the_calls_it_decided(runs: ReinClient, dev) -> None:  # noqa: ANN001
    """The approval through the console script, the denials in this process (rein.cli.main): both decide as
    REIN_IDENTITY, and the history records that person for each."""
    address = dev.client.service_client.config.target_host
    handle = await runs.start(WIPE, "alpha3 prod3")
    first = await waiting(runs, handle.id)
    code, out, err = await rein_cli(address, "approve", handle.id)
    assert (code, err) == (0, "") and out.strip() == (
        f'approved wipe(target="alpha3") [call_0] in run {handle.id} (wait {first.wait})')
    second = await waiting(runs, handle.id, after=first.wait)
    code, out, err = await rein_here(address, "deny", handle.id, "--call", "call_0", "--wait-id", first.wait,
                                     "--reason", "stale card")
    assert code == EXIT_REJECTED and out == "" and "Traceback" not in err
    [line] = err.splitlines()
    assert line == (f"rein: deny rejected by run {handle.id}: stale: wait {first.wait} is over; the run now waits on "
                    f'wait {second.wait} for approval of wipe(target="prod3") [call_0]')
    code, out, err = await rein_here(address, "deny", handle.id, "--call", "call_0", "--reason", "no")
    assert code == 0 and out.strip() == f'denied wipe(target="prod3") [call_0] in run {handle.id} (wait {second.wait})'
    session = (await runs.result(handle.id)).session
    assert [(d.tool_call_id, d.approved, d.approver, d.reason) for d in session.decisions] == [
        ("call_0", True, ME, ""), ("call_0", False, ME, "no")]  # the person the CLI runs for, never a process id
    accepted = [e.workflow_execution_update_accepted_event_attributes.accepted_request.meta.identity
                for e in (await handle.fetch_history()).events
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
    assert accepted == [ME, ME]  # the CLI's Temporal client says who it is: the same person, not a process id
    explained = await runs.policy.explain(handle.id)
    assert [(r.call_id, r.args, r.decision, r.by, r.reason) for r in explained] == [
        ("call_0", 'target="alpha3"', "approved", ME, ""), ("call_0", 'target="prod3"', "denied", ME, "no")]


async def test_rule_and_via_from_a_raw_temporal_client_decide_nothing_and_are_not_recorded(
        runs: ReinClient, dev) -> None:  # noqa: ANN001
    raw = Client(**{**dev.client.config(), "plugins": []})  # a namespace user with stock temporalio, JSON payloads
    guarded = await runs.start(GUARDED, "gamma")
    await waiting(runs, guarded.id)
    handle = raw.get_workflow_handle(guarded.id)
    forged = {"approver": "mallory", "rule": "r1", "via": "rule r1", "reason": "policy says so"}
    for update in (APPROVE_UPDATE, DENY_UPDATE):  # the agent's approvers apply to denials too
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(update, forged)
        assert refused.value.cause.message == "approver 'mallory' is not among this run's approvers"
    await handle.signal("approve", forged)
    await handle.signal("deny", forged)
    await poll(lambda: _ignored(runs, guarded.id, 2), "the forged signals recorded as ignored", 30)
    assert (await runs.status(guarded.id)).status == "waiting_approval" and "gamma" not in wiped
    assert await handle.execute_update(APPROVE_UPDATE, {"approver": "alice", "rule": "r7", "via": "rule r7"}) == ["call_0"]
    assert (await runs.result(guarded.id)).status == "done"

    plain = await runs.start(WIPE, "beta")
    await waiting(runs, plain.id)
    await raw.get_workflow_handle(plain.id).signal("deny", {"approver": "bob", "rule": "r3", "via": "rule r3",
                                                            "reason": "no beta"})
    result = await runs.result(plain.id)
    assert "beta" not in wiped and tool_texts(result)[-1].startswith("Denied by bob: ")
    for run_id, who in ((guarded.id, "alice"), (plain.id, "bob")):
        session = (await runs.result(run_id)).session
        assert [(d.approver, d.via) for d in session.decisions] == [(who, "")]  # not "decided by a rule"
        [row] = await runs.policy.explain(run_id)
        assert row.by == who and "rule" not in row.by
        assert "rein-client-provenance" in _patches(await runs.handle(run_id).fetch_history())


async def test_a_script_connects_as_the_person_and_its_worker_stays_a_process(runs: ReinClient, dev) -> None:  # noqa: ANN001
    from rein.client import connect

    client = await connect(dev.client.service_client.config.target_host)
    assert client.identity == ME  # REIN_IDENTITY: who the script decides as, and what the server is told
    worker = rein.create_worker(client, agents=agents()[:1], task_queue=f"{QUEUE}-script")
    assert worker.config(active_config=True)["identity"] == f"{os.getpid()}@{socket.gethostname()}"  # one process among the workers


# ---------------------------------------------------------------- helpers


async def rein_cli(address: str, *argv: str) -> tuple[int, str, str]:
    """The `rein` console script as a person runs it, deciding as REIN_IDENTITY."""
    env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")}
    env.update(REIN_TASK_QUEUE=QUEUE, REIN_IDENTITY=ME, COLUMNS="300")
    process = await asyncio.create_subprocess_exec(
        REIN_BIN, *argv, "--address", address, cwd=str(ROOT), env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


async def rein_here(address: str, *argv: str) -> tuple[int, str, str]:
    """The same command in this process (rein.cli.main), with the same environment."""
    proc = await rein_async(*argv, "--address", address, REIN_TASK_QUEUE=QUEUE, REIN_IDENTITY=ME, COLUMNS="300")
    return proc.returncode, proc.stdout, proc.stderr


async def _listed(runs: ReinClient, run_id: str) -> list[Any]:
    return [i for i in await runs.inbox(agent=WIPE) if i.run_id == run_id and i.since]


async def _ignored(runs: ReinClient, run_id: str, count: int) -> Any:
    view = await runs.status(run_id)
    return view if view.ignored_signals >= count else None


async def _turn_ended(runs: ReinClient, thread: str, turn: int) -> bool:
    view = await runs.thread(thread)
    return view.turns >= turn and not view.open


def _patches(history: Any) -> set[str]:
    found = set()
    for event in history.events:
        marker = event.marker_recorded_event_attributes
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and marker.marker_name == "core_patch":
            found |= {json.loads(p.data)["id"] for p in marker.details["patch-data"].payloads}
    return found


# ---------------------------------------------------------------- stored histories (tests/histories/make_histories.py)

HISTORIES = ROOT / "tests" / "histories"


def _stored(name: str) -> dict[str, Any]:
    return json.loads((HISTORIES / name).read_text())


@pytest.mark.parametrize("name", ["agent_decisions_v1.json", "agent_decisions_v2.json"])
async def test_runs_recorded_before_and_after_bound_decisions_replay(name: str, dev) -> None:  # noqa: ANN001
    """v1 (the build before): the approval of the first `call_0` ran the second without asking, and the `via` the
    client sent was recorded; v2: the second waited for its own approval, the `via` ignored. Both replay here, each
    as it was recorded (the patches read the history)."""
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from rein.temporal import ReinPlugin
    from rein.temporal.history import replay_history

    data = _stored(name)
    history = WorkflowHistory.from_json("agent-decisions", data)
    replayer = Replayer(workflows=[], plugins=[ReinPlugin(agents=[])])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
    signals = [e for e in data["events"] if "workflowExecutionSignaledEventAttributes" in e]
    bound = "rein-bound-decisions" in _patches(history)
    assert (len(signals), bound, "rein-client-provenance" in _patches(history)) == (
        (1, False, False) if name.endswith("v1.json") else (2, True, True))
    replayed = await replay_history(dev.client, "agent-decisions", history)
    session = rein.Session.model_validate(replayed.query("session"))  # what `rein show` reads of the run
    assert [(d.via, d.batch) for d in session.decisions] == ([("inbox", 2)] if not bound else [("", 1), ("", 2)])

"""Record the workflow histories that the replay tests run (tests/test_workflow.py).

Run it once per deliberate change of AgentWorkflow's command sequence, and commit
the JSON it writes; the tests only read it:

    .venv/bin/python tests/histories/make_histories.py

agent_approval_v<N>.json: a tool call that needs approval (approved, then executed),
then an `ask_human` question answered by a person, then the final answer. Older
versions stay: each records the command sequence of an earlier AgentWorkflow, which
the current code must still replay (via workflow.patched).
  v1: before the rein-throttled-counters patch
  v2: with it
  v3: with the rein-prompt-cancel patch
  v4: with the rein-native-cancel patch
  v5: both patches retired (deprecate_patch only while replaying: new runs record no markers for
      rein-throttled-counters and rein-prompt-cancel), slim result, model calls that refer to
      worker-produced messages; v1 no longer replays
  v6: rein-native-cancel retired too (no patch marker, no TemporalChangeVersion upsert in new
      runs), compact activity results and model-call inputs, AgentWorkflow's body in
      rein.workflows.loop
  v7: each wait for a person on a timer whose summary says what it waits for, since when, and the
      commands (AgentDescription.waiting_timer, recorded with the describe result: no patch marker)
  v8: a lean start (rein.workflows.start), by a plain client: no describe marker, the agent recorded
      with the first model call's result, the start a workflow logic flag (no event); ReinStatus
      first published when the run waits
  v9: one way to version: a new conversation always starts lean (no logic flag), the waiting timer
      behind the rein-waiting-timer patch (a marker at the first wait), the describe-result flags retired;
      v1-v7 (described first) and v8 (a logic flag) drain on their own builds (docs/deploys.md)
  v10: the inbox (patch rein-inbox, a marker at the first wait): before the approval wait the rules are asked
      (activity rein.policy_check), each wait shows in the memo (rein.waiting, removed when it ends)
  v11: the run records how it started (patch rein-recorded-start, a marker in its first task), read back on
      replay instead of the build id (rein.workflows.window)

agent_extensions_v<N>.json: an agent with middleware, hooks, an event handler and
compaction (steps run whole on the worker, rein.compact), with one approval.
  v1: the first durable middleware and compaction
  v2: asked first, recorded as the rein-described-first patch

    .venv/bin/python tests/histories/make_histories.py extensions   # only that one

agent_cancel_v<N>.json: the approval agent waits for approval and the workflow is cancelled
the Temporal way (`handle.cancel()`, the UI, `temporal workflow cancel`).
  v1: before the rein-native-cancel patch (the workflow ended CANCELED)
  v2: with it (the run ends with stop_reason `cancelled` and completes with its result)
  v3: the patch retired: the same behaviour, no marker; v1 no longer replays
  v4: AgentDescription.close_canceled: the run ends as cancelled and closes CANCELED (no marker)
  v5: the flag retired: every cancelled run closes CANCELED
agent_cancel_signal_v<N>.json: the same run cancelled by the `cancel` signal.
  v1: with close_canceled: it asks for its own cancellation (local activity rein.close_canceled)
      and closes CANCELED
  v2: the flag retired

    .venv/bin/python tests/histories/make_histories.py cancel

agent_failed_v<N>.json: a run for an agent no worker serves; it fails at once.
  v1: with the rein-failed-status patch (ReinStatus=failed published before it closes)
  v2: started lean (the unknown agent refused by the first model call)

agent_long_v<N>.json: nine tool rounds without approval, then the final answer (counter refreshes
while the status stays `running`, and the end of the run).
  v1: counters refreshed every 5th iteration; at iteration 10 the counters and the final status
      were two upserts in one workflow task
  v2: with the rein-timed-counters patch (a quick run: no refresh within COUNTER_SECONDS of the
      last, so the marker at iteration 5 and one final upsert)
  v3: the same rule taken from AgentDescription.timed_counters: no marker, no TemporalChangeVersion upsert
  v4: the flag retired (the rule is the only one); started lean

    .venv/bin/python tests/histories/make_histories.py long

agent_changed_v<N>.json: the approval of `add` waits while the worker is replaced by one whose agent
has another system prompt; the approved call is refused (AgentChanged), the run records an `agent`
step and runs the call again under the new definition, then answers.
  v1: the first agent identity (rein.core.agent_identity)
  v2: started lean, the waiting timer behind its patch

    .venv/bin/python tests/histories/make_histories.py changed

agent_thread_v<N>.json: a thread (issue 35): three messages, the second queued while the first turn runs,
then the thread is cancelled (closed as CANCELED).
  v1: the first threads

    .venv/bin/python tests/histories/make_histories.py thread

agent_thread_stock_v<N>.json: a thread started with stock tools' update-with-start (no rein.thread memo): it
marks itself at its first turn (patch rein-thread-memo: a marker and a memo upsert), then takes a second message.
  v1: the first stock-started threads

    .venv/bin/python tests/histories/make_histories.py thread_stock

agent_thread_client_tools_v<N>.json: a thread whose message brings a client tool (AG-UI's frontend tools, rein.web.agui):
the model calls it, the turn waits for the client's result (`waiting_input`, patch rein-client-tools: a marker as the
turn opens), `rein.tool_results` brings it, the model answers; then a turn without client tools, and the cancel.
  v1: the first client tools

    .venv/bin/python tests/histories/make_histories.py thread_client_tools

agent_thread_turns_v<N>.json: each sender hears its own turn (issue 53). Turn 1 waits for an approval; a second message
queues turn 2 and a third steers turn 1 while it waits (its `rein.wait` asks the patch rein-turn-wait: a marker, then
it is answered only once turn 1 went on with the message); the approval; turn 2 waits for its own approval, then ends.
  v1: the first exact turn waits

    .venv/bin/python tests/histories/make_histories.py thread_turns

agent_thread_state_v<N>.json: a thread whose tool changes its shared state (the change comes back in the tool's
result, a JSON Patch), then a page's write (`rein.set_state`), a turn whose tool waits for approval and is stopped
(`rein.stop_turn`: the wait settled, patch rein-stop-turn), a last turn, and the cancel (issue 54).
  v1: the first shared state and stops

    .venv/bin/python tests/histories/make_histories.py thread_state

agent_decisions_v<N>.json: the model asks `add` as `call_0` in two turns (LiteLLM's fallback ids); the first wait is
approved by a plain signal that also says `"via": "inbox"`, as rein's inbox sent it.
  v1: recorded by the build before bound decisions (2b64b89): the via recorded as sent, and the approval of the
      first `call_0` carried over to the second (it ran without asking); no marker
  v2: bound decisions: the via ignored (patch rein-client-provenance, asked because the signal carries one), the
      second `call_0` waits for its own approval (patch rein-bound-decisions, asked because its id repeats a
      decided call's), approved by a second signal

policy_v<N>.json: the namespace's ReinPolicy workflow: a rule that allows, one that asks, one removed.
  v1: recorded by the build before rules reached waiting runs (2b64b89): updates and memo upserts only
  v2: the allowing rule told to the waiting runs by the activity rein.rules_changed (patch rein-rules-reach-runs)

    .venv/bin/python tests/histories/make_histories.py decisions policy
    PYTHONPATH=<2b64b89 unpacked by tests.support.old_build>:. python tests/histories/make_histories.py decisions policy --previous
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import rein
from rein import Agent, LoopConfig, Message, MockProvider, ToolCall
from rein.core.compaction import SlidingWindow
from rein.testing import start_local

HERE = Path(__file__).parent
CURRENT = "agent_approval_v11.json"
EXTENSIONS = "agent_extensions_v2.json"
CANCEL = "agent_cancel_v5.json"
CANCEL_SIGNAL = "agent_cancel_signal_v2.json"
FAILED = "agent_failed_v2.json"
LONG = "agent_long_v4.json"
CHANGED = "agent_changed_v2.json"
THREAD = "agent_thread_v1.json"
THREAD_STOCK = "agent_thread_stock_v1.json"
THREAD_CLIENT_TOOLS = "agent_thread_client_tools_v1.json"
THREAD_TURNS = "agent_thread_turns_v1.json"
THREAD_STATE = "agent_thread_state_v1.json"
PREVIOUS = "--previous" in sys.argv
"""Recording with the previous build (its rein first on PYTHONPATH): the v1 names below."""
DECISIONS = "agent_decisions_v1.json" if PREVIOUS else "agent_decisions_v2.json"
POLICY = "policy_v1.json" if PREVIOUS else "policy_v2.json"
LONG_ROUNDS = 9
"""Nine tool rounds and the answer: iteration 10 ends the run, where the old rule refreshed the counters."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def approval_agent() -> Agent:
    return Agent(
        provider=MockProvider(
            [
                [ToolCall(id="call-add", name="add", arguments={"a": 1, "b": 2})],
                [ToolCall(id="call-ask", name="ask_human", arguments={"question": "Round the result?"})],
                "The sum is 3.",
            ]
        ),
        tools=[add, rein.ask_human],
        system="You add numbers.",
        name="history-agent",
        config=LoopConfig(permission="ask"),
    )


def extensions_agent() -> Agent:
    agent = Agent(
        provider=MockProvider(
            [
                [ToolCall(id="call-1", name="add", arguments={"a": 1, "b": 2})],
                [ToolCall(id="call-2", name="add", arguments={"a": 3, "b": 4})],
                "The sums are 3 and 7.",
            ]
        ),
        tools=[add],
        system="You add numbers.",
        name="extensions-agent",
        config=LoopConfig(permission="ask"),
        compaction=SlidingWindow(3),
    )

    @agent.middleware
    async def note(ctx, call_next):  # noqa: ANN001, ANN202
        if ctx.session.messages[-1].role == "user":
            ctx.session.messages.append(Message(role="system", content="Be exact."))
        return await call_next(ctx)

    @agent.after_tool
    async def vet(ctx):  # noqa: ANN001, ANN202
        ctx.session.messages[-1].content += " (vetted)"

    agent.on("step", lambda ctx: None)
    return agent


def long_agent() -> Agent:
    rounds: list = [[ToolCall(id=f"call-{i}", name="add", arguments={"a": i, "b": 1})] for i in range(LONG_ROUNDS)]
    return Agent(provider=MockProvider([*rounds, "Counted."]), tools=[add], name="long-agent")


async def wait_for(handle, status: str) -> None:  # noqa: ANN001
    for _ in range(500):
        if (await handle.query("status"))["status"] == status:
            return
        await asyncio.sleep(0.02)
    raise RuntimeError(f"run never reached {status}")


async def record_approval(env) -> None:  # noqa: ANN001
    """The approval scenario, started lean by a plain client (no describe marker, the description recorded
    with the first model call's result, ReinStatus published first when the run waits)."""
    queue = "histories"
    async with rein.create_worker(env.client, agents=[approval_agent()], task_queue=queue):
        handle = await env.client.start_workflow(
            "AgentWorkflow",
            {"agent": "history-agent", "prompt": "What is 1 + 2?"},
            id="agent-approval",
            task_queue=queue,
        )
        await wait_for(handle, "waiting_approval")
        await handle.signal("approve", {"approver": "alice", "reason": "read-only"})
        await wait_for(handle, "waiting_input")
        await handle.signal("answer", {"text": "No rounding.", "approver": "alice"})
        result = await handle.result()
        assert result["output"] == "The sum is 3.", result
        history = await handle.fetch_history()
    write(CURRENT, history)


async def record_extensions(env) -> None:  # noqa: ANN001
    async with rein.create_worker(env.client, agents=[extensions_agent()], task_queue="histories-ext"):
        handle = await env.client.start_workflow(
            "AgentWorkflow",
            {"agent": "extensions-agent", "prompt": "Add 1 + 2, then 3 + 4."},
            id="agent-extensions",
            task_queue="histories-ext",
        )
        for call_id in ("call-1", "call-2"):
            for _ in range(500):
                status = await handle.query("status")
                if status["status"] == "waiting_approval" and status["pending_tool_calls"][0]["id"] == call_id:
                    break
                await asyncio.sleep(0.02)
            await handle.signal("approve", {"approver": "alice"})
        result = await handle.result()
        assert result["output"] == "The sums are 3 and 7.", result
        history = await handle.fetch_history()
    write(EXTENSIONS, history)


async def record_cancel(env) -> None:  # noqa: ANN001
    from rein.client import ReinClient

    client = ReinClient(env.client, task_queue="histories-cancel")
    for name, run_id in ((CANCEL, "agent-cancel"), (CANCEL_SIGNAL, "agent-cancel-signal")):
        async with rein.create_worker(env.client, agents=[approval_agent()], task_queue="histories-cancel"):
            handle = await env.client.start_workflow(
                "AgentWorkflow",
                {"agent": "history-agent", "prompt": "What is 1 + 2?"},
                id=run_id,
                task_queue="histories-cancel",
            )
            await wait_for(handle, "waiting_approval")
            if name == CANCEL:
                await handle.cancel()
            else:
                await handle.signal("cancel", {"reason": "recorded"})
            result = await client.outcome(client.handle(run_id))
            assert result.stop_reason == "cancelled", result
            history = await handle.fetch_history()
            write(name, history)


async def record_failed(env) -> None:  # noqa: ANN001
    from temporalio.client import WorkflowFailureError

    async with rein.create_worker(env.client, agents=[approval_agent()], task_queue="histories-failed"):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "nobody", "prompt": "hello"}, id="agent-failed", task_queue="histories-failed"
        )
        try:
            await handle.result()
        except WorkflowFailureError:
            pass
        assert (await handle.query("status"))["status"] == "failed"
        history = await handle.fetch_history()
    write(FAILED, history)


async def record_long(env) -> None:  # noqa: ANN001
    async with rein.create_worker(env.client, agents=[long_agent()], task_queue="histories-long"):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "long-agent", "prompt": "Count."}, id="agent-long", task_queue="histories-long"
        )
        result = await handle.result()
        assert result["output"] == "Counted." and result["iterations"] == LONG_ROUNDS + 1, result
        history = await handle.fetch_history()
    write(LONG, history)


def changed_agent(system: str, script: list) -> Agent:
    return Agent(provider=MockProvider(script), tools=[rein.tool(requires_approval=True)(add)], system=system,
                 name="changed-agent")


async def record_changed(env) -> None:  # noqa: ANN001
    before = changed_agent("You add numbers.", [[ToolCall(id="call-add", name="add", arguments={"a": 1, "b": 2})]])
    after = changed_agent("You add numbers exactly.", ["The sum is 3."])
    async with rein.create_worker(env.client, agents=[before], task_queue="histories-changed"):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "changed-agent", "prompt": "What is 1 + 2?"}, id="agent-changed",
            task_queue="histories-changed",
        )
        await wait_for(handle, "waiting_approval")
    async with rein.create_worker(env.client, agents=[after], task_queue="histories-changed"):
        await handle.signal("approve", {"approver": "ops"})
        result = await handle.result()
        assert result["output"] == "The sum is 3.", result
        steps = await handle.query("steps")
        assert [s["kind"] for s in steps] == ["model", "agent", "tool", "model"], steps
        history = await handle.fetch_history()
    write(CHANGED, history)


async def record_thread(env) -> None:  # noqa: ANN001
    from rein.client import ReinClient

    agent = Agent(provider=MockProvider(["Hello.", "Noted.", "Bye."]), name="thread-agent")
    runs = ReinClient(env.client, "histories-thread")
    async with rein.create_worker(env.client, agents=[agent], task_queue="histories-thread"):
        first = await runs.send("agent-thread", "hi", agent="thread-agent", message_id="m1")
        await runs.send("agent-thread", "note this", agent="thread-agent", message_id="m2")
        assert (await runs.reply(first)).output == "Hello."
        assert (await runs.reply(await runs.send("agent-thread", "bye", agent="thread-agent"))).output == "Bye."
        await runs.cancel("agent-thread", wait=True)
        history = await env.client.get_workflow_handle("agent-thread").fetch_history()
    write(THREAD, history)


async def record_thread_stock(env) -> None:  # noqa: ANN001
    from temporalio.client import WithStartWorkflowOperation
    from temporalio.common import WorkflowIDConflictPolicy

    from rein.client import ReinClient
    from rein.core.contract import WORKFLOW_TYPE
    from rein.core.threads import SEND_UPDATE, SendReceipt

    agent = Agent(provider=MockProvider(["Hello.", "Bye."]), name="thread-agent")
    runs = ReinClient(env.client, "histories-thread-stock")
    async with rein.create_worker(env.client, agents=[agent], task_queue="histories-thread-stock"):
        start = WithStartWorkflowOperation(  # as `temporal workflow start-update-with-start` sends it: plain JSON
            WORKFLOW_TYPE, {"agent": "thread-agent", "thread": True}, id="agent-thread-stock",
            task_queue="histories-thread-stock", id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
        first = await env.client.execute_update_with_start_workflow(
            SEND_UPDATE, {"text": "hi"}, start_workflow_operation=start, result_type=SendReceipt)
        assert (await runs.reply(first)).output == "Hello."
        assert (await runs.reply(await runs.send("agent-thread-stock", "bye", agent="thread-agent"))).output == "Bye."
        await runs.cancel("agent-thread-stock", wait=True)
        history = await env.client.get_workflow_handle("agent-thread-stock").fetch_history()
    write(THREAD_STOCK, history)


async def record_thread_client_tools(env) -> None:  # noqa: ANN001
    from rein.client import ReinClient
    from rein.core.ir import ToolSpec

    picked = ToolCall(id="pick-1", name="pick_number", arguments={"question": "which?"})
    agent = Agent(provider=MockProvider([[picked], "You picked 7.", "Bye."]), name="thread-agent")
    runs = ReinClient(env.client, "histories-client-tools")
    tool = ToolSpec(name="pick_number", description="Ask the page for a number.", parameters={"type": "object"})
    async with rein.create_worker(env.client, agents=[agent], task_queue="histories-client-tools"):
        first = await runs.send("agent-thread-tools", "pick one", agent="thread-agent", message_id="m1", tools=[tool])
        waiting = await runs.reply(first)
        assert waiting.interrupt is not None and waiting.interrupt.type == "need_input"
        await runs.tool_results("agent-thread-tools", {"pick-1": "7"}, wait=True)
        assert (await runs.reply(first)).output == "You picked 7."
        assert (await runs.reply(await runs.send("agent-thread-tools", "bye", agent="thread-agent"))).output == "Bye."
        await runs.cancel("agent-thread-tools", wait=True)
        history = await env.client.get_workflow_handle("agent-thread-tools").fetch_history()
    write(THREAD_CLIENT_TOOLS, history)


async def record_thread_turns(env) -> None:  # noqa: ANN001
    from rein.client import ReinClient

    script = [[ToolCall(id="add-1", name="add", arguments={"a": 1, "b": 2})], "Three.",
              [ToolCall(id="add-2", name="add", arguments={"a": 2, "b": 2})], "Four."]
    agent = Agent(provider=MockProvider(script), tools=[add], name="thread-agent", config=LoopConfig(permission="ask"))
    runs = ReinClient(env.client, "histories-thread-turns")
    thread = "agent-thread-turns"
    async with rein.create_worker(env.client, agents=[agent], task_queue="histories-thread-turns"):
        first = await runs.send(thread, "add 1 and 2", agent="thread-agent", message_id="m1")
        assert (await runs.reply(first)).interrupt is not None
        second = await runs.send(thread, "and 2 and 2", agent="thread-agent", message_id="m2")
        steer = await runs.send(thread, "in words", agent="thread-agent", mode="steer", message_id="m3")
        steered = asyncio.ensure_future(runs.reply(steer))
        await runs.approve(thread, wait=True)
        assert (await steered).output == "Three."
        waiting = await runs.reply(second)
        assert (waiting.interrupt is not None, waiting.output) == (True, None)
        await runs.approve(thread, wait=True)
        assert (await runs.reply(second)).output == "Four."
        await runs.cancel(thread, wait=True)
        history = await env.client.get_workflow_handle(thread).fetch_history()
    write(THREAD_TURNS, history)


async def record_thread_state(env) -> None:  # noqa: ANN001
    from rein.client import ReinClient

    def note(item: str, ctx: rein.ToolContext) -> str:
        """Note an item in the thread's state."""
        ctx.state.setdefault("notes", []).append(item)
        return "noted"

    @rein.tool(requires_approval=True)
    def erase() -> str:
        """Erase everything."""
        return "erased"

    script = [[ToolCall(id="note-1", name="note", arguments={"item": "milk"})], "Noted.",
              [ToolCall(id="erase-1", name="erase", arguments={})], "Bye."]
    agent = Agent(provider=MockProvider(script), tools=[note, erase], name="thread-agent")
    runs = ReinClient(env.client, "histories-state")
    thread = "agent-thread-state"
    async with rein.create_worker(env.client, agents=[agent], task_queue="histories-state"):
        assert (await runs.reply(await runs.send(thread, "note milk", agent="thread-agent"))).output == "Noted."
        assert await runs.set_state(thread, {"notes": ["milk", "eggs"]}, version=1) == 2
        waiting = await runs.reply(await runs.send(thread, "erase it", agent="thread-agent"))
        assert waiting.interrupt is not None and waiting.interrupt.type == "need_approval"
        assert await runs.stop_turn(thread, by="a page", wait=True) == 2
        assert (await runs.reply(await runs.send(thread, "bye", agent="thread-agent"))).output == "Bye."
        assert (await runs.state(thread)).value == {"notes": ["milk", "eggs"]}
        await runs.cancel(thread, wait=True)
        history = await env.client.get_workflow_handle(thread).fetch_history()
    write(THREAD_STATE, history)
def repeating_agent() -> Agent:
    script = [[ToolCall(id="call_0", name="add", arguments={"a": 1, "b": 2})],
              [ToolCall(id="call_0", name="add", arguments={"a": 3, "b": 4})], "3 and 7."]
    return Agent(provider=MockProvider(script), tools=[add], name="repeating-agent", config=LoopConfig(permission="ask"))


async def record_decisions(env) -> None:  # noqa: ANN001
    """Repeated call ids across turns, the first approval sent with a `via` (the previous build: carried over)."""
    queue = "histories-decisions"
    async with rein.create_worker(env.client, agents=[repeating_agent()], task_queue=queue):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "repeating-agent", "prompt": "Add 1 + 2, then 3 + 4."}, id="agent-decisions",
            task_queue=queue)
        await wait_for(handle, "waiting_approval")
        await handle.signal("approve", {"approver": "alice", "via": "inbox"})
        for _ in range(500):
            status = await handle.query("status")
            if status["status"] == "done":
                break
            if status["status"] == "waiting_approval" and status["pending_tool_calls"][0]["arguments"]["a"] == 3:
                await handle.signal("approve", {"approver": "alice"})
                await wait_for(handle, "done")
                break
            await asyncio.sleep(0.02)
        result = await handle.result()
        assert result["output"] == "3 and 7.", result
        history = await handle.fetch_history()
    write(DECISIONS, history)


async def record_policy(env) -> None:  # noqa: ANN001
    """The rules' workflow through three changes, with a worker serving the task queue it runs on."""
    from temporalio.client import WithStartWorkflowOperation
    from temporalio.common import WorkflowIDConflictPolicy

    from rein.core.policy import ADD_RULE_UPDATE, POLICY_WORKFLOW_TYPE, REMOVE_RULE_UPDATE

    queue = "histories-policy"
    async with rein.create_worker(env.client, agents=[repeating_agent()], task_queue=queue):
        for change in ({"rule": {"effect": "allow", "tool": "add", "agent": "repeating-agent", "by": "alice"}},
                       {"rule": {"effect": "ask", "tool": "*", "by": "alice"}}):
            start = WithStartWorkflowOperation(POLICY_WORKFLOW_TYPE, id="policy", task_queue=queue,
                                               id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
            await env.client.execute_update_with_start_workflow(ADD_RULE_UPDATE, change, start_workflow_operation=start)
        handle = env.client.get_workflow_handle("policy")
        await handle.execute_update(REMOVE_RULE_UPDATE, {"id": "r2"})
        for _ in range(500):  # the rule's news delivered (this build), or nothing pending (the previous)
            if not (await handle.describe()).raw_description.pending_activities:
                break
            await asyncio.sleep(0.05)
        await handle.terminate("recorded")
        history = await handle.fetch_history()
    write(POLICY, history)


def write(name: str, history) -> None:  # noqa: ANN001
    target = HERE / name
    target.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
    print(f"wrote {target} ({len(history.events)} events)")


async def main(which: list[str]) -> None:
    env = await start_local()
    try:
        if not which or "approval" in which:
            await record_approval(env)
        if not which or "extensions" in which:
            await record_extensions(env)
        if not which or "cancel" in which:
            await record_cancel(env)
        if not which or "failed" in which:
            await record_failed(env)
        if not which or "long" in which:
            await record_long(env)
        if not which or "changed" in which:
            await record_changed(env)
        if not which or "thread" in which:
            await record_thread(env)
        if not which or "thread_stock" in which:
            await record_thread_stock(env)
        if not which or "thread_client_tools" in which:
            await record_thread_client_tools(env)
        if not which or "thread_turns" in which:
            await record_thread_turns(env)
        if not which or "thread_state" in which:
            await record_thread_state(env)
        if not which or "decisions" in which:
            await record_decisions(env)
        if not which or "policy" in which:
            await record_policy(env)
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main([a for a in sys.argv[1:] if a != "--previous"]))

"""An agent whose model repeats its call ids across turns, as LiteLLM's `call_0`, `call_1`... do: for `wipe alpha
prod` it asks `wipe(target="alpha")` as call_0, then, once that has a result, `wipe(target="prod")` as call_0 again,
then says it is done; `wipe-all t1 t2 ...` asks every wipe at once (call_0, call_1, ...); `look k1 k2` asks the page's
own tool `lookup(key=k1)` as call_0, then `lookup(key=k2)` as call_0 again, then says what it looked up. The tool keeps its own record
of what it wiped (WIPED: workflow id, call id, target), which a test reads to know what really ran.

Also what a page shows of a waiting run (its wait and the call ids), for tests that post decisions as a page does.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType

from rein import Agent, Completion, LoopConfig, Message, ToolCall, ToolContext, Usage

WIPED: list[tuple[str, str, str]] = []
"""What the wipe tool ran in this process: (workflow id, call id, target)."""
KEYS: list[str] = []
"""The idempotency key of each wipe that ran in this process, in order."""

LOOKUP = {"name": "lookup", "description": "Look a key up in the page.",
          "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}
"""The page's own tool that `look` asks (AG-UI's tool shape; the AI SDK's names its schema `inputSchema`)."""


class WipeModel:
    """Stateless: the last user message names the targets; the results since it say which comes next."""

    async def complete(self, messages: list[Message], tools: Any = None, **kwargs: Any) -> Completion:
        usage = Usage(input_tokens=3, output_tokens=2)
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        verb, *targets = (messages[last].content or "").split()
        done = [m for m in messages[last:] if m.role == "tool"]
        if verb == "wipe-all" and not done:
            calls = [ToolCall(id=f"call_{n}", name="wipe", arguments={"target": t}) for n, t in enumerate(targets)]
        elif verb == "wipe" and len(done) < len(targets):
            calls = [ToolCall(id="call_0", name="wipe", arguments={"target": targets[len(done)]})]
        elif verb == "look" and len(done) < len(targets):  # the page's own tool `lookup`
            calls = [ToolCall(id="call_0", name="lookup", arguments={"key": targets[len(done)]})]
        elif verb == "look":
            return Completion(message=Message(role="assistant", content=f"Looked up: {done[-1].content}."),
                              finish_reason="stop", usage=usage)
        else:
            return Completion(message=Message(role="assistant", content=f"Done: {len(done)} answered."),
                              finish_reason="stop", usage=usage)
        what = next(iter(calls[0].arguments.values()))
        return Completion(message=Message(role="assistant", content=f"I will {calls[0].name} {what}.",
                                          tool_calls=calls), finish_reason="tool_calls", usage=usage)


def wipe(target: str, ctx: ToolContext) -> str:
    """Wipe a target.

    Args:
        target: What to wipe.
    """
    workflow_id = ctx.idempotency_key.rpartition("/")[0]  # `<workflow id>/<call id>[#<batch>]`
    WIPED.append((workflow_id, ctx.tool_call_id, target))
    KEYS.append(ctx.idempotency_key)
    return f"wiped {target}"


def wipe_agent(name: str) -> Agent:
    """Every call asks a person (permission "ask")."""
    return Agent(provider=WipeModel(), tools=[wipe], name=name, config=LoopConfig(permission="ask"))


def wiped(workflow_id: str) -> list[tuple[str, str]]:
    """(call id, target) of each wipe that ran for this run or thread."""
    return [(call, target) for run, call, target in WIPED if run == workflow_id]


async def approvals_taken(client: Any, workflow_id: str) -> int:
    """Approval updates the run took (accepted in its history): a refused one never is."""
    events = (await client.get_workflow_handle(workflow_id).fetch_history()).events
    return sum(1 for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
               and e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name == "rein.approve")


async def shown(runs: Any, run_id: str) -> dict[str, Any]:
    """What a page's card shows of the run as it waits now: its wait and its calls' ids (a decision names them)."""
    status = await runs.status(run_id)
    return {"wait": status.wait, "tool_call_ids": list(status.waiting_on)}

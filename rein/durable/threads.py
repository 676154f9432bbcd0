"""ReinClient's side of threads (rein.core.threads): send a message from any process, wait for its
turn's answer, read a thread, list them.

A message is the `rein.send` update. The first one starts the thread (update-with-start, the
workflow id is the thread id); later ones reach the same run wherever they come from. A thread that
has ended (cancelled) takes no more messages: its id is not reused for another conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from rein.core.contract import (
    TOOL_RESULTS_UPDATE,
    WAIT_UPDATE,
    WORKFLOW_TYPE,
    AgentInput,
    RunOutcome,
    ToolResultEntry,
    ToolResults,
    ToolResultsTaken,
    WaitRequest,
)
from rein.core.ir import ToolSpec
from rein.core.result import RunResult
from rein.core.shared_state import STATE_QUERY, STATE_UPDATE, SetState, SharedState
from rein.core.threads import (
    SEND_UPDATE,
    STOP_UPDATE,
    THREAD_MEMO,
    THREAD_QUERY,
    Mode,
    SendReceipt,
    SendRequest,
    ThreadView,
)
from rein.durable.fleet import run_priority
from rein.temporal import history
from rein.temporal.run_status import status_of
from rein.temporal.search_attributes import start_search_attributes


class ThreadRefused(ValueError):
    """The thread did not take the message: `kind` is Busy, BudgetSpent, ThreadEnded, ThreadFull or NotAThread (the
    reason is the message)."""

    def __init__(self, thread_id: str, kind: str, message: str):
        super().__init__(f"thread {thread_id}: {message}")
        self.thread_id = thread_id
        self.kind = kind


@dataclass
class ThreadRow:
    thread_id: str
    agent: str
    status: str
    started: datetime | None
    last_activity: datetime | None
    """When the thread closed, else when its current run started (its last continue-as-new, or its first
    message): visibility keeps no time of a thread's last message."""


class ThreadClient:
    """ReinClient's thread methods (its `client`, `task_queue`, `handle` and `full_result`)."""

    client: Client
    task_queue: str

    def handle(self, run_id: str, run: str | None = None) -> WorkflowHandle[Any, RunOutcome]:
        raise NotImplementedError

    async def full_result(self, run_id: str, outcome: RunOutcome, steps_from: int = 0) -> RunResult:
        raise NotImplementedError

    async def _decide(self, run_id: str, update: str, payload: dict[str, Any], *, served: bool = False,
                      wait: bool = True, update_id: str | None = None) -> Any:
        raise NotImplementedError

    async def send(self, thread_id: str, text: str, *, agent: str, mode: Mode = "queue", message_id: str | None = None,
                   sender: str = "", tenant: str | None = None, stream: bool = False,
                   tools: Sequence[ToolSpec] = (), state: Any = None) -> SendReceipt:
        """Send a message to the thread `thread_id` of `agent`, starting the thread with its first message.
        Returns where it went (its turn); `reply(receipt)` waits for that turn's answer. Raises ThreadRefused
        when the thread does not take it (`reject` while busy, too many waiting, the thread ended). `stream`: the
        caller reads the turn as a stream, so its model calls answer with the provider's stream (as `astream`).
        `tools`: client tools for the message's turn, offered to the model beside the agent's own; the turn waits
        for the result of each call to one (`waiting_input`) until `tool_results` brings it. `state`: the shared
        state a thread this message starts begins with (an existing thread's is set with `set_state`)."""
        request = SendRequest(text=text, mode=mode, message_id=message_id, sender=sender, stream=stream, tools=list(tools))
        start: WithStartWorkflowOperation[Any, RunOutcome] = WithStartWorkflowOperation(
            WORKFLOW_TYPE,
            AgentInput(agent=agent, thread=True, state=state).model_dump(mode="json", exclude_none=True,
                                                                         exclude_defaults=True),
            id=thread_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            result_type=RunOutcome,
            memo={THREAD_MEMO: datetime.now(UTC).isoformat()},
            static_summary=f"thread · {agent}",
            search_attributes=await start_search_attributes(self.client, agent, tenant=tenant),
            priority=run_priority(tenant, None),
        )
        update_id = f"message-{message_id}" if message_id else None  # the server dedupes a retry in one run too
        repeat = update_id is not None and await _known_update(self.client, thread_id, update_id)
        try:
            receipt = await self.client.execute_update_with_start_workflow(
                SEND_UPDATE, request, start_workflow_operation=start, result_type=SendReceipt, id=update_id)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            raise ThreadRefused(thread_id, getattr(cause, "type", None) or "Refused",
                                getattr(cause, "message", None) or str(cause or err)) from None
        except WorkflowAlreadyStartedError:
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await start.workflow_handle()  # the same error, read: asyncio would log it as never retrieved
            raise ThreadRefused(thread_id, "ThreadEnded", "the thread has ended; start another thread id") from None
        # A repeat the server deduplicated answers with the first send's receipt as it was; one the run itself
        # recognised (after a continue-as-new) says so already.
        return receipt.model_copy(update={"duplicate": True}) if repeat else receipt

    async def tool_results(self, thread_id: str, results: Mapping[str, str], *, approver: str | None = None,
                           wait: str | bool | None = None, until_taken: bool = False,
                           update_id: str | None = None) -> ToolResultsTaken:
        """The results of client tool calls the thread's turn waits for (call id -> result text), taken all at once
        or not at all: DecisionRejected names an unknown or already answered call id (nothing changes). Returns the
        ids taken and the stream offset from which the turn goes on. `wait` (the wait id the results answer),
        `until_taken`, `update_id`: as for `approve`."""
        from rein.durable.bound import person, wait_and_flag

        wait_id, flag = wait_and_flag(wait, until_taken)
        payload = ToolResults(results=[ToolResultEntry(tool_call_id=k, content=v) for k, v in results.items()],
                              approver=person() if approver is None else approver, wait=wait_id)
        taken = await self._decide(thread_id, TOOL_RESULTS_UPDATE, payload.model_dump(mode="json", exclude_none=True),
                                   wait=flag, update_id=update_id)
        return ToolResultsTaken.model_validate(taken)

    async def stop_turn(self, thread_id: str, *, by: str = "", wait: bool = False, update_id: str | None = None) -> int:
        """Stop the thread's turn under way (a page's stop button): the model call under way is cut, a wait for a
        person is settled (approvals denied, questions and client tools answered that the turn stopped), and the
        turn ends with stop reason `stopped`; the thread takes the next message as before. Returns the turn's
        number; DecisionRejected when no turn is under way. `by` is recorded on what it denies."""
        return int(await self._decide(thread_id, STOP_UPDATE, {"by": by or self.client.identity}, wait=wait,
                                      update_id=update_id))

    async def state(self, thread_id: str) -> SharedState:
        """The thread's shared state (rein.core.shared_state): its JSON value and version."""
        return SharedState.model_validate(await history.query(self.client, thread_id, STATE_QUERY))

    async def set_state(self, thread_id: str, value: Any, *, version: int, by: str = "",
                        update_id: str | None = None) -> int:
        """Replace the thread's shared state with `value` (JSON, at most MAX_STATE_BYTES), written on `version` (the
        one read): DecisionRejected when the state changed since (a tool's change is never overwritten), or the
        value is too large. Returns the new version; readers of the thread's stream see the change."""
        payload = SetState(value=value, version=version, by=by or self.client.identity)
        return int(await self._decide(thread_id, STATE_UPDATE, payload.model_dump(mode="json"), update_id=update_id))

    async def reply(self, receipt: SendReceipt) -> RunResult:
        """Until the receipt's turn ends (or waits for a person): that turn's RunResult (the whole conversation,
        the turn's steps). A later turn that ended meanwhile is not waited for."""
        handle = self.handle(receipt.thread_id)  # no run id: the newest run of the chain, after a continue-as-new too
        request = WaitRequest(after_pause=receipt.pause, turn=receipt.turn)
        while True:
            try:
                outcome = await handle.execute_update(WAIT_UPDATE, request, result_type=RunOutcome)
                break
            except WorkflowUpdateFailedError as err:
                kind = getattr(err.cause, "type", None)
                if kind not in ("ContinuedAsNew", "WaitReleased"):
                    raise
                await asyncio.sleep(0.1)
        result = await self.full_result(receipt.thread_id, outcome, steps_from=outcome.turn_first_step)
        result.steps = result.steps[: outcome.step_count - outcome.turn_first_step]  # not a later turn's
        return result

    async def turn_result(self, thread_id: str) -> RunResult:
        """The RunResult of the thread's turn under way once it ends (or waits for a person), else of its last turn."""
        view = await self.thread(thread_id)
        receipt = SendReceipt(thread_id=thread_id, message_id="", mode="queue", turn=max(view.turns, 1))
        return await self.reply(receipt)

    async def thread(self, thread_id: str) -> ThreadView:
        """The thread at a glance: status, turns, queued and steering messages, usage, its last answer."""
        return ThreadView.model_validate(await history.query(self.client, thread_id, THREAD_QUERY))

    async def threads(self, *, limit: int = 50, running_only: bool = False) -> AsyncIterator[ThreadRow]:
        """Threads, newest first, one row each: a thread that continued as new is listed once, as its newest
        run (visibility is eventually consistent). The status is the run's closed state when it closed."""
        query = ('WorkflowType="AgentWorkflow" AND ExecutionStatus!="ContinuedAsNew"'
                 + (' AND ExecutionStatus="Running"' if running_only else ""))
        found = 0
        async for run in self.client.list_workflows(query):
            memo = await run.memo()
            if not memo.get(THREAD_MEMO):
                continue
            yield ThreadRow(
                thread_id=run.id,
                agent=_attribute(run.typed_search_attributes, "ReinAgent") or "",
                status=status_of(run),
                started=_started(memo.get(THREAD_MEMO)) or run.start_time,
                last_activity=run.execution_time if run.close_time is None else run.close_time,
            )
            found += 1
            if found >= limit:
                return


async def _known_update(client: Client, thread_id: str, update_id: str) -> bool:
    """Whether the thread's current run already has the update `update_id` (a message sent before with that id):
    the server answers its repeat with the first one's result, the receipt as it was then (duplicate=False)."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.enums.v1 import UpdateWorkflowExecutionLifecycleStage as Stage
    from temporalio.api.update.v1 import UpdateRef, WaitPolicy
    from temporalio.api.workflowservice.v1 import PollWorkflowExecutionUpdateRequest
    from temporalio.service import RPCError, RPCStatusCode

    request = PollWorkflowExecutionUpdateRequest(
        namespace=client.namespace, identity=client.identity,
        update_ref=UpdateRef(workflow_execution=WorkflowExecution(workflow_id=thread_id), update_id=update_id),
        wait_policy=WaitPolicy(lifecycle_stage=Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED))
    try:
        await client.workflow_service.poll_workflow_execution_update(request)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:  # no such update, or no such thread yet
            return False
        raise
    return True


def _started(marked: Any) -> datetime | None:
    """The thread's start from its memo (a continued thread's newest run started later); None before it was kept."""
    try:
        return datetime.fromisoformat(marked) if isinstance(marked, str) else None
    except ValueError:
        return None


def _attribute(attributes: Any, name: str) -> Any:
    from rein.core.contract import SEARCH_KEYS

    key = SEARCH_KEYS.get(name)
    return attributes.get(key) if key is not None else None

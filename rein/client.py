"""A small typed client for ops tooling: start runs, answer interrupts, read state.

Everything here is also possible with a raw temporalio client or the `temporal`
CLI; this only spells the contract (rein.contract) out once.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError

from rein.contract import DEFAULT_TASK_QUEUE, WAIT_UPDATE, WORKFLOW_TYPE, AgentInput, RunStatusView, WaitRequest
from rein.result import RunResult, Step
from rein.session import Session
from rein.summaries import run_summary
from rein.temporal.plugin import with_rein_plugin


class RunFailed(RuntimeError):
    """A durable run ended in failure (for example a non-retryable model error)."""


class DecisionRejected(ValueError):
    """The run rejected a decision (approve/deny/answer/retry/cancel) that does not fit its state."""


async def connect(address: str | None = None, namespace: str | None = None, **client_kwargs: Any) -> Client:
    """A Client with rein's data converter, from the connection settings (rein.temporal.connection).

    No address configured: the shared embedded server of REIN_HOME.
    """
    from rein.temporal import connection

    return await connection.connect(address, namespace, **client_kwargs)


class ReinClient:
    def __init__(self, client: Client, task_queue: str | None = None):
        self.client = with_rein_plugin(client)
        self.task_queue = task_queue or os.environ.get("REIN_TASK_QUEUE", DEFAULT_TASK_QUEUE)

    async def start(
        self,
        agent: str,
        prompt: str,
        *,
        run_id: str | None = None,
        config: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> WorkflowHandle[Any, RunResult]:
        return await self.client.start_workflow(
            WORKFLOW_TYPE,
            AgentInput(agent=agent, prompt=prompt, config=config, metadata=metadata or {}).model_dump(
                mode="json", exclude_none=True
            ),
            id=run_id or f"{agent}-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
            result_type=RunResult,
            static_summary=run_summary(agent, prompt),
        )

    def handle(self, run_id: str) -> WorkflowHandle[Any, RunResult]:
        return self.client.get_workflow_handle(run_id, result_type=RunResult)

    async def approve(self, run_id: str, tool_call_id: str | None = None, approver: str = "", reason: str = "") -> None:
        await self.handle(run_id).signal("approve", {"tool_call_id": tool_call_id, "approver": approver, "reason": reason})

    async def deny(self, run_id: str, tool_call_id: str | None = None, approver: str = "", reason: str = "") -> None:
        await self.handle(run_id).signal("deny", {"tool_call_id": tool_call_id, "approver": approver, "reason": reason})

    async def answer(self, run_id: str, text: str, approver: str = "") -> None:
        await self.handle(run_id).signal("answer", {"text": text, "approver": approver})

    async def retry(self, run_id: str) -> None:
        await self.handle(run_id).signal("retry", {})

    async def cancel(self, run_id: str, reason: str = "") -> None:
        await self.handle(run_id).signal("cancel", {"reason": reason})

    async def status(self, run_id: str) -> RunStatusView:
        return RunStatusView.model_validate(await self.handle(run_id).query("status"))

    async def session(self, run_id: str) -> Session:
        return Session.model_validate(await self.handle(run_id).query("session"))

    async def steps(self, run_id: str) -> list[Step]:
        return [Step.model_validate(s) for s in await self.handle(run_id).query("steps")]

    async def result(self, run_id: str) -> RunResult:
        return await self.handle(run_id).result()

    async def wait(self, run_id: str, request: WaitRequest | None = None) -> RunResult:
        """Until the run pauses (an interrupt) or ends; follows it across continue-as-new.

        `request.after_pause` is how many pauses the caller has already seen.
        Raises RunFailed when the run failed.
        """
        request = request or WaitRequest()
        latest = self.handle(run_id)  # no run id: always the newest run of the chain
        while True:
            try:
                return await latest.execute_update(WAIT_UPDATE, request, result_type=RunResult)
            except (WorkflowUpdateFailedError, RPCError) as err:
                failed = getattr(getattr(err, "cause", None), "type", None) == "RunFailed"
                if failed or (await latest.describe()).status != WorkflowExecutionStatus.RUNNING:
                    break
        try:
            return await latest.result()
        except WorkflowFailureError as err:
            cause = err.cause
            raise RunFailed(f"run {run_id} failed: {getattr(cause, 'message', cause)}") from None

    async def waiting(self, status: str = "waiting_approval") -> list[str]:
        """Ids of running runs in this ReinStatus (visibility is eventually consistent).

        Only running workflows: a run terminated while it waited keeps its last ReinStatus.
        """
        query = f'ReinStatus="{status}" AND ExecutionStatus="Running"'
        return [wf.id async for wf in self.client.list_workflows(query)]

"""How a decision reaches a run: ReinClient's validated updates, and the truth about them.

A decision goes out only where a worker serves the run (else NoWorker: nothing sent); one that no
worker takes within REIN_DECISION_GRACE_S is said to be queued (DecisionQueued), not applied; a run that
waits in its agent-as-tool child refuses it naming the child, where it is sent instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from rein import settings
from rein.core.contract import DECISION_FOR_CHILD, RunOutcome
from rein.core.errors import DecisionRejected, NoWorker
from rein.temporal import history

DECISION_GRACE_S = 2.0
"""REIN_DECISION_GRACE_S's default (rein.settings reads the setting; this name stays public in rein.client)."""


class DecisionQueued(RuntimeError):
    """The decision was sent and the server holds it, but no worker has taken the run: it is not applied.

    The run applies it (or refuses it, if by then it no longer fits) when a worker takes the run: the
    server keeps it until then, in memory (a server restart drops it; `rein status` then still shows the
    run waiting). An update cannot be withdrawn. `decision_result(run_id, update_id)` waits for it;
    `decision_stage` says where it stands.
    """

    def __init__(self, run_id: str, what: str, update_id: str):
        super().__init__(f"no worker has taken run {run_id} yet: the {what} is sent and queued on the server, "
                         "not applied; the run applies it when a worker takes it")
        self.run_id = run_id
        self.what = what
        self.update_id = update_id


class DecisionDelivery:
    """ReinClient's side of sending decisions (its `client` and `handle`)."""

    client: Client

    def handle(self, run_id: str, run: str | None = None) -> WorkflowHandle[Any, RunOutcome]:
        raise NotImplementedError

    async def decision_result(self, run_id: str, update_id: str) -> Any:
        """Until a decision sent earlier (DecisionQueued.update_id) is applied: what its method returns;
        DecisionRejected when the run refused it."""
        try:
            return await self.handle(run_id).get_update_handle(update_id).result()
        except WorkflowUpdateFailedError as err:
            message = getattr(err.cause, "message", None) or str(err.cause or err)
            raise DecisionRejected(f"decision rejected by run {run_id}: {message}") from None

    async def decision_stage(self, run_id: str, update_id: str) -> str:
        """Where a decision stands on the server, without waiting: "not sent" (the server has no such
        update), "queued" (held, no worker has taken it), "taken" (a worker accepted it, applying),
        "done" (applied, or refused by the run)."""
        from temporalio.api.common.v1 import WorkflowExecution
        from temporalio.api.enums.v1 import UpdateWorkflowExecutionLifecycleStage as Stage
        from temporalio.api.update.v1 import UpdateRef
        from temporalio.api.workflowservice.v1 import PollWorkflowExecutionUpdateRequest
        from temporalio.service import RPCStatusCode

        request = PollWorkflowExecutionUpdateRequest(
            namespace=self.client.namespace, identity=self.client.identity,
            update_ref=UpdateRef(workflow_execution=WorkflowExecution(workflow_id=run_id), update_id=update_id))
        try:
            polled = await self.client.workflow_service.poll_workflow_execution_update(
                request, timeout=timedelta(seconds=5))
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return "not sent"
            raise
        return {Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED: "taken",
                Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED: "done"}.get(polled.stage, "queued")

    async def worker_serves(self, run_id: str) -> bool:
        """Whether a worker that can take the run (of its pinned build, when it has one) polled its task
        queue recently (True when it cannot tell)."""
        return await history.served(self.client, self.handle(run_id))

    async def _worker_appears(self, run_id: str) -> bool:
        """A worker serves the run now, or within REIN_WORKER_GRACE_S seconds: one that
        has just started may not have polled yet (it logs "serving" before the server has seen its first poll)."""
        deadline = asyncio.get_running_loop().time() + settings.current().worker_grace_s
        while not await self.worker_serves(run_id):
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.25)
        return True

    async def _start_one(self, run_id: str) -> str:
        """What to start so that a worker serves the run: one of the build it is pinned to, if it is."""
        try:
            build = history.pinned_build(await self.handle(run_id).describe())
        except RPCError:
            build = None
        if build is None:
            return "start `rein worker --agent MODULE:ATTR` for its agent"
        deployment, build_id = build
        return (f"it is pinned to build {build_id} of deployment {deployment}: start a worker of that build, "
                f"REIN_DEPLOYMENT={deployment} REIN_BUILD_ID={build_id}")

    async def _decide(self, run_id: str, update: str, payload: dict[str, Any], *, served: bool = False,
                      wait: bool = True, update_id: str | None = None) -> Any:
        """Send one decision as its validated update; `served`: the caller's own worker serves the run
        (the in-process engine), so no DescribeTaskQueue is asked first.

        No worker polls the run's queue: NoWorker, nothing sent. A worker is listed but none takes the
        decision within REIN_DECISION_GRACE_S (one stopped less than a minute ago is still listed) and none
        answers a query within the query grace either: the server holds it, and without `wait` this
        raises DecisionQueued (sent, not applied; the run applies it when a worker takes the run). With
        `wait`, until a worker takes it. `update_id`: the decision's Temporal update id (default: a new
        one), for `decision_stage` / `decision_result`; the same id sent twice is one decision."""
        what = update.removeprefix("rein.")
        if not served and not await self._worker_appears(run_id):
            raise NoWorker(f"no worker serves run {run_id}: the {what} was not sent ({await self._start_one(run_id)}, "
                           "then decide again)")
        try:
            return await self._send(run_id, update, payload, what, wait, update_id)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == DECISION_FOR_CHILD and cause.details:
                # The run waits in its agent-as-tool child: the decision goes there, and its answer is ours.
                return await self._decide(str(cause.details[0]), update, payload, served=served, wait=wait,
                                          update_id=update_id)
            message = getattr(cause, "message", None) or str(cause or err)
            raise DecisionRejected(f"{what} rejected by run {run_id}: {message}") from None
        except RPCError as err:
            raise DecisionRejected(f"{what} rejected: run {run_id} is not running ({err.message})") from None

    async def _send(self, run_id: str, update: str, payload: dict[str, Any], what: str, wait: bool,
                    update_id: str | None) -> Any:
        """The update, sent; its result once a worker applied it. Not taken within REIN_DECISION_GRACE_S and no
        worker answers a query within the query grace: DecisionQueued (unless `wait`), the update left
        with the server (it cannot be withdrawn)."""
        update_id = update_id or f"{what}-{uuid.uuid4().hex[:12]}"
        sending = asyncio.ensure_future(self.handle(run_id).execute_update(update, payload, id=update_id))
        try:
            done, _ = await asyncio.wait({sending}, timeout=settings.current().decision_grace_s)
            if not done and not wait and not await self._worker_answers(run_id, sending):
                raise DecisionQueued(run_id, what, update_id)
            return await sending
        finally:
            if not sending.done():
                sending.cancel()  # the server keeps the update; only this wait for it ends
                with contextlib.suppress(BaseException):
                    await sending

    async def _worker_answers(self, run_id: str, sending: asyncio.Future[Any]) -> bool:
        """Whether a worker answers a query of the run within the query grace (or takes the decision
        meanwhile): a live but busy worker takes the decision soon; a stopped one, still listed, does not."""
        asked = asyncio.ensure_future(self.handle(run_id).query(
            "status", rpc_timeout=timedelta(seconds=settings.current().query_grace_s)))
        try:
            await asyncio.wait({asked, sending}, return_when=asyncio.FIRST_COMPLETED)
            if sending.done():
                return True
            return asked.exception() is None
        finally:
            asked.cancel()
            with contextlib.suppress(BaseException):
                await asked

"""ReinClient's decisions, each bound to what it decides: the wait it answers and the calls it names.

A caller that names neither (`rein approve RUN`, `client.approve(run_id)`) gets a decision naming exactly what the
run waits on as it is read, and learns which calls that was (`Decided`): the run refuses it if it moved on in
between, in one line naming what it waits on now, instead of deciding a call nobody was shown. Call ids alone do
not say it: they repeat across turns. Who decides is the person the process runs for (rein.settings `identity`,
REIN_IDENTITY, default USER@HOST), never a process id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rein.core.contract import ANSWER_UPDATE, APPROVE_UPDATE, CANCEL_UPDATE, DENY_UPDATE, RETRY_UPDATE, RunStatusView
from rein.core.ir import ToolCall
from rein.core.waits import call_text
from rein.durable.delivery import DecisionDelivery
from rein.temporal import history


class Decided(list[str]):
    """The ids of the calls a decision decided (a list of str, as earlier releases returned), with the calls
    themselves (`calls`: tool, arguments, id) and the wait it answered (`wait`; None for a run of an earlier build)."""

    def __init__(self, ids: Sequence[str] = (), calls: Sequence[ToolCall] = (), wait: str | None = None):
        super().__init__(ids)
        self.calls = list(calls)
        self.wait = wait

    def lines(self) -> list[str]:
        """Each call as a person reads it: `tool(args) [id]` (`[id]` when the caller named it and nothing was read)."""
        known = {c.id: call_text(c) for c in self.calls}
        return [known.get(i, f"[{i}]") for i in self]


def person() -> str:
    """Who this process decides as: REIN_IDENTITY, default USER@HOST (rein.settings)."""
    from rein import settings

    return settings.current().identity


def wait_and_flag(wait: str | bool | None, until_taken: bool) -> tuple[str | None, bool]:
    """`wait` names the wait a decision answers; a bool there is the earlier `wait=` (until a worker takes it)."""
    if isinstance(wait, bool):
        return None, until_taken or wait
    return wait, until_taken


class BoundDecisions(DecisionDelivery):
    """approve, deny, answer, retry, cancel: each a validated update of the run, naming what it decides."""

    def _approver(self, approver: str | None) -> str:
        return person() if approver is None else approver

    async def status(self, run_id: str) -> RunStatusView:
        return RunStatusView.model_validate(await history.query(self.client, run_id, "status"))

    async def approve(
        self, run_id: str, tool_call_id: str | None = None, approver: str | None = None, reason: str = "", *,
        tool_call_ids: Sequence[str] | None = None, wait: str | bool | None = None, until_taken: bool = False,
        update_id: str | None = None,
    ) -> Decided:
        """Approve the calls the run waits on now (or those named: `tool_call_ids`, `tool_call_id`) in the wait
        it is in (or the one named: `wait`). Returns the calls approved. DecisionRejected when the run refuses:
        it waits on something else now (the message says what), or nothing fits. `until_taken`, `update_id`: see
        `_decide` (DecisionQueued when no worker takes it)."""
        return await self.decide_calls(run_id, True, tool_call_id=tool_call_id, tool_call_ids=tool_call_ids,
                                       wait=wait, approver=approver, reason=reason, until_taken=until_taken,
                                       update_id=update_id)

    async def deny(
        self, run_id: str, tool_call_id: str | None = None, approver: str | None = None, reason: str = "", *,
        tool_call_ids: Sequence[str] | None = None, wait: str | bool | None = None, until_taken: bool = False,
        update_id: str | None = None,
    ) -> Decided:
        """Deny as `approve` approves; the model is told they were denied, by whom and why (`reason`)."""
        return await self.decide_calls(run_id, False, tool_call_id=tool_call_id, tool_call_ids=tool_call_ids,
                                       wait=wait, approver=approver, reason=reason, until_taken=until_taken,
                                       update_id=update_id)

    async def decide_calls(
        self, run_id: str, approved: bool, *, tool_call_id: str | None = None,
        tool_call_ids: Sequence[str] | None = None, wait: str | bool | None = None, approver: str | None = None,
        reason: str = "", tenant: str | None = None, until_taken: bool = False, update_id: str | None = None,
        view: RunStatusView | None = None,
    ) -> Decided:
        """One approval or denial, bound: what the caller names, else what the run waits on as read now (`view`:
        the run's status as the caller read and showed it)."""
        payload, view = await self.bound_payload(run_id, tool_call_id=tool_call_id, tool_call_ids=tool_call_ids,
                                                 wait=wait, view=view)
        wait_id, flag = wait_and_flag(wait, until_taken)
        payload.update(approver=self._approver(approver), reason=reason, tenant=tenant)
        ids = await self._decide(run_id, APPROVE_UPDATE if approved else DENY_UPDATE, payload, wait=flag,
                                 update_id=update_id)
        known = {c.id: c for c in view.pending_tool_calls} if view is not None else {}
        ids = [str(i) for i in ids or []]
        return Decided(ids, [known[i] for i in ids if i in known], payload.get("wait") or wait_id)

    async def bound_payload(self, run_id: str, *, tool_call_id: str | None = None,
                            tool_call_ids: Sequence[str] | None = None, wait: str | bool | None = None,
                            view: RunStatusView | None = None) -> tuple[dict[str, Any], RunStatusView | None]:
        """An approval's or denial's `wait` and calls, and the run's status they were read from (`view`, or read
        now): what the caller named; else the wait the run is in, and (no call named) exactly the calls it waits on.
        None is named when the run waits for nobody: it refuses the decision and says what it is doing. A caller
        that names both the wait and the calls (it shows them) costs no read (the status: None)."""
        wait_id, _ = wait_and_flag(wait, False)
        payload: dict[str, Any] = {"tool_call_id": tool_call_id, "wait": wait_id,
                                   "tool_call_ids": list(tool_call_ids) if tool_call_ids is not None else None}
        if view is None and wait_id is not None and (tool_call_ids is not None or tool_call_id is not None):
            return {k: v for k, v in payload.items() if v is not None}, None
        view = view if view is not None else await self.status(run_id)
        if wait_id is None and view.wait is not None:
            payload["wait"] = view.wait
            if tool_call_id is None and tool_call_ids is None:
                payload["tool_call_ids"] = list(view.waiting_on)
        return {k: v for k, v in payload.items() if v is not None}, view

    async def answer(self, run_id: str, text: str, approver: str | None = None, *, wait: str | bool | None = None,
                     until_taken: bool = False, update_id: str | None = None, tenant: str | None = None) -> str:
        """Answer the question the run waits on now (or in the wait named: `wait`); returns how it was used
        ("tool" or "message")."""
        payload = {"text": text, "approver": self._approver(approver), "tenant": tenant}
        return await self._decide(run_id, ANSWER_UPDATE, await self._with_wait(run_id, payload, wait),
                                  wait=wait_and_flag(wait, until_taken)[1], update_id=update_id)

    async def retry(self, run_id: str, *, wait: str | bool | None = None, until_taken: bool = False,
                    update_id: str | None = None, tenant: str | None = None) -> None:
        """Retry the model call the run waits to retry (in the wait named: `wait`, else the one it is in)."""
        await self._decide(run_id, RETRY_UPDATE, await self._with_wait(run_id, {"tenant": tenant}, wait),
                           wait=wait_and_flag(wait, until_taken)[1], update_id=update_id)

    async def cancel(self, run_id: str, reason: str = "", *, wait: bool = False, update_id: str | None = None) -> None:
        await self._decide(run_id, CANCEL_UPDATE, {"reason": reason}, wait=wait, update_id=update_id)

    async def _with_wait(self, run_id: str, payload: dict[str, Any], wait: str | bool | None) -> dict[str, Any]:
        """`payload` naming the wait: the one given, else the one the run is in now."""
        wait_id, _ = wait_and_flag(wait, False)
        if wait_id is None:
            wait_id = (await self.status(run_id)).wait
        return {k: v for k, v in {**payload, "wait": wait_id}.items() if v is not None}

"""ReinClient's inbox: every decision people owe, read from visibility (one list query per page, the details from
each run's waiting memo: rein.core.inbox), and decisions in bulk through the runs' validated updates.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from rein.core.contract import ANSWER_UPDATE, APPROVE_UPDATE, DENY_UPDATE, RETRY_UPDATE, WORKFLOW_TYPE, RunStatusView
from rein.core.errors import DecisionRejected, NoWorker
from rein.core.inbox import STATUS_OF_KIND, WAITING_MEMO, InboxItem, Kind, WaitingMemo
from rein.core.waits import call_text
from rein.durable.delivery import DecisionQueued

WAITING = tuple(STATUS_OF_KIND.values())
_NAME = re.compile(r"^[^\"'\\\n]{1,256}$")
BULK_CONCURRENCY = 16
Outcome = Literal["applied", "refused", "queued", "not sent", "skipped"]


class InboxError(ValueError):
    """A filter or a decision the inbox cannot take (one line)."""


@dataclass
class BulkOutcome:
    """What became of one run's decision in a bulk decision: `decided` the call ids, `calls` the same calls as a
    person reads them (`tool(args) [id]`), `wait` the wait the decision named."""

    run_id: str
    outcome: Outcome
    detail: str = ""
    decided: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    wait: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "outcome": self.outcome, "detail": self.detail, "decided": self.decided,
                "calls": self.calls, "wait": self.wait}

    def naming(self, shown: dict[str, str], wait: str | None) -> BulkOutcome:
        """This outcome with the calls it decided as a person reads them (`shown`: call id -> `tool(args) [id]`)."""
        self.calls = [shown.get(i, f"[{i}]") for i in self.decided]
        self.wait = wait
        return self


def inbox_query(*, agent: str | None = None, tenant: str | None = None, kind: Kind | None = None) -> str:
    """The visibility query for waiting runs (of an agent, a tenant, a kind)."""
    for what, value in (("agent", agent), ("tenant", tenant)):
        if value is not None and not _NAME.match(value):
            raise InboxError(f"--{what} {value[:60]!r} is not a name rein can look up (no quotes or backslashes)")
    statuses = [STATUS_OF_KIND[kind]] if kind else list(WAITING)
    query = (f'WorkflowType="{WORKFLOW_TYPE}" AND ExecutionStatus="Running" AND ReinStatus IN ('
             + ", ".join(f'"{s}"' for s in statuses) + ")")
    if agent is not None:
        query += f' AND ReinAgent="{agent}"'
    if tenant is not None:
        query += f' AND ReinTenant="{tenant}"'
    return query


def _keyword(info: Any, name: str) -> str | None:
    """A Keyword search attribute of a listed run, from its payload (JSON text) as the server sent it."""
    payload = info.search_attributes.indexed_fields.get(name)
    if payload is None or not payload.data:
        return None
    value = json.loads(payload.data)
    return value if isinstance(value, str) else None


async def items_of_page(client: Client, infos: Sequence[Any]) -> list[InboxItem]:
    """A page of listed runs (the visibility RPC's WorkflowExecutionInfo) as inbox items: their waiting memos
    decoded in one call to the client's converter (its codec included), not one per run. A run whose ReinStatus is
    not a wait is left out; one without the memo (an earlier build) is listed without details."""
    items: list[InboxItem] = []
    memos: list[Any] = []
    for info in infos:
        kind = next((k for k, s in STATUS_OF_KIND.items() if s == _keyword(info, "ReinStatus")), None)
        if kind is None:
            continue
        items.append(InboxItem(run_id=info.execution.workflow_id, kind=kind, agent=_keyword(info, "ReinAgent") or "",  # type: ignore[arg-type]
                               tenant=_keyword(info, "ReinTenant"), started=info.start_time.ToDatetime(UTC)))
        memos.append(info.memo.fields.get(WAITING_MEMO))
    present = [i for i, m in enumerate(memos) if m is not None]
    try:
        decoded = await client.data_converter.decode([memos[i] for i in present]) if present else []
    except Exception:  # a memo this client cannot decode (another key, another codec): listed without details
        decoded = [None] * len(present)
    for i, raw in zip(present, decoded, strict=True):
        if isinstance(raw, dict):
            items[i] = _with_memo(items[i], WaitingMemo.model_validate(raw))
    return items


def _with_memo(item: InboxItem, memo: WaitingMemo) -> InboxItem:
    return item.model_copy(update={
        "kind": memo.kind, "thread": memo.thread, "calls": memo.calls, "more": memo.more, "said": memo.said,
        "question": memo.question, "since": datetime.fromisoformat(memo.since), "wait": memo.wait,
        "until": datetime.fromisoformat(memo.until) if memo.until else None})


def keep(item: InboxItem, *, tool: str | None, older_than: timedelta | None, now: datetime) -> bool:
    if tool is not None and tool not in item.tools:
        return False
    if older_than is not None:
        since = item.since or item.started
        if since is None or since > now - older_than:
            return False
    return True


class InboxClient:
    """ReinClient's inbox methods (its `client`, `_decide`, `bound_payload` and `_with_wait`)."""

    client: Client

    async def _decide(self, run_id: str, update: str, payload: dict[str, Any], *, served: bool = False,
                      wait: bool = True, update_id: str | None = None) -> Any:
        raise NotImplementedError

    async def bound_payload(self, run_id: str, *, tool_call_id: str | None = None,
                            tool_call_ids: Sequence[str] | None = None, wait: str | bool | None = None,
                            view: RunStatusView | None = None) -> tuple[dict[str, Any], RunStatusView | None]:
        raise NotImplementedError

    async def _with_wait(self, run_id: str, payload: dict[str, Any], wait: str | bool | None) -> dict[str, Any]:
        raise NotImplementedError

    def _approver(self, approver: str | None) -> str:
        raise NotImplementedError

    async def inbox(self, *, agent: str | None = None, tenant: str | None = None, tool: str | None = None,
                    older_than: timedelta | None = None, kind: Kind | None = None, limit: int | None = None,
                    page_size: int = 1000) -> list[InboxItem]:
        """Every decision people owe, oldest wait first: waiting runs and threads of `agent` / `tenant` / `kind`
        (approval, question, retry), whose pending calls include `tool`, waiting for longer than `older_than`.
        One visibility query per page of `page_size` runs (no describe or query per run)."""
        now = datetime.now(UTC)
        items: list[InboxItem] = []
        query, token = inbox_query(agent=agent, tenant=tenant, kind=kind), b""
        while limit is None or len(items) < limit:
            page = await self.client.workflow_service.list_workflow_executions(ListWorkflowExecutionsRequest(
                namespace=self.client.namespace, query=query, page_size=page_size, next_page_token=token))
            items += [i for i in await items_of_page(self.client, page.executions)
                      if keep(i, tool=tool, older_than=older_than, now=now)]
            token = page.next_page_token
            if not token:
                break
        items = items[:limit] if limit is not None else items
        far = datetime.max.replace(tzinfo=UTC)
        return sorted(items, key=lambda i: i.since or i.started or far)

    async def inbox_item(self, run_id: str) -> InboxItem | None:
        """The run as the inbox lists it now, read from the run itself (describe: its waiting memo and search
        attributes as the server holds them, not visibility's copy); None when it waits for nobody. A page that
        showed an older wait is refreshed with it."""
        described = await self.client.get_workflow_handle(run_id).describe()
        if described.status != WorkflowExecutionStatus.RUNNING:
            return None
        items = await items_of_page(self.client, [described.raw_description.workflow_execution_info])
        return items[0] if items else None

    async def decide_inbox(self, decision: Literal["approve", "deny"], items: list[InboxItem], *, tool: str | None = None,
                           reason: str = "", approver: str | None = None, tenant: str | None = None,
                           via: str = "inbox") -> list[BulkOutcome]:
        """Approve or deny the listed approvals (with `tool`: only that tool's calls), each through its run's
        validated update, at most BULK_CONCURRENCY at once. Each decision names the wait and the calls the item
        lists: a run that waits on something else by now refuses it (the person saw something else). `tenant`:
        the tenant the caller was verified for (each run refuses a decision outside it). Per run: applied,
        refused (the run said why), queued (sent, no worker has taken it), not sent (no worker serves it),
        skipped (not an approval, or no details). `via` is accepted and ignored (a run records no client's word
        for how a decision came)."""
        who = self._approver(approver)
        gate = asyncio.Semaphore(BULK_CONCURRENCY)

        async def one(item: InboxItem) -> BulkOutcome:
            if item.kind != "approval":
                return BulkOutcome(item.run_id, "skipped", f"waits for a {item.kind}, not an approval")
            if not item.calls:
                return BulkOutcome(item.run_id, "skipped", f"no details (an earlier build): rein {decision} {item.run_id}")
            async with gate:
                try:
                    payload, shown = await self._listed(item, tool)
                except (RPCError, WorkflowQueryFailedError) as exc:  # it ended meanwhile, or cannot be read now
                    return BulkOutcome(item.run_id, "refused", f"what it waits on could not be read: {exc}"[:300])
                payload.update(approver=who, reason=reason, tenant=tenant)
                outcome = await self.send_decision(item.run_id, APPROVE_UPDATE if decision == "approve" else DENY_UPDATE,
                                                   payload)
            return outcome.naming(shown, payload.get("wait"))

        return list(await asyncio.gather(*(one(i) for i in items)))

    async def _listed(self, item: InboxItem, tool: str | None) -> tuple[dict[str, Any], dict[str, str]]:
        """The decision for what `item` lists (its wait, its calls, of `tool` only), and each call as a person reads
        it. An item that lists only some of its calls, or no wait (an earlier build), is read from the run."""
        if item.wait is not None and not item.more:
            calls = {c.id: f"{c.tool}({c.args}) [{c.id}]" for c in item.calls if tool is None or c.tool == tool}
            return {"wait": item.wait, "tool_call_ids": list(calls)}, calls
        payload, view = await self.bound_payload(item.run_id)
        pending = view.pending_tool_calls if view is not None else []
        named = set(payload.get("tool_call_ids") or [c.id for c in pending])
        calls = {c.id: call_text(c) for c in pending if c.id in named and (tool is None or c.name == tool)}
        return {**payload, "tool_call_ids": list(calls)}, calls

    async def send_decision(self, run_id: str, update: str, payload: dict[str, Any]) -> BulkOutcome:
        """One decision, its fate as a BulkOutcome (never raises for the run's refusal or a missing worker)."""
        try:
            result = await self._decide(run_id, update, payload, wait=False)
        except DecisionRejected as exc:
            return BulkOutcome(run_id, "refused", str(exc))
        except DecisionQueued as exc:
            return BulkOutcome(run_id, "queued", str(exc))
        except NoWorker as exc:
            return BulkOutcome(run_id, "not sent", str(exc))
        decided = result if isinstance(result, list) else []
        return BulkOutcome(run_id, "applied", "", [str(d) for d in decided])

    async def decide_item(self, run_id: str, action: Literal["approve", "deny", "answer", "retry"], *,
                          tool_call_id: str | None = None, tool_call_ids: Sequence[str] | None = None,
                          wait: str | None = None, text: str = "", reason: str = "", approver: str | None = None,
                          tenant: str | None = None, via: str = "inbox") -> BulkOutcome:
        """One decision from the inbox (its page): approve, deny, answer or retry, scoped to `tenant`, naming the wait
        and the calls the person saw (`wait`, `tool_call_ids`; naming neither: what the run waits on as read now).
        `via` is accepted and ignored."""
        try:
            return await self._decide_item(run_id, action, tool_call_id=tool_call_id, tool_call_ids=tool_call_ids,
                                           wait=wait, text=text, reason=reason, who=self._approver(approver),
                                           tenant=tenant)
        except (RPCError, WorkflowQueryFailedError) as exc:  # no such run, or it ended meanwhile
            return BulkOutcome(run_id, "refused", f"run {run_id} cannot be read: {getattr(exc, 'message', exc)}"[:300])

    async def _decide_item(self, run_id: str, action: str, *, tool_call_id: str | None,
                           tool_call_ids: Sequence[str] | None, wait: str | None, text: str, reason: str, who: str,
                           tenant: str | None) -> BulkOutcome:
        if action in ("approve", "deny"):
            payload, view = await self.bound_payload(run_id, tool_call_id=tool_call_id, tool_call_ids=tool_call_ids,
                                                     wait=wait)
            payload.update(approver=who, reason=reason, tenant=tenant)
            outcome = await self.send_decision(run_id, APPROVE_UPDATE if action == "approve" else DENY_UPDATE, payload)
            shown = {c.id: call_text(c) for c in view.pending_tool_calls} if view is not None else {}
            return outcome.naming(shown, payload.get("wait"))
        if action == "answer":
            if not text.strip():
                raise InboxError("an answer needs its text")
            return await self.send_decision(run_id, ANSWER_UPDATE, await self._with_wait(
                run_id, {"text": text, "approver": who, "tenant": tenant}, wait))
        return await self.send_decision(run_id, RETRY_UPDATE, await self._with_wait(run_id, {"tenant": tenant}, wait))


__all__ = ["BulkOutcome", "InboxClient", "InboxError", "inbox_query", "items_of_page"]

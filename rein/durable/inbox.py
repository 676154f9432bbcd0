"""ReinClient's inbox: every decision people owe, read from visibility (one list query per page, the details from
each run's waiting memo: rein.core.inbox), and decisions in bulk through the runs' validated updates.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from temporalio.client import Client, WorkflowExecution

from rein.core.contract import ANSWER_UPDATE, APPROVE_UPDATE, DENY_UPDATE, RETRY_UPDATE, SEARCH_KEYS, WORKFLOW_TYPE
from rein.core.errors import DecisionRejected, NoWorker
from rein.core.inbox import STATUS_OF_KIND, WAITING_MEMO, InboxItem, Kind, WaitingMemo
from rein.durable.delivery import DecisionQueued

WAITING = tuple(STATUS_OF_KIND.values())
_NAME = re.compile(r"^[^\"'\\\n]{1,256}$")
BULK_CONCURRENCY = 16
Outcome = Literal["applied", "refused", "queued", "not sent", "skipped"]


class InboxError(ValueError):
    """A filter or a decision the inbox cannot take (one line)."""


@dataclass
class BulkOutcome:
    """What became of one run's decision in a bulk decision."""

    run_id: str
    outcome: Outcome
    detail: str = ""
    decided: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "outcome": self.outcome, "detail": self.detail, "decided": self.decided}

    def with_decided(self, decided: list[str]) -> BulkOutcome:
        """This outcome, with the calls already decided before it in the same run."""
        self.decided = decided + self.decided
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


async def item_of(execution: WorkflowExecution) -> InboxItem | None:
    """A listed run as an inbox item (its memo decoded with the client's converter, codec included); None for a
    run whose ReinStatus is not a wait."""
    attributes = execution.typed_search_attributes
    status = attributes.get(SEARCH_KEYS["ReinStatus"])
    kind = next((k for k, s in STATUS_OF_KIND.items() if s == status), None)
    if kind is None:
        return None
    item = InboxItem(run_id=execution.id, kind=kind, agent=attributes.get(SEARCH_KEYS["ReinAgent"]) or "",  # type: ignore[arg-type]
                     tenant=attributes.get(SEARCH_KEYS["ReinTenant"]) or None, started=execution.start_time)
    try:
        raw = await execution.memo_value(WAITING_MEMO, None)
    except Exception:  # a memo this client cannot decode (another key): listed without details
        raw = None
    if isinstance(raw, dict):
        memo = WaitingMemo.model_validate(raw)
        item = item.model_copy(update={
            "kind": memo.kind, "thread": memo.thread, "calls": memo.calls, "more": memo.more, "said": memo.said,
            "question": memo.question, "since": datetime.fromisoformat(memo.since),
            "until": datetime.fromisoformat(memo.until) if memo.until else None})
    return item


def keep(item: InboxItem, *, tool: str | None, older_than: timedelta | None, now: datetime) -> bool:
    if tool is not None and tool not in item.tools:
        return False
    if older_than is not None:
        since = item.since or item.started
        if since is None or since > now - older_than:
            return False
    return True


class InboxClient:
    """ReinClient's inbox methods (its `client` and `_decide`)."""

    client: Client

    async def _decide(self, run_id: str, update: str, payload: dict[str, Any], *, served: bool = False,
                      wait: bool = True, update_id: str | None = None) -> Any:
        raise NotImplementedError

    async def inbox(self, *, agent: str | None = None, tenant: str | None = None, tool: str | None = None,
                    older_than: timedelta | None = None, kind: Kind | None = None, limit: int | None = None,
                    page_size: int = 1000) -> list[InboxItem]:
        """Every decision people owe, oldest wait first: waiting runs and threads of `agent` / `tenant` / `kind`
        (approval, question, retry), whose pending calls include `tool`, waiting for longer than `older_than`.
        One visibility query per page of `page_size` runs (no describe or query per run)."""
        now = datetime.now(UTC)
        items: list[InboxItem] = []
        listing = self.client.list_workflows(inbox_query(agent=agent, tenant=tenant, kind=kind), page_size=page_size)
        async for execution in listing:
            item = await item_of(execution)
            if item is not None and keep(item, tool=tool, older_than=older_than, now=now):
                items.append(item)
            if limit is not None and len(items) >= limit:
                break
        far = datetime.max.replace(tzinfo=UTC)
        return sorted(items, key=lambda i: i.since or i.started or far)

    async def decide_inbox(self, decision: Literal["approve", "deny"], items: list[InboxItem], *, tool: str | None = None,
                           reason: str = "", approver: str | None = None, tenant: str | None = None,
                           via: str = "inbox") -> list[BulkOutcome]:
        """Approve or deny the listed approvals (with `tool`: only that tool's calls), each through its run's
        validated update, at most BULK_CONCURRENCY at once. `tenant`: the tenant the caller was verified for
        (each run refuses a decision outside it). Per run: applied, refused (the run said why), queued (sent,
        no worker has taken it), not sent (no worker serves it), skipped (not an approval, or no details)."""
        who = self._approver(approver)  # type: ignore[attr-defined]
        gate = asyncio.Semaphore(BULK_CONCURRENCY)

        async def one(item: InboxItem) -> BulkOutcome:
            if item.kind != "approval":
                return BulkOutcome(item.run_id, "skipped", f"waits for a {item.kind}, not an approval")
            if not item.calls:
                return BulkOutcome(item.run_id, "skipped", f"no details (an earlier build): rein {decision} {item.run_id}")
            ids: list[str | None] = [c.id for c in item.calls if c.tool == tool] if tool is not None else [None]
            decided: list[str] = []
            async with gate:
                for call_id in ids:
                    payload = {"tool_call_id": call_id, "approver": who, "reason": reason, "tenant": tenant, "via": via}
                    outcome = await self.send_decision(item.run_id, APPROVE_UPDATE if decision == "approve" else DENY_UPDATE,
                                                       payload)
                    if outcome.outcome != "applied":
                        return outcome.with_decided(decided)
                    decided += outcome.decided
            return BulkOutcome(item.run_id, "applied", "", decided)

        return list(await asyncio.gather(*(one(i) for i in items)))

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
                          tool_call_id: str | None = None, text: str = "", reason: str = "",
                          approver: str | None = None, tenant: str | None = None, via: str = "inbox") -> BulkOutcome:
        """One decision from the inbox (its page): approve, deny, answer or retry, scoped to `tenant`."""
        who = self._approver(approver)  # type: ignore[attr-defined]
        if action in ("approve", "deny"):
            return await self.send_decision(run_id, APPROVE_UPDATE if action == "approve" else DENY_UPDATE, {
                "tool_call_id": tool_call_id, "approver": who, "reason": reason, "tenant": tenant, "via": via})
        if action == "answer":
            if not text.strip():
                raise InboxError("an answer needs its text")
            return await self.send_decision(run_id, ANSWER_UPDATE, {"text": text, "approver": who, "tenant": tenant,
                                                                    "via": via})
        return await self.send_decision(run_id, RETRY_UPDATE, {"tenant": tenant})


__all__ = ["BulkOutcome", "InboxClient", "InboxError", "inbox_query", "item_of"]

"""ReinClient.policy: add, remove, list and explain the rules (rein.core.policy) that decide tool calls for people.

A change is a validated update of the namespace's policy workflow (started with the first rule). An added rule
then decides at once the pending approvals it covers: they are found through visibility (the inbox) and each
gets the same validated decision a person would send, recorded as decided by that rule.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from rein.core.contract import APPROVE_UPDATE, DENY_UPDATE, SEARCH_KEYS
from rein.core.inbox import args_line
from rein.core.ir import ToolCall
from rein.core.policy import (
    ADD_RULE_UPDATE,
    POLICY_WORKFLOW_ID,
    POLICY_WORKFLOW_TYPE,
    REMOVE_RULE_UPDATE,
    PolicyError,
    PolicyState,
    Rule,
    Target,
    new_rule,
    verdict,
)
from rein.core.session import Session
from rein.durable.inbox import BulkOutcome
from rein.durable.policy_store import read_rules
from rein.temporal import history

if TYPE_CHECKING:
    from rein.client import ReinClient

POLICY_TIMEOUT = timedelta(seconds=30)
"""How long a change waits for a worker to take it (the policy workflow runs on the client's task queue)."""


@dataclass
class RuleChange:
    """What `add` or `remove` did: the rule, the policy's version after it, and what the added rule decided."""

    rule: Rule
    version: int
    decided: list[BulkOutcome] = field(default_factory=list)


@dataclass
class Explained:
    """One tool call of a run and who or what decided it."""

    call_id: str
    tool: str
    args: str
    decision: str
    """approved / denied / answered / ran / pending."""
    by: str
    """The person, `rule r3 (allow read_file)`, `timeout`, `the agent's permission`, or what would decide it now."""
    at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "tool": self.tool, "args": self.args, "decision": self.decision, "by": self.by,
                "at": self.at}


class Policy:
    """The namespace's rules, through a ReinClient (`client.policy`)."""

    def __init__(self, runs: ReinClient):
        self.runs = runs

    async def rules(self) -> PolicyState:
        """The rules and their version (read from the policy workflow's memo: no worker needed)."""
        return await read_rules(self.runs.client)

    async def list(self, *, tenant: str | None = None) -> builtins.list[Rule]:
        """The rules (with `tenant`: that tenant's only)."""
        rules = (await self.rules()).rules
        return [r for r in rules if tenant is None or r.tenant == tenant]

    async def add(self, effect: str, tool: str, *, agent: str | None = None, tenant: str | None = None,
                  args: dict[str, str] | None = None, scope: str = "always", run: str | None = None,
                  thread: str | None = None, by: str | None = None, reason: str = "", scope_tenant: str | None = None,
                  sweep: bool = True) -> RuleChange:
        """Add a rule; with `sweep`, decide at once the pending approvals it covers. `scope_tenant`: the tenant the
        caller was verified for (the policy refuses a rule of another). PolicyError: the rule does not parse or
        is refused (one line; nothing changed)."""
        if scope == "always" and (run or thread):
            scope = "run" if run else "thread"
        rule = new_rule({"effect": effect, "tool": tool, "agent": agent, "tenant": tenant, "args": args or {},
                         "scope": scope, "run": run, "thread": thread, "by": by or self.runs.client.identity,
                         "reason": reason})
        done = await self._change(ADD_RULE_UPDATE, {"rule": rule.model_dump(mode="json"), "tenant": scope_tenant})
        change = RuleChange(Rule.model_validate(done["rule"]), int(done["version"]))
        if sweep and change.rule.effect != "ask":
            change.decided = await self.sweep(change.rule, scope_tenant=scope_tenant)
        return change

    async def remove(self, rule_id: str, *, scope_tenant: str | None = None) -> RuleChange:
        done = await self._change(REMOVE_RULE_UPDATE, {"id": rule_id, "tenant": scope_tenant})
        return RuleChange(Rule.model_validate(done["rule"]), int(done["version"]))

    async def _change(self, update: str, payload: dict[str, Any]) -> dict[str, Any]:
        client = self.runs.client
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            POLICY_WORKFLOW_TYPE, id=POLICY_WORKFLOW_ID, task_queue=self.runs.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING, static_summary="rein's rules (rein policy list)")
        try:
            return await client.execute_update_with_start_workflow(update, payload, start_workflow_operation=start,
                                                                   rpc_timeout=POLICY_TIMEOUT)
        except WorkflowUpdateFailedError as err:
            raise PolicyError(getattr(err.cause, "message", None) or str(err.cause or err)) from None
        except RPCError as err:
            raise PolicyError(f"the policy could not be changed: {err.message} (does a rein worker serve task queue "
                              f"{self.runs.task_queue!r}?)") from None

    async def sweep(self, rule: Rule, *, scope_tenant: str | None = None) -> builtins.list[BulkOutcome]:
        """Decide the pending approvals `rule` covers now, each as the rules decide it (the most specific rule wins)."""
        rules = (await self.rules()).rules
        tenant = rule.tenant or scope_tenant
        items = await self.runs.inbox(agent=rule.agent, tenant=tenant, kind="approval",
                                      tool=None if rule.tool == "*" else rule.tool)
        if rule.run or rule.thread:
            items = [i for i in items if i.run_id == (rule.run or rule.thread)]
        outcomes: builtins.list[BulkOutcome] = []
        for item in items:
            try:
                session = Session.model_validate(await history.query(self.runs.client, item.run_id, "session"))
            except Exception as exc:  # ended meanwhile, or unreadable: said, the others go on
                outcomes.append(BulkOutcome(item.run_id, "refused", f"could not read its pending calls: {exc}"[:300]))
                continue
            decided = {d.tool_call_id for d in session.decisions}
            for call in session.pending_tool_calls:
                if call.id in decided:
                    continue
                v = verdict(rules, _target(call, item.agent, item.tenant, item.run_id))
                if v.rule != rule.id or v.effect not in ("allow", "deny"):
                    continue
                payload = {"tool_call_id": call.id, "approver": v.via, "reason": v.line, "tenant": scope_tenant,
                           "via": v.via, "rule": v.rule}
                outcome = await self.runs.send_decision(item.run_id, APPROVE_UPDATE if v.effect == "allow" else DENY_UPDATE,
                                                        payload)
                outcome.decided = outcome.decided or [call.id]
                outcomes.append(outcome)
        return outcomes

    async def explain(self, run_id: str) -> builtins.list[Explained]:
        """Each tool call of the run (this run of its chain) and who or what decided it; a pending one, what the
        rules say now."""
        session = Session.model_validate(await history.query(self.runs.client, run_id, "session"))
        description = await self.runs.handle(run_id).describe()
        attributes = description.typed_search_attributes
        agent = attributes.get(SEARCH_KEYS["ReinAgent"]) or ""
        tenant = attributes.get(SEARCH_KEYS["ReinTenant"]) or None
        rules = (await self.rules()).rules
        by_id = {r.id: r for r in rules}
        decisions = {d.tool_call_id: d for d in session.decisions}
        results = {m.tool_call_id: m.content or "" for m in session.messages if m.role == "tool"}
        pending = {c.id for c in session.pending_tool_calls}
        calls = [c for m in session.messages if m.role == "assistant" for c in m.tool_calls or ()]
        calls += [c for c in session.pending_tool_calls if c.id not in {x.id for x in calls}]
        rows = []
        for call in calls:
            line = args_line(call.arguments)
            d = decisions.get(call.id)
            if d is not None:
                kind = "answered" if d.answer is not None else "approved" if d.approved else "denied"
                who = d.approver or "someone"
                if d.via.startswith("rule "):
                    rule = by_id.get(d.via.removeprefix("rule "))
                    who = f"{d.via} ({rule.line() if rule else 'since removed'})"
                elif d.via:
                    who = f"{who} via {d.via}"
                rows.append(Explained(call.id, call.name, line, kind, who, d.at))
            elif call.id in pending:
                v = verdict(rules, _target(call, agent, tenant, run_id))
                now = f"rule {v.rule} ({v.line}) says {v.effect}" if v.rule else "no rule matches: a person decides"
                rows.append(Explained(call.id, call.name, line, "pending", now))
            elif results.get(call.id, "").startswith("Denied by policy"):
                rows.append(Explained(call.id, call.name, line, "denied", "the agent's permission (deny)"))
            else:
                rows.append(Explained(call.id, call.name, line, "ran", "without asking (the agent's permission)"))
        return rows


def _target(call: ToolCall, agent: str, tenant: str | None, run_id: str) -> Target:
    return Target(tool=call.name, args=call.arguments, agent=agent, tenant=tenant, run=run_id)


class PolicyClient:
    """ReinClient's `policy` (rules) attribute."""

    @property
    def policy(self) -> Policy:
        return Policy(self)  # type: ignore[arg-type]

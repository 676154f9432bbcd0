"""ReinClient.policy: add, remove, list and explain the rules (rein.core.policy) that decide tool calls for people.

A change is a validated update of the namespace's policy workflow (started with the first rule). An added rule
that allows or denies then reaches the runs waiting for approval through the policy workflow itself (its
activity tells them; each asks its rules again and decides what they now say): nothing depends on the client
that added it staying up.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from rein.core import machine
from rein.core.contract import SEARCH_KEYS
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
from rein.durable.policy_store import numbering_after_an_end, read_rules
from rein.durable.runs_client import RunsClient
from rein.temporal import history

POLICY_TIMEOUT = timedelta(seconds=30)
"""How long a change waits for a worker to take it (the policy workflow runs on the client's task queue)."""


@dataclass
class RuleChange:
    """What `add` or `remove` did: the rule and the policy's version after it. `decided` is empty since the runs
    decide themselves as the rule reaches them (kept for callers of earlier releases)."""

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
    reason: str = ""
    """The reason given with the decision (a person's, a rule's), as the model was told it."""

    def to_json(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "tool": self.tool, "args": self.args, "decision": self.decision, "by": self.by,
                "at": self.at, "reason": self.reason}


class Policy:
    """The namespace's rules, through a ReinClient (`client.policy`)."""

    def __init__(self, runs: RunsClient):
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
        """Add a rule. The runs waiting for approval that it may decide are told by the policy workflow and decide
        themselves (`sweep` is accepted and ignored). `scope_tenant`: the tenant the caller was verified for (the
        policy refuses a rule of another). `by`: who adds it (default REIN_IDENTITY, else USER@HOST). PolicyError:
        the rule does not parse or is refused (one line; nothing changed)."""
        from rein.durable.bound import person

        if scope == "always" and (run or thread):
            scope = "run" if run else "thread"
        rule = new_rule({"effect": effect, "tool": tool, "agent": agent, "tenant": tenant, "args": args or {},
                         "scope": scope, "run": run, "thread": thread, "by": by or person(), "reason": reason})
        done = await self._change(ADD_RULE_UPDATE, {"rule": rule.model_dump(mode="json"), "tenant": scope_tenant})
        return RuleChange(Rule.model_validate(done["rule"]), int(done["version"]))

    async def remove(self, rule_id: str, *, scope_tenant: str | None = None) -> RuleChange:
        done = await self._change(REMOVE_RULE_UPDATE, {"id": rule_id, "tenant": scope_tenant})
        return RuleChange(Rule.model_validate(done["rule"]), int(done["version"]))

    async def _change(self, update: str, payload: dict[str, Any]) -> dict[str, Any]:
        client = self.runs.client
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            POLICY_WORKFLOW_TYPE, await numbering_after_an_end(client), id=POLICY_WORKFLOW_ID, task_queue=self.runs.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING, static_summary="rein's rules (rein policy list)")
        try:
            return await client.execute_update_with_start_workflow(update, payload, start_workflow_operation=start,
                                                                   rpc_timeout=POLICY_TIMEOUT)
        except WorkflowUpdateFailedError as err:
            raise PolicyError(getattr(err.cause, "message", None) or str(err.cause or err)) from None
        except RPCError as err:
            raise PolicyError(f"the policy could not be changed: {err.message} (does a rein worker serve task queue "
                              f"{self.runs.task_queue!r}?)") from None

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
        results = {m.tool_call_id: m.content or "" for m in session.messages if m.role == "tool"}
        rows = []
        for call, d in machine.call_decisions(session):
            line = args_line(call.arguments)
            if d is not None:
                kind = "answered" if d.answer is not None else "approved" if d.approved else "denied"
                who = d.approver or "someone"
                if d.via.startswith("rule "):
                    rule = by_id.get(d.via.removeprefix("rule "))
                    who = f"{d.via} ({rule.line() if rule else 'since removed'})"
                elif d.via:
                    who = f"{who} via {d.via}"
                rows.append(Explained(call.id, call.name, line, kind, who, d.at, d.reason))
            elif call in session.pending_tool_calls:
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

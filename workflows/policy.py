"""ReinPolicy: the namespace's rules (rein.core.policy), one long-lived workflow (id `rein-policy`).

A rule is added or removed by a validated update (a rule that does not parse, a rule outside the sender's
tenant, an unknown id: refused to the caller, nothing changes). Every change raises the version and writes the
rules to the memo, where runs and clients read them with one describe (no worker needed). It continues as new
when its history grows, carrying the rules.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, Field, ValidationError

    from rein.core.errors import validation_text
    from rein.core.policy import (
        ADD_RULE_UPDATE,
        MAX_RULES,
        POLICY_MEMO,
        POLICY_WORKFLOW_TYPE,
        REMOVE_RULE_UPDATE,
        RULES_QUERY,
        PolicyState,
        Rule,
    )

CHANGES_PER_RUN = 200
"""Changes after which the workflow continues as new (each is an update and a memo upsert)."""


class RuleChange(BaseModel):
    """An update's payload: the rule to add (`rule`) or the id to remove (`id`); `tenant`: the tenant the sender
    verified (rein serve's sign-in), whose rules alone it may change (None: unscoped, an operator)."""

    rule: dict[str, Any] | None = None
    id: str = Field(default="", max_length=32)
    tenant: str | None = None


def _refuse(message: str) -> ApplicationError:
    return ApplicationError(message, type="PolicyRefused", non_retryable=True)


@workflow.defn(name=POLICY_WORKFLOW_TYPE)
class PolicyWorkflow:
    @workflow.init
    def __init__(self, state: Any = None) -> None:
        try:
            self.state = PolicyState.model_validate(state or {})
        except ValidationError:
            self.state = PolicyState()  # `run` says why
        self.changes = 0

    @workflow.run
    async def run(self, state: Any = None) -> None:
        if state is not None:
            try:
                PolicyState.model_validate(state)
            except ValidationError as err:
                raise _refuse(f"Invalid ReinPolicy input: {validation_text(err, 'state')}") from None
        self._publish()
        await workflow.wait_condition(
            lambda: self.changes >= CHANGES_PER_RUN or workflow.info().is_continue_as_new_suggested())
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(self.state.model_dump(mode="json"))

    def _publish(self) -> None:
        if workflow.memo_value(POLICY_MEMO, None) != self.state.model_dump(mode="json"):
            workflow.upsert_memo({POLICY_MEMO: self.state.model_dump(mode="json")})

    def _rule(self, change: RuleChange) -> Rule:
        try:
            rule = Rule.model_validate({**(change.rule or {}), "id": ""})
        except ValidationError as err:
            raise _refuse(f"the rule does not parse: {validation_text(err, '')}") from None
        if change.tenant is not None and rule.tenant != change.tenant:
            raise _refuse(f"a rule of tenant {change.tenant!r} must name that tenant (tenant={change.tenant})")
        return rule

    @workflow.update(name=ADD_RULE_UPDATE, description='Add a rule: {"rule": {"effect", "tool", "agent", "tenant", '
                                                       '"args", "scope", "run", "thread", "by", "reason"}, "tenant"}')
    def add(self, change: RuleChange) -> dict[str, Any]:
        rule = self._rule(change).model_copy(update={"id": f"r{self.state.next_id}", "at": workflow.now().isoformat()})
        self.state.next_id += 1
        self.state.rules.append(rule)
        return self._changed(rule)

    @add.validator
    def _check_add(self, change: RuleChange) -> None:
        if change.rule is None:
            raise _refuse("give the rule to add")
        self._rule(change)
        if len(self.state.rules) >= MAX_RULES:
            raise _refuse(f"the policy holds {MAX_RULES} rules already; remove some first")

    @workflow.update(name=REMOVE_RULE_UPDATE, description='Remove a rule: {"id", "tenant"}')
    def remove(self, change: RuleChange) -> dict[str, Any]:
        rule = next(r for r in self.state.rules if r.id == change.id)
        self.state.rules = [r for r in self.state.rules if r.id != change.id]
        return self._changed(rule)

    @remove.validator
    def _check_remove(self, change: RuleChange) -> None:
        rule = next((r for r in self.state.rules if r.id == change.id), None)
        if rule is None:
            raise _refuse(f"no rule with id {change.id[:40]!r} (rein policy list shows them)")
        if change.tenant is not None and rule.tenant != change.tenant:
            raise _refuse(f"rule {change.id} is not of tenant {change.tenant!r}")

    def _changed(self, rule: Rule) -> dict[str, Any]:
        self.state.version += 1
        self.changes += 1
        self._publish()
        return {"rule": rule.model_dump(mode="json"), "version": self.state.version}

    @workflow.query(name=RULES_QUERY, description="The rules and their version")
    def rules(self) -> dict[str, Any]:
        return self.state.model_dump(mode="json")

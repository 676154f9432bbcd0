"""ReinPolicy: the namespace's rules (rein.core.policy), one long-lived workflow (id `rein-policy`).

A rule is added or removed by a validated update (a rule that does not parse, a rule outside the sender's
tenant, an unknown id, rules that would pass MAX_RULES_BYTES: refused to the caller in one line, nothing changes).
Every change raises the version and writes the rules to the memo, where runs and clients read them with one describe
(no worker needed). A rule that allows or denies is then told to the waiting runs it may decide, by an activity that
Temporal retries until it is done (rein.rules_changed): no client has to stay up for it. It continues as new when
its history grows, carrying the rules and the runs not yet told. It always follows the current build (AUTO_UPGRADE,
whatever a worker's REIN_VERSIONING says): one workflow for the namespace must not stay pinned to a retired build.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, VersioningBehavior
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, Field, ValidationError

    from rein.core.errors import validation_text
    from rein.core.policy import (
        ADD_RULE_UPDATE,
        MAX_RULES,
        MAX_RULES_BYTES,
        POLICY_MEMO,
        POLICY_WORKFLOW_TYPE,
        REMOVE_RULE_UPDATE,
        RULES_CHANGED,
        RULES_QUERY,
        PolicyState,
        Rule,
        RulesChanged,
        rules_size,
    )

from rein.workflows.patches import PATCH_RULES_REACH_RUNS

CHANGES_PER_RUN = 200
"""Changes after which the workflow continues as new (each is an update and a memo upsert)."""
TELL_TIMEOUT = timedelta(minutes=10)
TELL_HEARTBEAT = timedelta(seconds=30)
TELL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                         maximum_interval=timedelta(minutes=1))
"""Telling the waiting runs is retried until it is done (no attempt limit): a rule must reach them."""


class RuleChange(BaseModel):
    """An update's payload: the rule to add (`rule`) or the id to remove (`id`); `tenant`: the tenant the sender
    verified (rein serve's sign-in), whose rules alone it may change (None: unscoped, an operator)."""

    rule: dict[str, Any] | None = None
    id: str = Field(default="", max_length=32)
    tenant: str | None = None


def _refuse(message: str) -> ApplicationError:
    return ApplicationError(message, type="PolicyRefused", non_retryable=True)


class Carried(PolicyState):
    """The input a continuation takes: the rules, and the changes whose waiting runs are not told yet."""

    untold: list[RulesChanged] = Field(default_factory=list, exclude_if=lambda v: not v)


@workflow.defn(name=POLICY_WORKFLOW_TYPE)
class PolicyWorkflow:
    """ReinPolicy on an unversioned worker (VersionedPolicyWorkflow on a versioned one)."""

    @workflow.init
    def __init__(self, state: Any = None) -> None:
        try:
            carried = Carried.model_validate(state or {})
        except ValidationError:
            carried = Carried()  # `run` says why
        self.state = PolicyState.model_validate(carried.model_dump(exclude={"untold"}))
        self.untold = carried.untold
        """Added rules whose waiting runs are still to be told (RULES_CHANGED), oldest first."""
        self.changes = 0

    @workflow.run
    async def run(self, state: Any = None) -> None:
        if state is not None:
            try:
                Carried.model_validate(state)
            except ValidationError as err:
                raise _refuse(f"Invalid ReinPolicy input: {validation_text(err, 'state')}") from None
        self._publish()
        while True:
            await workflow.wait_condition(
                lambda: bool(self.untold) or self.changes >= CHANGES_PER_RUN
                or workflow.info().is_continue_as_new_suggested())
            if not self.untold:
                break
            await workflow.execute_activity(RULES_CHANGED, self.untold[0], start_to_close_timeout=TELL_TIMEOUT,
                                            heartbeat_timeout=TELL_HEARTBEAT, retry_policy=TELL_RETRY,
                                            summary=f"tell the waiting runs: rule {self.untold[0].rule}")
            self.untold.pop(0)
        await workflow.wait_condition(workflow.all_handlers_finished)
        carried = Carried(**self.state.model_dump(), untold=self.untold)
        workflow.continue_as_new(carried.model_dump(mode="json"))

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
        changed = self._changed(rule)
        if rule.effect != "ask" and workflow.patched(PATCH_RULES_REACH_RUNS):
            self.untold.append(RulesChanged.of(rule, self.state.version))
        return changed

    @add.validator
    def _check_add(self, change: RuleChange) -> None:
        if change.rule is None:
            raise _refuse("give the rule to add")
        rule = self._rule(change)
        if len(self.state.rules) >= MAX_RULES:
            raise _refuse(f"the policy holds {MAX_RULES} rules already; remove some first")
        size = rules_size(self.state.model_copy(update={"rules": [*self.state.rules, rule]}))
        if size > MAX_RULES_BYTES:
            raise _refuse(f"the rules would take {size:,} bytes, over the limit of {MAX_RULES_BYTES:,}: "
                          "remove some first (rein policy remove ID)")

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


@workflow.defn(name=POLICY_WORKFLOW_TYPE, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class VersionedPolicyWorkflow(PolicyWorkflow):
    """ReinPolicy on a versioned worker: AUTO_UPGRADE whatever the worker's default (REIN_VERSIONING=pinned too),
    so the namespace's one rules workflow always moves to the current build."""

    @workflow.init
    def __init__(self, state: Any = None) -> None:
        super().__init__(state)

    @workflow.run
    async def run(self, state: Any = None) -> None:
        await super().run(state)

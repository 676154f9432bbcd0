"""Rules that decide tool calls for people: allow, ask or deny, by agent, tenant, tool and argument patterns.

Pure data and matching (no I/O): the policy workflow keeps the rules (rein.workflows.policy), a run asks
them before it waits for approval (rein.activities.policy), clients explain and sweep with them. The most
specific rule that matches a call decides it; at equal specificity deny beats ask beats allow. A rule never
loosens what the agent's own definition forbids (`effective`).
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

Effect = Literal["allow", "ask", "deny"]
Scope = Literal["run", "thread", "always"]

POLICY_WORKFLOW_TYPE = "ReinPolicy"
POLICY_WORKFLOW_ID = "rein-policy"
"""One policy workflow per namespace holds the rules (its memo carries them to readers, no worker needed)."""
POLICY_MEMO = "rein.policy"
ADD_RULE_UPDATE = "rein.policy.add"
REMOVE_RULE_UPDATE = "rein.policy.remove"
RULES_QUERY = "rein.policy.rules"
POLICY_CHECK = "rein.policy_check"
"""The activity a run asks before it waits for approval: the verdicts of the rules on its pending calls."""
RULES_CHANGED = "rein.rules_changed"
"""The policy workflow's activity after a rule is added: it tells every waiting run the rule may decide (RULES_SIGNAL)."""
RULES_SIGNAL = "rein.rules"
"""What a waiting run is told when the rules changed: `{"version"}`; it asks its rules again (its own check)."""
MAX_RULES_BYTES = 256 * 1024
"""The rules' size at most, as JSON (bytes): far below Temporal's 2 MB payload limit, so the memo that publishes
them and the input that carries them over continue-as-new always fit."""

_RANK = {"allow": 0, "ask": 1, "deny": 2}
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,99}$")
MAX_RULES = 1000


class PolicyError(ValueError):
    """A rule that does not parse, or a change the policy refuses (one line, said to the caller)."""


class Rule(BaseModel):
    """One rule. `tool` may be `*` (every tool); `args` maps an argument name to a glob its value must match
    (`*` `?` `[...]`, against the value's text: a string as it is, anything else as JSON)."""

    id: str = Field(default="", max_length=32)
    effect: Effect
    tool: str = Field(min_length=1, max_length=200)
    agent: str | None = Field(default=None, min_length=1, max_length=256)
    tenant: str | None = Field(default=None, min_length=1, max_length=256)
    args: dict[str, str] = Field(default_factory=dict, max_length=20)
    scope: Scope = "always"
    run: str | None = Field(default=None, min_length=1, max_length=256)
    """scope "run": the workflow id of the run it is for."""
    thread: str | None = Field(default=None, min_length=1, max_length=256)
    """scope "thread": the thread id (its workflow id) it is for."""
    by: str = Field(default="", max_length=256)
    at: str = Field(default="", max_length=40)
    reason: str = Field(default="", max_length=500)

    @field_validator("args")
    @classmethod
    def _keys(cls, args: dict[str, str]) -> dict[str, str]:
        for key, glob in args.items():
            if not _KEY.match(key):
                raise ValueError(f"argument name {key[:60]!r} is not a name (letters, digits, _ . -)")
            if not glob or len(glob) > 500:
                raise ValueError(f"the pattern for {key!r} must be 1 to 500 characters")
        return args

    @model_validator(mode="after")
    def _scoped(self) -> Rule:
        if self.scope == "run" and not self.run:
            raise ValueError("scope run needs the run's id (--run ID)")
        if self.scope == "thread" and not self.thread:
            raise ValueError("scope thread needs the thread's id (--thread ID)")
        if self.scope == "always" and (self.run or self.thread):
            raise ValueError("a rule for one run or thread has scope run or thread")
        if self.run and self.thread:
            raise ValueError("a rule is for a run or for a thread, not both")
        return self

    @property
    def specificity(self) -> int:
        """How narrow the rule is: each constraint it sets counts (a run or thread counts most)."""
        return ((self.tool != "*") + (self.agent is not None) + (self.tenant is not None) + len(self.args)
                + 4 * (self.run is not None or self.thread is not None))

    def matches(self, call: Target) -> bool:
        if self.tool != "*" and self.tool != call.tool:
            return False
        if self.agent is not None and self.agent != call.agent:
            return False
        if self.tenant is not None and self.tenant != call.tenant:
            return False
        if (self.run or self.thread) and (self.run or self.thread) != call.run:
            return False
        for key, glob in self.args.items():
            if key not in call.args or not fnmatch.fnmatchcase(_text(call.args[key]), glob):
                return False
        return True

    def line(self) -> str:
        """The rule as one line (`rein policy list`, explanations)."""
        parts = [self.effect, self.tool]
        parts += [f"agent={self.agent}"] if self.agent else []
        parts += [f"tenant={self.tenant}"] if self.tenant else []
        parts += [f"{k}={v}" for k, v in self.args.items()]
        parts += [f"run={self.run}"] if self.run else [f"thread={self.thread}"] if self.thread else []
        return " ".join(parts)


class Target(BaseModel):
    """A tool call as rules see it: the tool, its arguments, and the run's agent, tenant and workflow id."""

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    agent: str = ""
    tenant: str | None = None
    run: str = ""


class Verdict(BaseModel):
    """What the rules say of one call: the effect and the rule that decided (None: no rule matched)."""

    call_id: str = ""
    effect: Effect | None = None
    rule: str = ""
    line: str = ""
    """The deciding rule as one line."""
    held: str = Field(default="", exclude_if=lambda v: not v)
    """Why the agent's own definition keeps the call asking a person although a rule allows it."""
    reason: str = Field(default="", exclude_if=lambda v: not v)
    """The person's reason given with the rule (recorded with its decisions, told to the model with a denial)."""
    version: int = Field(default=0, exclude_if=lambda v: not v)
    """The version of the rules the verdict was read from."""

    @property
    def via(self) -> str:
        return f"rule {self.rule}" if self.rule else ""


class PolicyState(BaseModel):
    """The rules and their version (it grows by one with every change)."""

    version: int = 0
    next_id: int = 1
    rules: list[Rule] = Field(default_factory=list)


class RulesChanged(BaseModel):
    """RULES_CHANGED's input: the policy's version after the change, and whose waiting runs the added rule may
    decide (its agent, tenant, run or thread; None: every run)."""

    version: int
    rule: str = ""
    agent: str | None = None
    tenant: str | None = None
    run: str | None = None

    @classmethod
    def of(cls, rule: Rule, version: int) -> RulesChanged:
        return cls(version=version, rule=rule.id, agent=rule.agent, tenant=rule.tenant, run=rule.run or rule.thread)


class PolicyCheck(BaseModel):
    """The policy_check activity's input: a run's calls that wait for approval."""

    calls: list[dict[str, Any]]
    """Each {"id", "name", "arguments"}."""
    agent: str = ""
    tenant: str | None = None
    run: str = ""


def rules_size(state: PolicyState) -> int:
    """The rules' size as the memo and continue-as-new carry them (JSON bytes)."""
    return len(json.dumps(state.model_dump(mode="json"), separators=(",", ":")).encode())


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def verdict(rules: list[Rule], call: Target) -> Verdict:
    """The rule that decides `call`: the most specific match; at equal specificity deny, then ask, then allow."""
    best: Rule | None = None
    for rule in rules:
        if not rule.matches(call):
            continue
        if best is None or (rule.specificity, _RANK[rule.effect]) > (best.specificity, _RANK[best.effect]):
            best = rule
    return Verdict() if best is None else Verdict(effect=best.effect, rule=best.id, line=best.line(), reason=best.reason)


def effective(v: Verdict, *, always_asks: bool, approvers: list[str] | None) -> Verdict:
    """`v` as the agent's own definition lets it act: an allow never approves a tool marked as always asking
    (`requires_approval`) nor a run whose approvers are named (a rule is nobody of them). Deny and ask stand."""
    if v.effect != "allow":
        return v
    if always_asks:
        return v.model_copy(update={"effect": "ask", "held": "the agent asks a person for every call of this tool"})
    if approvers is not None:
        return v.model_copy(update={"effect": "ask", "held": "only the run's named approvers may approve"})
    return v


def parse_args(pairs: list[str]) -> dict[str, str]:
    """`--arg KEY=GLOB` options as a mapping; PolicyError names the one that does not parse."""
    found: dict[str, str] = {}
    for pair in pairs:
        key, eq, glob = pair.partition("=")
        key = key.strip()
        if not eq or not key or not glob:
            raise PolicyError(f"--arg {pair!r} does not parse: expected KEY=GLOB, e.g. path=/tmp/*")
        if not _KEY.match(key):
            raise PolicyError(f"--arg {pair!r}: {key!r} is not an argument name (letters, digits, _ . -)")
        found[key] = glob
    return found


def new_rule(raw: dict[str, Any]) -> Rule:
    """A Rule from a client's fields, or PolicyError with the first thing wrong, in one line."""
    from pydantic import ValidationError

    from rein.core.errors import validation_text

    try:
        return Rule.model_validate(raw)
    except ValidationError as exc:
        raise PolicyError(f"the rule does not parse: {validation_text(exc, '')}") from None

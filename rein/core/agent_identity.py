"""Agent identity: a fingerprint of an agent's definition, and how a run in flight takes a changed one.

A run records the fingerprint of the definition it started with (AgentDescription.version, the
search attribute ReinAgentVersion) and sends it with every model and tool call. A worker whose
definition differs refuses the call (error type AGENT_CHANGED, nothing run) and hands over its
description; the run records a Step saying what changed and follows `adopt`'s rule from then on.

Pure (no I/O): the workflow imports `changes` and `adopt`; the worker computes `fingerprint`.
"""

from __future__ import annotations

import hashlib
import json

from rein.core.config import LoopConfig
from rein.core.contract import AgentDescription, ToolInfo

VERSION_CHARS = 12
"""Hex characters of the fingerprint: 48 bits tell two definitions of one agent apart; each model
and tool call carries it, so it is kept short."""

_PERMISSION_ORDER = {"allow": 0, "ask": 1, "deny": 2}


def fingerprint(description: AgentDescription) -> str:
    """The definition's fingerprint: model, system prompt, tool specs and flags, config, extensions.
    What the server has (search attributes, payload limit) is the worker's, not the agent's: left out."""
    data = description.model_dump(mode="json", exclude={"search_attributes", "max_payload_bytes", "version"})
    data["tools"] = sorted(data["tools"], key=lambda t: t["spec"]["name"])  # an MCP server may list them in any order
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:VERSION_CHARS]


def changes(old: AgentDescription, new: AgentDescription) -> list[str]:
    """What differs between two definitions of an agent, in words for a Step and the UI."""
    said: list[str] = []
    if old.model != new.model:
        said.append(f"model {old.model} → {new.model}")
    if old.system != new.system:
        said.append("system prompt changed")
    if old.config.permission != new.config.permission:
        said.append(f"permission {old.config.permission} → {new.config.permission}")
    if old.config.model_dump(exclude={"permission"}) != new.config.model_dump(exclude={"permission"}):
        said.append("config changed")
    before, after = _tools(old), _tools(new)
    for name in sorted(before.keys() - after.keys()):
        said.append(f"tool '{name}' removed")
    for name in sorted(after.keys() - before.keys()):
        said.append(f"tool '{name}' added")
    for name in sorted(before.keys() & after.keys()):
        was, now = before[name], after[name]
        if not was.same_spec(now):
            said.append(f"tool '{name}' changed its parameters or description")
        if was.requires_approval != now.requires_approval:
            said.append(f"tool '{name}' {'now' if now.requires_approval else 'no longer'} requires approval")
        how = {"spec", "spec_digest", "requires_approval"}
        if was.model_dump(exclude=how) != now.model_dump(exclude=how):
            said.append(f"tool '{name}' changed how it runs")
    if (old.middleware, old.compaction) != (new.middleware, new.compaction):
        said.append("middleware or compaction changed")
    return said or ["definition changed"]


def stricter_permission(a: str, b: str) -> str:
    return a if _PERMISSION_ORDER.get(a, 0) >= _PERMISSION_ORDER.get(b, 0) else b


def adopt(
    old: AgentDescription, new: AgentDescription, run_config: LoopConfig, approval_tools: frozenset[str]
) -> tuple[AgentDescription, LoopConfig, frozenset[str]]:
    """The description, config and approval tools a run follows after its agent changed to `new`.

    The new definition's model, prompt and tools apply from the next step. Its approval rules apply
    where they are stricter: a tool that now requires approval asks, a permission moved to `ask` or
    `deny` holds. Looser rules (a flag dropped, `ask` back to `allow`) reach runs in flight only when
    the new definition opts in (`Agent(in_flight="current")`); otherwise the run keeps its own.
    """
    new_approval = frozenset(t.spec.name for t in new.tools if t.requires_approval)
    if new.in_flight == "current":
        return new, run_config.model_copy(update={"permission": new.config.permission}), new_approval
    permission = stricter_permission(run_config.permission, new.config.permission)
    known = {t.spec.name for t in new.tools}
    return new, run_config.model_copy(update={"permission": permission}), new_approval | (approval_tools & known)


def call_changed(old: AgentDescription, new: AgentDescription, tool: str) -> str | None:
    """Why a pending call to `tool` can no longer run as the model made it (None: it still can)."""
    was, now = _tools(old).get(tool), _tools(new).get(tool)
    if now is None:
        return f"tool '{tool}' was removed"
    if was is not None and not was.same_spec(now):
        return f"tool '{tool}' changed its parameters"
    return None


def _tools(description: AgentDescription) -> dict[str, ToolInfo]:
    return {t.spec.name: t for t in description.tools}

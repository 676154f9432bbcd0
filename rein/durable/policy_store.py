"""Reading the rules where they live: the running policy workflow's memo (rein.workflows.policy), read with one
describe, no worker needed; parsed rules are kept per version, so a reader that sees the same version parses nothing."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from rein.core.policy import POLICY_MEMO, POLICY_WORKFLOW_ID, PolicyState

_parsed: dict[tuple[str, str, int], PolicyState] = {}
"""(namespace, the policy workflow's run, version) -> the rules of that version (a few kept). The run is part of the
key: a policy workflow terminated and started again counts its versions from 1 again."""


async def read_rules(client: Client) -> PolicyState:
    """The namespace's rules as they are now. No policy workflow running: none. A terminated one's memo still
    lists its rules, but they are gone: the next rule added starts a new one with none, and its versions count
    from 1 again (a waiting run that had read the old ones would wait for a version it already saw)."""
    try:
        description = await client.get_workflow_handle(POLICY_WORKFLOW_ID).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return PolicyState()
        raise
    if description.status != WorkflowExecutionStatus.RUNNING:
        return PolicyState()
    raw: Any = await description.memo_value(POLICY_MEMO, None)
    if not isinstance(raw, dict):
        return PolicyState()
    key = (client.namespace, description.run_id, int(raw.get("version") or 0))
    state = _parsed.get(key)
    if state is None:
        state = PolicyState.model_validate(raw)
        if len(_parsed) > 16:
            _parsed.clear()
        _parsed[key] = state
    return state


async def numbering_after_an_end(client: Client) -> dict[str, int] | None:
    """What a new policy workflow starts from when the last one ended (an operator terminated it): no rules, but
    versions and rule ids going on from its last ones, so a run that read the old version hears the next change
    and `rule r3` in a history names one rule only. None: none ended (the update goes to the running one, or the
    first one starts at version 1)."""
    try:
        description = await client.get_workflow_handle(POLICY_WORKFLOW_ID).describe()
    except RPCError:
        return None
    raw: Any = await description.memo_value(POLICY_MEMO, None)
    if description.status == WorkflowExecutionStatus.RUNNING or not isinstance(raw, dict):
        return None
    return {"version": int(raw.get("version") or 0), "next_id": int(raw.get("next_id") or 1)}

"""Finding runs: the visibility query behind `rein list`, and the error for an id no run has.

Beneath rein.client: forks and what-ifs select runs with them as `rein list` does (rein.ops.runs re-exports them).
"""

from __future__ import annotations

from temporalio.service import RPCError, RPCStatusCode

from rein.core.contract import WORKFLOW_TYPE


class RunNotFound(LookupError):
    """No run with this id in the namespace."""


def is_not_found(err: BaseException) -> bool:
    return isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND


def list_query(
    status: str | None = None, agent: str | None = None, fork_of: str | None = None, tenant: str | None = None,
    schedule: str | None = None, eval_of: str | None = None, include_evals: bool = True,
) -> str:
    """The visibility query behind `rein list`; waiting statuses include only running runs. Without
    `include_evals` (nor `eval_of`), no what-if run of `rein eval` (ReinEvalOf)."""
    clauses = [f'WorkflowType="{WORKFLOW_TYPE}"']
    if not include_evals and not eval_of:
        clauses.append("ReinEvalOf IS NULL")
    if schedule:
        clauses.append(f'TemporalScheduledById="{_quote(schedule)}"')  # Temporal marks each scheduled start
    if agent:
        clauses.append(f'ReinAgent="{_quote(agent)}"')
    if fork_of:
        clauses.append(f'ReinForkOf="{_quote(fork_of)}"')
    if eval_of:
        clauses.append(f'ReinEvalOf="{_quote(eval_of)}"')
    if tenant:
        clauses.append(f'ReinTenant="{_quote(tenant)}"')
    if status == "failed":
        # A run can fail before its workflow code records ReinStatus (or be terminated).
        clauses.append('(ReinStatus="failed" OR ExecutionStatus="Failed" OR ExecutionStatus="Terminated" '
                       'OR ExecutionStatus="TimedOut")')
    elif status == "cancelled":
        clauses.append('(ReinStatus="cancelled" OR ExecutionStatus="Canceled")')
    elif status in ("running", "waiting_approval", "waiting_input", "waiting_retry"):
        clauses.append(f'ReinStatus="{status}" AND ExecutionStatus="Running"')
    elif status:
        clauses.append(f'ReinStatus="{_quote(status)}"')
    return " AND ".join(clauses)


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')

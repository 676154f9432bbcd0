"""LoopConfig: how a run is allowed to go (breakers and tool permission).

Part of the agent blueprint, never of the serialisable Session.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class LoopConfig(BaseModel):
    max_iterations: int = 50
    max_tokens: int | None = 200_000
    max_cost_usd: float | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    """Stop with stop_reason `budget` once the run's cost (its own model calls and, on the durable
    engine, every child agent's) reaches this many US dollars. Costs come from LiteLLM's price
    table; see docs/fleet.md for models it does not know. Left out of dumps when unset, so agents
    without a budget keep their fingerprint (rein.core.agent_identity) and recorded shape."""
    thread_max_tokens: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    thread_max_cost_usd: float | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    """Threads (rein.core.threads): what the whole conversation may spend, over all its turns (the budgets
    above are each turn's). Once spent, the turn under way stops with stop_reason `budget` and the thread
    refuses new messages. Left out of dumps when unset (fingerprints)."""
    timeout_s: float | None = 120
    detect_loops: bool = True
    repeat_threshold: int = 3
    permission: Literal["allow", "ask", "deny"] = "allow"
    approval_timeout_s: float | None = None
    """How long a run waits for a human decision; None waits forever. A timeout is a denial."""
    model_attempts: int = Field(default=3, ge=1)
    """Durable engine: attempts per model call on transient errors before an `error` interrupt."""
    model_timeout_s: float = Field(default=300, gt=0)
    """Durable engine: how long one model-call attempt may take."""
    model_retry_interval_s: float = Field(default=1, gt=0, exclude_if=lambda v: v == 1)
    """Durable engine: the wait before a failed model call's next attempt, doubling per attempt up
    to 30 s; a vendor's Retry-After replaces it for that attempt. Left out of dumps at its default."""
    heartbeat_timeout_s: float = Field(default=20, gt=0, exclude_if=lambda v: v == 20)
    """Durable engine: how long a model or tool call may go without a heartbeat before Temporal
    retries it, on another worker if its worker died (workers beat four times per timeout, at
    most every 5 s). Lower it when a lost call should move sooner; a tool's own shorter
    `timeout_s` caps it. Left out of dumps at its default (fingerprints and recorded shapes)."""
    approvers: list[str] | None = None
    """Durable engine: who may approve, deny or answer (None: anyone). Names are asserted by the
    caller: this filters mistakes and well-behaved tooling; real access control is Temporal's."""
    output_retries: int = Field(default=1, ge=0)
    """Agents with an output type: invalid final answers sent back to the model before the run
    ends with stop_reason `invalid_output`."""

"""LoopConfig: how a run is allowed to go (breakers and tool permission).

Part of the agent blueprint, never of the serialisable Session.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class LoopConfig(BaseModel):
    max_iterations: int = 50
    max_tokens: int | None = 200_000
    timeout_s: float | None = 120
    detect_loops: bool = True
    repeat_threshold: int = 3
    permission: Literal["allow", "ask", "deny"] = "allow"
    approval_timeout_s: float | None = None
    """How long a run waits for a human decision; None waits forever. A timeout is a denial."""

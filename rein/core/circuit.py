"""The circuit breakers, as pure functions of the Session and elapsed time."""

from __future__ import annotations

import json
import time

from rein.core.config import LoopConfig
from rein.core.ir import ToolCall
from rein.core.session import Session


def signature(tool_calls: list[ToolCall]) -> str:
    """Identity of a tool batch for loop detection: names and arguments, not ids."""
    return json.dumps(
        [{"name": tc.name, "arguments": tc.arguments} for tc in tool_calls],
        sort_keys=True,
        ensure_ascii=False,
    )


def tripped_breaker(session: Session, config: LoopConfig, elapsed_s: float) -> str | None:
    """The first breaker that trips, in the fixed order iterations, tokens, cost, timeout, loops."""
    if session.iteration >= config.max_iterations:
        return "max_iterations"
    if config.max_tokens is not None and session.usage.total_tokens >= config.max_tokens:
        return "max_tokens"
    if over_budget(session, config):
        return "budget"
    if config.timeout_s is not None and elapsed_s >= config.timeout_s:
        return "timeout"
    if config.detect_loops and session.repeat_count >= config.repeat_threshold:
        return "loop_detected"
    return None


def over_budget(session: Session, config: LoopConfig) -> bool:
    """The run (with its child agents) has spent `max_cost_usd`; a run with no known cost never has."""
    spent = session.usage.cost_usd
    return config.max_cost_usd is not None and spent is not None and spent >= config.max_cost_usd


def check_circuit(session: Session, config: LoopConfig, start_time: float) -> str | None:
    """rein-agent's form: `start_time` is a `time.monotonic()` reading."""
    return tripped_breaker(session, config, time.monotonic() - start_time)

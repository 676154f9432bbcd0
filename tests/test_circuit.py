"""rein.core.circuit: the loop signature and the breakers' exact boundaries (see docs/mutation.md)."""

from __future__ import annotations

import json
import time

import pytest

from rein.core.circuit import check_circuit, signature, tripped_breaker
from rein.core.config import LoopConfig
from rein.core.ir import ToolCall, Usage
from rein.core.session import Session


def test_signature_is_the_batch_of_names_and_arguments_not_ids():
    calls = [ToolCall(id="1", name="weather", arguments={"city": "Zürich", "days": 2})]
    # A Session carries last_signature across turns, resumes and continue-as-new, so its form
    # is stored state: readable JSON of names and arguments, keys sorted, text as written.
    assert signature(calls) == '[{"arguments": {"city": "Zürich", "days": 2}, "name": "weather"}]'
    assert json.loads(signature(calls)) == [{"name": "weather", "arguments": {"city": "Zürich", "days": 2}}]
    same = [ToolCall(id="2", name="weather", arguments={"days": 2, "city": "Zürich"})]
    assert signature(same) == signature(calls)
    assert signature([ToolCall(id="1", name="weather", arguments={"city": "Bern", "days": 2})]) != signature(calls)
    assert signature([ToolCall(id="1", name="forecast", arguments={"city": "Zürich", "days": 2})]) != signature(calls)


@pytest.mark.parametrize(
    ("session", "config", "elapsed", "reason"),
    [
        (Session(iteration=4), LoopConfig(max_iterations=5), 0, None),
        (Session(iteration=5), LoopConfig(max_iterations=5), 0, "max_iterations"),
        (Session(usage=Usage(input_tokens=99)), LoopConfig(max_tokens=100), 0, None),
        (Session(usage=Usage(input_tokens=60, output_tokens=40)), LoopConfig(max_tokens=100), 0, "max_tokens"),
        (Session(), LoopConfig(timeout_s=10), 9.99, None),
        (Session(), LoopConfig(timeout_s=10), 10, "timeout"),
        (Session(repeat_count=2), LoopConfig(repeat_threshold=3), 0, None),
        (Session(repeat_count=3), LoopConfig(repeat_threshold=3), 0, "loop_detected"),
        (Session(repeat_count=9), LoopConfig(repeat_threshold=3, detect_loops=False), 0, None),
        (Session(usage=Usage(input_tokens=10**9)), LoopConfig(max_tokens=None, timeout_s=None), 10**9, None),
    ],
)
def test_each_breaker_trips_exactly_at_its_limit(session, config, elapsed, reason):
    assert tripped_breaker(session, config, elapsed) == reason


def test_check_circuit_measures_elapsed_time_from_a_monotonic_start():
    config = LoopConfig(timeout_s=1000)
    assert check_circuit(Session(), config, time.monotonic()) is None
    assert check_circuit(Session(), config, time.monotonic() - 2000) == "timeout"
    assert check_circuit(Session(iteration=50), config, time.monotonic()) == "max_iterations"

"""rein's logger as the reference names it: silent until enabled, text or JSON lines, and never the
conversation's text; disabled again on request."""

from __future__ import annotations

import io
import json
import logging

import rein
from rein import Agent, LoopConfig, MockProvider


def _run(prompt: str) -> None:
    Agent(provider=MockProvider(["the secret answer"]), engine="local", config=LoopConfig(), name="logged").run(prompt)


def test_json_lines_name_the_run_but_not_its_text() -> None:
    stream = io.StringIO()
    rein.enable_logging("INFO", json=True, stream=stream)
    try:
        _run("a secret prompt")
    finally:
        rein.disable_logging()
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any(r["msg"] == "run finished" and r["stop_reason"] == "done" for r in records), records
    assert "secret" not in stream.getvalue()
    assert logging.getLogger("rein").propagate


def test_silent_before_enabled_and_after_disabled() -> None:
    stream = io.StringIO()
    rein.enable_logging("INFO", stream=stream)
    rein.disable_logging()
    _run("hello")
    assert stream.getvalue() == ""
    rein.enable_logging("WARNING", stream=stream)
    try:
        _run("hello")  # a run that finishes logs at INFO: below this level
    finally:
        rein.disable_logging()
    assert stream.getvalue() == ""


def test_the_streamable_http_name_is_the_http_server() -> None:
    assert rein.MCPServerStreamableHTTP is rein.MCPServerHTTP

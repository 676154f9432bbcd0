"""The in-process extension points (docs/extensions.md): entry-point plugins, session stores and the
local runtime, through their public names (rein.plugins, rein.blueprint.store, rein.blueprint.runtime)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rein import Agent, LoopConfig, MockProvider, ToolCall
from rein.blueprint.runtime import LocalRuntime
from rein.blueprint.store import FileSessionStore, MemorySessionStore, SessionStore
from rein.blueprint.tools import ToolRegistry
from rein.core.ir import Message
from rein.core.session import Session
from rein.plugins import load_plugins, plugin_names


def _install(site: Path, group: str) -> None:
    """A distribution on sys.path that publishes two entry points in `group`: one loads, one cannot."""
    info = site / "rein_test_ext-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rein-test-ext\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\ngood = json:dumps\nbroken = rein_no_such_module:thing\n")


def test_plugins_load_by_entry_point_and_a_broken_one_is_its_exception(tmp_path, monkeypatch):
    group = "rein.plugins.test"
    _install(tmp_path, group)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert sorted(plugin_names(group)) == ["broken", "good"]
    loaded = load_plugins(group)
    assert loaded["good"] is json.dumps
    assert isinstance(loaded["broken"], ModuleNotFoundError)  # returned, not raised
    assert load_plugins("rein.plugins.nobody") == {} and plugin_names("rein.plugins.nobody") == []


def _mid_run() -> Session:
    session = Session(messages=[Message(role="user", content="1+2?")])
    session.iteration = 2
    session.usage.input_tokens = 7
    return session


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_stores_round_trip_a_session_and_hand_out_copies(kind, tmp_path):
    store: SessionStore = MemorySessionStore() if kind == "memory" else FileSessionStore(tmp_path / "sessions")
    assert isinstance(store, SessionStore)
    assert store.load("c1") is None and "c1" not in store
    session = _mid_run()
    store.save("c1", session)
    loaded = store.load("c1")
    assert loaded == session and loaded is not session and "c1" in store
    loaded.messages.append(Message(role="assistant", content="3"))  # a copy: the stored one is unchanged
    assert store.load("c1") == session
    store.delete("c1")
    assert store.load("c1") is None


def test_file_store_refuses_ids_that_are_not_plain_file_names(tmp_path):
    store = FileSessionStore(tmp_path)
    for bad in ("", ".", "..", "a/b", "..\\x"):
        with pytest.raises(ValueError, match="plain file name"):
            store.save(bad, _mid_run())


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_local_runtime_runs_a_batch_in_order_and_deny_runs_nothing():
    registry = ToolRegistry([add])
    calls = [ToolCall(id=f"c{i}", name="add", arguments={"a": i, "b": 1}) for i in range(3)]
    results = asyncio.run(LocalRuntime().execute_all(calls, registry, "allow"))
    assert [(r.tool_call_id, r.content, r.is_error) for r in results] == [("c0", "1", False), ("c1", "2", False), ("c2", "3", False)]
    denied = asyncio.run(LocalRuntime().execute_all(calls[:1], registry, "deny"))
    assert denied[0].is_error and "add" in denied[0].content


def test_a_chat_keeps_its_conversation_in_a_store(tmp_path):
    store = FileSessionStore(tmp_path)
    agent = Agent(provider=MockProvider(["hello", "again"]), engine="local", config=LoopConfig())
    first = agent.chat(session=store.load("user-1"))
    store.save("user-1", first.send("hi").session)
    second = agent.chat(session=store.load("user-1"))
    result = second.send("and now?")
    assert [m.content for m in result.session.messages] == ["hi", "hello", "and now?", "again"]

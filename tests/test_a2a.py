"""The A2A server: agent card, JSON-RPC methods, streaming events and the HTTP transport.

Agents use MockProvider. Some run on the default durable engine (the embedded
Temporal dev server, started once per process), some with engine="local".
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import rein
from rein import Agent, LoopConfig, MemorySessionStore, MockProvider, ToolCall
from rein.a2a import A2A_PROTOCOL_VERSION, A2AServer, make_server


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def tc(name: str, cid: str = "1", **arguments: Any) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=arguments)


def user_message(text: str, **extra: Any) -> dict:
    return {"kind": "message", "role": "user", "messageId": "m-" + text[:8], "parts": [{"kind": "text", "text": text}], **extra}


def send(text: str, rid: Any = 1, **extra: Any) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "message/send", "params": {"message": user_message(text, **extra)}}


def text_of(message: dict) -> str:
    return "".join(p["text"] for p in message["parts"])


# --------------------------------------------------------------------------- card and auth


def test_public_names() -> None:
    assert rein.A2AServer is A2AServer
    assert "A2AServer" in rein.__all__ and "serve_a2a" in rein.__all__
    assert A2A_PROTOCOL_VERSION == "0.2.0"


def test_agent_card_without_token() -> None:
    agent = Agent(provider=MockProvider([]), system="You answer questions.", engine="local")
    card = A2AServer(agent, url="http://example.test:9000", version="2.1.0").agent_card()
    assert card["protocolVersion"] == "0.2.0"
    assert card["name"] == "Rein Agent"
    assert card["description"] == "You answer questions."
    assert card["url"] == "http://example.test:9000"
    assert card["version"] == "2.1.0"
    assert card["capabilities"] == {"streaming": True, "pushNotifications": False, "stateTransitionHistory": True}
    assert card["defaultInputModes"] == card["defaultOutputModes"] == ["text/plain"]
    assert [s["id"] for s in card["skills"]] == ["chat"]
    assert "securitySchemes" not in card and "security" not in card
    assert A2AServer(Agent(provider=MockProvider([]), engine="local")).agent_card()["description"]


def test_agent_card_with_token() -> None:
    card = A2AServer(Agent(provider=MockProvider([]), engine="local"), name="Ops", auth_token="s3cret").agent_card()
    assert card["name"] == "Ops"
    assert card["securitySchemes"] == {"bearerAuth": {"type": "http", "scheme": "bearer"}}
    assert card["security"] == [{"bearerAuth": []}]


def test_authorization() -> None:
    agent = Agent(provider=MockProvider(["allowed in"]), engine="local")
    server = A2AServer(agent, auth_token="s3cret")
    assert server.authorize({"Authorization": "Bearer s3cret"})
    assert server.authorize({"authorization": "Bearer s3cret"})
    assert not server.authorize({"Authorization": "bearer s3cret"})
    assert not server.authorize({})
    assert not server.authorize(None)
    assert A2AServer(agent).authorize(None)

    denied = server.handle_rpc(send("hi", rid=7))
    assert denied == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "Unauthorized"}}
    assert server.handle_rpc(send("hi"), headers={"Authorization": "Bearer wrong"})["error"]["code"] == -32001
    assert server._tasks == {}

    ok = server.handle_rpc(send("hi"), headers={"Authorization": "Bearer s3cret"})
    assert ok["result"]["status"]["state"] == "completed"
    assert text_of(ok["result"]["status"]["message"]) == "allowed in"


# --------------------------------------------------------------------------- JSON-RPC methods


def test_send_get_cancel_and_errors_durable() -> None:
    """Default (durable) engine: every message/send is a Temporal workflow."""
    server = A2AServer(Agent(provider=MockProvider(["Hello from rein."])))
    response = server.handle_rpc(send("Say hello", rid="r1"))
    assert response["jsonrpc"] == "2.0" and response["id"] == "r1"
    task = response["result"]
    assert task["kind"] == "task" and task["id"] and task["contextId"]
    assert task["status"]["state"] == "completed"
    reply = task["status"]["message"]
    assert reply["role"] == "agent" and reply["taskId"] == task["id"] and reply["contextId"] == task["contextId"]
    assert text_of(reply) == "Hello from rein."
    assert [a["name"] for a in task["artifacts"]] == ["response"]
    assert text_of(task["artifacts"][0]) == "Hello from rein."
    assert [m["role"] for m in task["history"]] == ["user", "agent"]
    assert text_of(task["history"][0]) == "Say hello"
    assert task["id"] in server._tasks

    got = server.handle_rpc({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}})
    assert got["result"] == task

    missing = server.handle_rpc({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": "nope-42"}})
    assert missing["error"]["code"] == -32001 and "nope-42" in missing["error"]["message"]
    missing = server.handle_rpc({"jsonrpc": "2.0", "id": 4, "method": "tasks/cancel", "params": {"id": "nope-43"}})
    assert missing["error"]["code"] == -32001 and "nope-43" in missing["error"]["message"]

    canceled = server.handle_rpc({"jsonrpc": "2.0", "id": 5, "method": "tasks/cancel", "params": {"id": task["id"]}})
    assert canceled["result"]["status"] == {"state": "canceled"}
    assert server._tasks[task["id"]]["status"]["state"] == "canceled"

    unknown = server.handle_rpc({"jsonrpc": "2.0", "id": 6, "method": "tasks/teleport", "params": {}})
    assert unknown["id"] == 6 and unknown["error"]["code"] == -32601 and "tasks/teleport" in unknown["error"]["message"]
    assert server.handle_rpc({"jsonrpc": "2.0", "id": 8, "method": "message/stream"})["error"]["code"] == -32601
    assert server.handle_rpc([1, 2])["error"]["code"] == -32600
    bad = server.handle_rpc({"jsonrpc": "2.0", "id": 9, "method": "message/send", "params": {}})
    assert bad["error"]["code"] == -32602


def test_context_multi_turn_with_store_local() -> None:
    store = MemorySessionStore()
    server = A2AServer(Agent(provider=MockProvider(["Noted: Ada.", "Your name is Ada."]), engine="local"), store=store)
    first = server.handle_rpc(send("My name is Ada.", contextId="ctx-1"))["result"]
    second = server.handle_rpc(send("What is my name?", contextId="ctx-1"))["result"]
    assert first["contextId"] == second["contextId"] == "ctx-1"
    assert first["id"] != second["id"]
    assert text_of(second["status"]["message"]) == "Your name is Ada."
    users = [m.content for m in store.load("ctx-1").messages if m.role == "user"]
    assert users == ["My name is Ada.", "What is my name?"]

    # A message without a contextId gets a new one, and is saved under it too.
    third = server.handle_rpc(send("Fresh start"))["result"]
    assert third["contextId"] not in ("ctx-1", None) and third["contextId"] in store


def test_context_multi_turn_with_store_durable() -> None:
    store = MemorySessionStore()
    agent = Agent(provider=MockProvider(["one", "two"]), system="Be brief.")
    server = A2AServer(agent, store=store)
    server.handle_rpc(send("first", contextId="ctx-d"))
    second = server.handle_rpc(send("second", contextId="ctx-d"))["result"]
    assert text_of(second["status"]["message"]) == "two"
    roles = [(m.role, m.content) for m in store.load("ctx-d").messages]
    assert roles == [("system", "Be brief."), ("user", "first"), ("assistant", "one"),
                     ("user", "second"), ("assistant", "two")]


def test_ask_permission_gives_input_required_then_approve_durable() -> None:
    agent = Agent(
        provider=MockProvider([[tc("add", a=2, b=3)], "The sum is 5.", [tc("add", a=7, b=7)]]),
        tools=[add],
        config=LoopConfig(permission="ask"),
    )
    server = A2AServer(agent)
    task = server.handle_rpc(send("Add 2 and 3"))["result"]
    assert task["status"]["state"] == "input-required"
    assert server._paused[task["id"]].run_id is not None  # a durable workflow waits for the reply
    pending = task["status"]["message"]
    assert "add" in text_of(pending) and "approve" in text_of(pending)
    assert pending["metadata"]["interrupt"] == {"type": "need_approval", "tool": "add", "arguments": {"a": 2, "b": 3}}
    assert task["artifacts"] == []

    done = server.handle_rpc(send("approve", taskId=task["id"]))["result"]
    assert done["id"] == task["id"]
    assert done["status"]["state"] == "completed"
    assert text_of(done["status"]["message"]) == "The sum is 5."
    assert [m["role"] for m in done["history"]] == ["user", "agent", "user", "agent"]

    # Canceling a paused durable task also cancels the workflow waiting for it.
    from rein import engine

    paused = server.handle_rpc(send("Add 7 and 7"))["result"]
    run_id = server._paused[paused["id"]].session.run_id
    assert run_id is not None
    canceled = server.handle_rpc({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": paused["id"]}})
    assert canceled["result"]["status"] == {"state": "canceled"}
    assert server._paused == {}
    eng = engine.Engine._instance
    result = asyncio.run_coroutine_threadsafe(eng.client.get_workflow_handle(run_id).result(), eng.loop).result(30)
    assert result["stop_reason"] == "cancelled"  # the workflow that waited for the reply ended


def test_ask_permission_deny_local_and_cancel_paused() -> None:
    ran: list[tuple[int, int]] = []

    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append((a, b))
        return a + b

    agent = Agent(
        provider=MockProvider([[tc("add", a=1, b=1)], "Fine, I will not add.", [tc("add", a=4, b=4)]]),
        tools=[add],
        config=LoopConfig(permission="ask"),
        engine="local",
    )
    server = A2AServer(agent)
    task = server.handle_rpc(send("Add 1 and 1"))["result"]
    assert task["status"]["state"] == "input-required"
    done = server.handle_rpc(send("no thanks", taskId=task["id"]))["result"]
    assert done["status"]["state"] == "completed"
    assert text_of(done["status"]["message"]) == "Fine, I will not add."
    assert ran == []

    paused = server.handle_rpc(send("Add 4 and 4"))["result"]
    assert paused["status"]["state"] == "input-required"
    server.handle_rpc({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": paused["id"]}})
    assert server._paused == {}
    # A reply to a canceled task starts a new task instead of resuming.
    later = server.handle_rpc(send("approve", taskId=paused["id"]))["result"]
    assert later["id"] != paused["id"]


def test_ask_human_answer_local() -> None:
    agent = Agent(
        provider=MockProvider([[tc("ask_human", "q1", question="Which city?")], "Booked for Paris."]),
        tools=[rein.ask_human],
        engine="local",
    )
    server = A2AServer(agent)
    task = server.handle_rpc(send("Book a trip"))["result"]
    assert task["status"]["state"] == "input-required"
    assert "Which city?" in text_of(task["status"]["message"])
    done = server.handle_rpc(send("Paris", taskId=task["id"]))["result"]
    assert done["status"]["state"] == "completed" and text_of(done["status"]["message"]) == "Booked for Paris."


def test_failing_run_gives_failed_task_local() -> None:
    server = A2AServer(Agent(provider=MockProvider([ValueError("provider exploded")]), engine="local"))
    task = server.handle_rpc(send("hi"))["result"]
    assert task["status"]["state"] == "failed"
    assert "provider exploded" in text_of(task["status"]["message"])


async def test_handle_rpc_refuses_a_running_loop_and_ahandle_rpc_works() -> None:
    server = A2AServer(Agent(provider=MockProvider(["async ok"]), engine="local"))
    with pytest.raises(RuntimeError, match="ahandle_rpc"):
        server.handle_rpc(send("hi"))
    response = await server.ahandle_rpc(send("hi"))
    assert text_of(response["result"]["status"]["message"]) == "async ok"


# --------------------------------------------------------------------------- streaming


async def test_stream_events_local() -> None:
    server = A2AServer(Agent(provider=MockProvider(["Hi there"]), engine="local"))
    request = {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": user_message("Greet me")}}
    events = [e async for e in server.stream_events(request)]
    assert events[0]["kind"] == "status-update" and events[0]["status"] == {"state": "working"}
    assert events[0]["final"] is False
    updates = events[1:-1]
    assert updates and all(e["kind"] == "artifact-update" and e["append"] is True for e in updates)
    assert len({e["artifact"]["artifactId"] for e in updates}) == 1
    assert "".join(text_of(e["artifact"]) for e in updates) == "Hi there"
    last = events[-1]
    assert last["kind"] == "status-update" and last["final"] is True and last["status"]["state"] == "completed"
    task = server._tasks[last["taskId"]]
    assert text_of(task["artifacts"][0]) == "Hi there"
    assert [m["role"] for m in task["history"]] == ["user", "agent"]
    assert {e["taskId"] for e in events} == {task["id"]} and {e["contextId"] for e in events} == {task["contextId"]}


async def test_stream_events_paused_run_local() -> None:
    agent = Agent(provider=MockProvider([[tc("add", a=1, b=2)]]), tools=[add],
                  config=LoopConfig(permission="ask"), engine="local")
    events = [e async for e in A2AServer(agent).stream_events(
        {"id": 1, "method": "message/stream", "params": {"message": user_message("add")}})]
    assert events[-1]["final"] is True and events[-1]["status"]["state"] == "input-required"


# --------------------------------------------------------------------------- HTTP


@pytest.fixture
def http_server() -> Iterator[Any]:
    """Start servers on free ports; yields a factory (A2AServer -> base url)."""
    started = []

    def start(a2a: A2AServer) -> str:
        httpd = make_server(a2a, "127.0.0.1", 0)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        started.append((httpd, thread))
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd, thread in started:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def http(url: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def test_http_server_durable(http_server: Any) -> None:
    agent = Agent(provider=MockProvider(["Hello over HTTP.", "Streamed!"]))
    base = http_server(A2AServer(agent, name="HTTP agent"))

    for path in ("/.well-known/agent.json", "/.well-known/agent-card.json"):
        status, ctype, body = http(base + path)
        assert status == 200 and ctype == "application/json"
        assert json.loads(body)["name"] == "HTTP agent"
    status, _, body = http(base + "/somewhere/else")
    assert status == 404 and json.loads(body) == {"error": "not found"}

    status, _, body = http(base + "/", b"{not json")
    assert status == 400 and json.loads(body) == {"error": "invalid json"}

    status, _, body = http(base + "/", json.dumps(send("Hi", rid=11)).encode())
    response = json.loads(body)
    assert status == 200 and response["id"] == 11
    assert response["result"]["status"]["state"] == "completed"
    assert text_of(response["result"]["status"]["message"]) == "Hello over HTTP."

    stream = {"jsonrpc": "2.0", "id": 12, "method": "message/stream", "params": {"message": user_message("Stream")}}
    status, ctype, body = http(base + "/", json.dumps(stream).encode())
    assert status == 200 and ctype.startswith("text/event-stream")
    frames = body.decode().split("\n\n")
    assert frames[-1] == ""
    envelopes = [json.loads(f.removeprefix("data: ")) for f in frames[:-1]]
    assert all(f.startswith("data: ") for f in frames[:-1])
    assert all(e["jsonrpc"] == "2.0" and e["id"] == 12 for e in envelopes)
    events = [e["result"] for e in envelopes]
    assert events[0]["status"]["state"] == "working"
    assert "".join(text_of(e["artifact"]) for e in events if e["kind"] == "artifact-update") == "Streamed!"
    assert events[-1]["final"] is True and events[-1]["status"]["state"] == "completed"


def test_http_server_auth_local(http_server: Any) -> None:
    agent = Agent(provider=MockProvider(["secret answer", "s", "t"]), engine="local")
    base = http_server(A2AServer(agent, auth_token="tok"))
    card = json.loads(http(base + "/.well-known/agent.json")[2])
    assert card["security"] == [{"bearerAuth": []}]

    status, _, body = http(base + "/", json.dumps(send("hi", rid=5)).encode())
    assert status == 200
    assert json.loads(body) == {"jsonrpc": "2.0", "id": 5, "error": {"code": -32001, "message": "Unauthorized"}}
    stream = {"jsonrpc": "2.0", "id": 6, "method": "message/stream", "params": {"message": user_message("x")}}
    status, ctype, body = http(base + "/", json.dumps(stream).encode())
    assert status == 200 and ctype == "application/json" and json.loads(body)["error"]["code"] == -32001

    status, _, body = http(base + "/", json.dumps(send("hi")).encode(), {"Authorization": "Bearer tok"})
    assert text_of(json.loads(body)["result"]["status"]["message"]) == "secret answer"
    status, ctype, body = http(base + "/", json.dumps(stream).encode(), {"Authorization": "Bearer tok"})
    assert ctype.startswith("text/event-stream") and '"final": true' in body.decode()

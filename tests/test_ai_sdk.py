"""The AI SDK endpoint (rein.web.ai_sdk) against the `ai` package's own chat client (AbstractChat with
DefaultChatTransport, what `useChat` runs) under Node (tests/ai_sdk_driver.mjs; .ci/run installs it in
examples/aisdk), and plain HTTP for what a client may get wrong.

One worker serves the calculator (offline, asks approval for every tool call) and the teller (holds its answer
while the test says so); the endpoint runs in this process under uvicorn, as `rein serve` runs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

import rein
from rein.client import ReinClient
from rein.examples.calculator import agent as calculator
from rein.temporal.bearer import BearerAuth
from rein.web.ai_sdk import app
from tests.agents.ai_sdk import hold_file, story, teller
from tests.support.processes import ROOT
from tests.support.waiting import poll
from tests.support.wipe import LOOKUP, approvals_taken, wipe_agent, wiped
from tests.test_agui import serve

pytestmark = pytest.mark.timeout(180)
DRIVER = ROOT / "tests" / "ai_sdk_driver.mjs"
WIPER = wipe_agent(f"sdk-wiper-{uuid.uuid4().hex[:6]}")
"""An agent whose model repeats call ids across turns (tests.support.wipe)."""


class Endpoint:
    def __init__(self, url: str, runs: ReinClient):
        self.url, self.runs = url, runs


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def endpoint(dev, tmp_path_factory) -> AsyncIterator[Endpoint]:
    os.environ["REINTEST_DIR"] = str(tmp_path_factory.mktemp("ai-sdk"))
    queue = f"ai-sdk-{uuid.uuid4().hex[:8]}"
    web = app(dev.client, agents=[calculator, teller, WIPER], task_queue=queue, auth=BearerAuth(), open=True)  # loopback
    url, server, task = await serve(web)
    async with rein.create_worker(dev.client, agents=[calculator, teller, WIPER], task_queue=queue):
        yield Endpoint(url, ReinClient(dev.client, queue))
        server.should_exit = True
        await task


async def drive(api: str, chat_id: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps through the `ai` package's chat client (one Node process); one report per step."""
    process = await asyncio.create_subprocess_exec(
        "node", str(DRIVER), api, chat_id, json.dumps(steps), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), 120)
    finally:
        if process.returncode is None:  # timed out: the driver goes with the test
            process.kill()
            await process.wait()
    reports = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert len(reports) == len(steps), f"the driver stopped early: {err.decode()[-3000:]}"
    return reports


async def chunks(http: httpx.AsyncClient, method: str, url: str, body: Any = None) -> tuple[int, list[dict[str, Any]]]:
    """A request's UI message chunks (or its JSON error), read to the stream's end."""
    async with http.stream(method, url, json=body) as response:
        if response.status_code != 200:
            text = await response.aread()
            return response.status_code, [json.loads(text)] if text else []
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        found = [json.loads(line[6:]) async for line in response.aiter_lines()
                 if line.startswith("data: ") and line != "data: [DONE]"]
    return 200, found


def user(text: str, message_id: str | None = None) -> dict[str, Any]:
    return {"id": message_id or uuid.uuid4().hex, "role": "user", "parts": [{"type": "text", "text": text}]}


async def test_the_sdk_client_chats_approves_denies_reconnects_and_reloads(endpoint: Endpoint) -> None:
    chat_id = f"sdk-{uuid.uuid4().hex[:8]}"
    api = f"{endpoint.url}/calculator"
    asked, approved, second, denied, loaded, idle = await drive(api, chat_id, [
        {"do": "send", "text": "What is 12 + 30?"},
        {"do": "approve", "approved": True},
        {"do": "send", "text": "What is 2 + 3?"},
        {"do": "approve", "approved": False, "reason": "too easy"},
        {"do": "load"},
        {"do": "resume"},
    ])
    # the call that needs a person: the SDK's approval request, and the response ends there (the turn waits)
    assert asked["error"] is None and asked["finishReason"] == "tool-calls"
    assert asked["types"][0] == "start" and asked["types"][-2:] == ["tool-approval-request", "finish"]
    (call,) = asked["tools"]
    assert (call["name"], call["state"], call["input"]) == ("add", "approval-requested", {"a": 12, "b": 30})
    assert re.fullmatch(rf"rein\.1-[0-9a-f]{{8}}\.{call['id']}", call["approval"]["id"])  # the thread's first wait
    # approved: the same assistant message goes on, with the call's output and the answer
    assert approved["types"][0] == "start" and approved["text"] == "The answer is 42."
    assert approved["ids"] == asked["ids"]
    assert approved["tools"][0]["state"] == "output-available" and approved["tools"][0]["output"] == "42.0"
    assert approved["error"] is None and approved["finishReason"] == "stop"
    # denied with a reason: the model saw it, the page shows the call denied
    assert second["tools"][0]["state"] == "approval-requested"
    assert denied["tools"][0]["state"] == "output-denied" and "tool-output-denied" in denied["types"]
    assert denied["text"] == "I could not compute that: a tool call was not approved."
    session = await endpoint.runs.session(chat_id)
    assert any("Reason: too easy" in m.content for m in session.messages if m.role == "tool")
    # the thread's messages, as UIMessage[] the SDK validates, with the ids the streams named
    assert loaded["load"] == {"status": 200, "count": 4} and loaded["ids"][1] == approved["ids"][-1]
    assert loaded["ids"][-1] == denied["ids"][-1] and loaded["tools"][0]["state"] == "output-denied"
    assert loaded["tools"][0]["approval"]["reason"] == "too easy"
    # nothing under way: the resume is a 204 and changes nothing
    assert idle["error"] is None and idle["types"] == [] and idle["status"] == "ready"
    view = await endpoint.runs.thread(chat_id)
    assert (view.turns, view.status) == (2, "idle")


async def test_a_page_that_lost_its_connection_resumes_the_answer_from_its_start(endpoint: Endpoint) -> None:
    chat_id = f"sdk-{uuid.uuid4().hex[:8]}"
    hold = hold_file("Tell me about threads")
    hold.touch()
    (told,) = await drive(f"{endpoint.url}/teller", chat_id, [
        {"do": "send", "text": "Tell me about threads", "cut": "text-delta", "release": str(hold)}])
    # the connection dropped after the first delta while the model held its answer; the resumed stream (GET
    # .../stream) replayed the active message from its start while it was still under way, then went on to its end
    assert told["cutError"] is not None and story().startswith(told["cutText"])
    assert told["replayedWhileHeld"] == "Once upon a time, "
    assert told["types"][0] == "start" and told["chunks"][0]["messageId"] == "rein-r0"  # the teller has no system prompt
    assert told["text"] == story() and told["error"] is None and told["finishReason"] == "stop"
    assert told["ids"][-1] == "assistant:rein-r0" and len(told["ids"]) == 2


async def test_a_message_sent_twice_starts_one_turn_and_both_hear_it(endpoint: Endpoint) -> None:
    chat_id = f"sdk-{uuid.uuid4().hex[:8]}"
    message = user("Tell me a story", "m-once")
    hold_file("Tell me a story").touch()
    async with httpx.AsyncClient(timeout=60) as http:
        first = asyncio.create_task(chunks(http, "POST", f"{endpoint.url}/teller", {"id": chat_id, "messages": [message]}))
        await poll(lambda: endpoint.runs.thread(chat_id), "the thread to start", ignore=(Exception,))
        again = asyncio.create_task(chunks(http, "POST", f"{endpoint.url}/teller", {"id": chat_id, "messages": [message]}))
        hold_file("Tell me a story").unlink()
        (code, told), (code_again, told_again) = await first, await again
    assert code == code_again == 200
    text = "".join(c["delta"] for c in told if c["type"] == "text-delta")
    assert text == "".join(c["delta"] for c in told_again if c["type"] == "text-delta") == story()
    assert told[0] == told_again[0] == {"type": "start", "messageId": "rein-r0"}
    view = await endpoint.runs.thread(chat_id)
    assert (view.turns, view.status) == (1, "idle")


async def test_bad_input_is_refused_and_loses_nothing(endpoint: Endpoint) -> None:
    chat_id = f"sdk-{uuid.uuid4().hex[:8]}"
    api = f"{endpoint.url}/calculator"
    (asked,) = await drive(api, chat_id, [{"do": "send", "text": "What is 1 + 2?"}])
    approval, call = asked["tools"][0]["approval"]["id"], asked["tools"][0]["id"]
    before = await endpoint.runs.status(chat_id)
    assert before.status == "waiting_approval" and approval == f"rein.{before.wait}.{call}"  # the wait it was asked in
    answered = {"id": "rein-r1", "role": "assistant", "parts": [
        {"type": "tool-add", "toolCallId": call, "state": "approval-responded",
         "input": {"a": 1, "b": 2}, "approval": {"id": f"rein.{before.pause + 1}-{before.wait.split('-')[1]}.{call}",
                                                 "approved": True}}]}
    async with httpx.AsyncClient(timeout=30) as http:
        cases = [
            ("not JSON", "POST", api, b"{not json", 422, "not JSON"),
            ("not a JSON body (a form's)", "POST", api, b"id=x", 415, "application/json"),
            ("no chat id", "POST", api, {"messages": [user("hi")]}, 422, "id"),
            ("a file part", "POST", api, {"id": chat_id, "messages": [
                {"id": "f", "role": "user", "parts": [{"type": "file", "url": "data:,x", "mediaType": "text/plain"}]}]},
             422, "not text"),
            ("an unknown agent", "POST", f"{endpoint.url}/nobody", {"id": chat_id, "messages": [user("hi")]}, 404, "nobody"),
            ("a stale approval (another wait's)", "POST", api, {"id": chat_id, "messages": [answered],
                                                                 "trigger": "submit-message"}, 409, "stale"),
            ("regenerate", "POST", api, {"id": chat_id, "messages": [], "trigger": "regenerate-message"}, 409,
             "regenerat"),
            ("an edit of a sent message", "POST", api, {"id": chat_id, "messages": [user("What is 2 + 2?", "m-1")],
                                                        "messageId": "m-1"}, 409, "editing"),
            ("an unknown chat's messages", "GET", f"{api}/no-such-chat/messages", None, 404, "no thread"),
        ]
        for what, method, url, body, status, says in cases:
            if isinstance(body, bytes):
                kind = "application/json" if body.startswith(b"{") else "application/x-www-form-urlencoded"
                response = await http.request(method, url, content=body, headers={"Content-Type": kind})
            else:
                response = await http.request(method, url, json=body)
            assert (response.status_code, says in response.json()["error"]) == (status, True), what
        # a submit that answers nothing (the page sent its message as it was): the wait, told again, and the end
        unanswered = {"id": "rein-r1", "role": "assistant", "parts": [
            {"type": "tool-add", "toolCallId": asked["tools"][0]["id"], "state": "approval-requested",
             "input": {"a": 1, "b": 2}, "approval": {"id": approval}}]}
        status, told = await chunks(http, "POST", api, {"id": chat_id, "messages": [unanswered], "messageId": "rein-r1"})
        assert status == 200 and told == [
            {"type": "start", "messageId": "rein-r1"},
            {"type": "tool-approval-request", "toolCallId": asked["tools"][0]["id"], "approvalId": approval},
            {"type": "finish", "finishReason": "tool-calls"}]
    after = await endpoint.runs.status(chat_id)
    assert (after.status, after.pause, [c.id for c in after.pending_tool_calls]) == (
        "waiting_approval", before.pause, [c.id for c in before.pending_tool_calls])
    # the approval the page was sent is still good; once taken, the same approval again is stale
    done, again = await drive(api, chat_id, [{"do": "load"}, {"do": "approve", "approved": True}])
    assert again["text"] == "The answer is 3." and again["error"] is None
    (repeat,) = await drive(api, chat_id, [{"do": "load"}])
    async with httpx.AsyncClient(timeout=30) as http:
        answered["parts"][0]["approval"]["id"] = approval
        response = await http.post(api, json={"id": chat_id, "messages": [answered]})
    assert response.status_code == 409 and "stale" in response.json()["error"]
    view = await endpoint.runs.thread(chat_id)
    assert (view.turns, view.status) == (1, "idle")


async def test_a_page_tool_answered_later_by_another_process(endpoint: Endpoint) -> None:
    chat_id = f"sdk-{uuid.uuid4().hex[:8]}"
    api = f"{endpoint.url}/calculator"
    (asked,) = await drive(api, chat_id, [{"do": "send", "text": "What is my number plus 5?"}])
    (call,) = asked["tools"]
    assert (call["name"], call["state"], asked["finishReason"]) == ("pick_number", "input-available", "tool-calls")
    assert (await endpoint.runs.thread(chat_id)).status == "waiting_input"
    # the page that asked has gone; another client process loads the chat and answers the page's tool
    loaded, told, approved = await drive(api, chat_id, [
        {"do": "load"}, {"do": "output", "output": "37"}, {"do": "approve", "approved": True}])
    assert loaded["tools"][0]["state"] == "input-available"
    assert told["tools"][0]["state"] == "output-available" and told["tools"][1]["state"] == "approval-requested"
    assert approved["text"] == "The answer is 42."


async def test_a_stop_ends_the_turn_and_a_closed_connection_does_not(endpoint: Endpoint) -> None:
    chat_id = f"sdk-{uuid.uuid4().hex[:8]}"
    hold_file("Stop me").touch()
    hold_file("Go on").touch()
    async with httpx.AsyncClient(timeout=60) as http:
        # a page that leaves mid-answer stops nothing: the turn goes on and ends whole
        async with http.stream("POST", f"{endpoint.url}/teller", json={"id": chat_id, "messages": [user("Go on")]}) as r:
            async for line in r.aiter_lines():
                if "text-delta" in line:
                    break
        hold_file("Go on").unlink()
        await poll(lambda: _idle(endpoint, chat_id, 1), "the turn to end")
        session = await endpoint.runs.session(chat_id)
        assert session.messages[-1].content == story()
        # the stop request interrupts the turn under way: it ends, stopped, and the thread takes the next message
        telling = asyncio.create_task(chunks(http, "POST", f"{endpoint.url}/teller",
                                             {"id": chat_id, "messages": [user("Stop me")]}))
        await poll(lambda: _open(endpoint, chat_id), "the second turn to open")
        response = await http.post(f"{endpoint.url}/teller/{chat_id}/stop", json={})
        assert response.status_code == 200 and response.json() == {"stopped": 2}
        code, told = await telling
        assert told[-1]["type"] == "finish" and told[-1]["messageMetadata"]["rein"]["stopReason"] == "stopped"
        again = await http.post(f"{endpoint.url}/teller/{chat_id}/stop", json={})
        assert again.status_code == 409 and "nothing to stop" in again.json()["error"]
    hold_file("Stop me").unlink()
    view = await endpoint.runs.thread(chat_id)
    assert (view.turns, view.status, view.open) == (2, "idle", False)


async def _idle(endpoint: Endpoint, chat_id: str, turns: int) -> bool:
    view = await endpoint.runs.thread(chat_id)
    return view.turns == turns and not view.open


async def _open(endpoint: Endpoint, chat_id: str) -> bool:
    return (await endpoint.runs.thread(chat_id)).open


async def test_an_approval_answered_elsewhere_shows_in_the_page_and_resumes_through_another_server(
        dev, endpoint: Endpoint) -> None:
    """The approval the page was asked is answered by rein's client (what `rein approve` and the inbox send): the
    page that loads the chat shows the outcome. A stream cut on one server resumes from another (its own hub)."""
    chat_id = f"sdk-{uuid.uuid4().hex[:8]}"
    api = f"{endpoint.url}/calculator"
    (asked,) = await drive(api, chat_id, [{"do": "send", "text": "What is 4 + 4?"}])
    call = asked["tools"][0]["id"]
    assert await endpoint.runs.approve(chat_id, call, approver="ops", wait=True) == [call]
    await poll(lambda: _idle(endpoint, chat_id, 1), "the turn to end")
    (loaded,) = await drive(api, chat_id, [{"do": "load"}])
    assert loaded["tools"][0]["state"] == "output-available" and loaded["text"] == "The answer is 8."
    assert loaded["tools"][0]["approval"]["approved"] is True
    # another server process (another app, another hub): the answer under way replays there from its start
    other = app(endpoint.runs.client, agents=[teller], task_queue=endpoint.runs.task_queue, auth=BearerAuth(),
                open=True)
    other_url, other_server, other_task = await serve(other)
    hold = hold_file("Tell it twice")
    hold.touch()
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            story_chat = f"sdk-{uuid.uuid4().hex[:8]}"
            async with http.stream("POST", f"{endpoint.url}/teller", json={"id": story_chat, "messages": [
                    user("Tell it twice")]}) as response:
                async for line in response.aiter_lines():
                    if "text-delta" in line:
                        break  # the page's connection to the first server is gone
            async with http.stream("GET", f"{other_url}/teller/{story_chat}/stream") as response:
                told = []
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        told.append(json.loads(line[6:]))
                        if told[-1]["type"] == "text-delta" and hold.exists():
                            hold.unlink()  # the replay reached the held answer's start: let it end
        assert told[0] == {"type": "start", "messageId": "rein-r0"} and told[-1]["type"] == "finish"
        assert "".join(c["delta"] for c in told if c["type"] == "text-delta") == story()
        assert other.state.ai_sdk.hub.readers_started == 1  # its own reader of the thread, not the first server's
    finally:
        hold.unlink(missing_ok=True)
        other_server.should_exit = True
        await other_task


async def test_an_approval_of_a_call_whose_id_the_thread_asks_again_is_stale_and_decides_nothing(
        dev, endpoint: Endpoint) -> None:  # noqa: ANN001
    """The page was asked to approve `wipe(target="alpha")` as call_0; someone else approved it, and the thread asks
    `wipe(target="prod")` as call_0 again. The page's approval (its id names the wait it was asked in) is refused:
    409 in one line naming what the thread waits on now; prod does not run."""
    chat_id, runs = f"sdk-{uuid.uuid4().hex[:8]}", endpoint.runs
    api = f"{endpoint.url}/{WIPER.name}"
    async with httpx.AsyncClient(timeout=60) as http:
        status, told = await chunks(http, "POST", api, {"id": chat_id, "messages": [user("wipe alpha prod")]})
        (asked,) = [c for c in told if c["type"] == "tool-approval-request"]
        shown = await runs.status(chat_id)
        assert status == 200 and asked == {"type": "tool-approval-request", "toolCallId": "call_0",
                                           "approvalId": f"rein.{shown.wait}.call_0"}
        await runs.approve(chat_id)  # someone else, elsewhere
        now = await poll(lambda: _asks_again(runs, chat_id, shown.wait), "the thread to ask again")
        answered = {"id": "rein-r0", "role": "assistant", "parts": [
            {"type": "tool-wipe", "toolCallId": "call_0", "state": "approval-responded", "input": {"target": "alpha"},
             "approval": {"id": asked["approvalId"], "approved": True}}]}
        refused = await http.post(api, json={"id": chat_id, "messages": [answered]})
        error = refused.json()["error"]
        assert refused.status_code == 409 and "stale" in error and "\n" not in error, error
        assert f'wait {now.wait} for approval of wipe(target="prod") [call_0]' in error
        parts = (await http.get(f"{api}/{chat_id}/messages")).json()[-1]["parts"]
        assert parts[-1]["approval"] == {"id": f"rein.{now.wait}.call_0"}  # the page reloads the new ask
    assert wiped(chat_id) == [("call_0", "alpha")]
    assert await approvals_taken(dev.client, chat_id) == 1
    await runs.cancel(chat_id)


async def _asks_again(runs: ReinClient, chat_id: str, wait: str | None) -> Any:
    status = await runs.status(chat_id)
    return status if status.status == "waiting_approval" and status.wait not in (None, wait) else None


def lookup_output(key: str, output: str) -> dict[str, Any]:
    """The assistant message a page sends with its tool's output for the model's `lookup(key=...)` (call_0)."""
    return {"id": uuid.uuid4().hex, "role": "assistant", "parts": [
        {"type": "tool-lookup", "toolCallId": "call_0", "state": "output-available", "input": {"key": key},
         "output": output}]}


async def test_a_page_output_for_a_call_whose_id_the_thread_asks_again_is_stale_and_taken_nowhere(
        endpoint: Endpoint) -> None:
    """The page ran its tool for `lookup(key="alpha")` (call_0); the next turn asks `lookup(key="beta")` as call_0
    again. alpha's output sent again is refused (409, one line naming what the thread waits on now), nothing
    taken; beta's own output is taken."""
    chat_id, runs = f"sdk-{uuid.uuid4().hex[:8]}", endpoint.runs
    api, tools = f"{endpoint.url}/{WIPER.name}", [{**{k: v for k, v in LOOKUP.items() if k != "parameters"},
                                                   "inputSchema": LOOKUP["parameters"]}]
    async with httpx.AsyncClient(timeout=60) as http:
        for message in (user("look alpha"), lookup_output("alpha", "A"), user("look beta")):
            status, told = await chunks(http, "POST", api, {"id": chat_id, "messages": [message], "tools": tools})
            assert status == 200 and told[-1]["type"] == "finish", told[-1]
        waiting = await runs.status(chat_id)
        assert waiting.status == "waiting_input" and [(c.id, c.arguments) for c in waiting.pending_tool_calls] == [
            ("call_0", {"key": "beta"})]
        refused = await http.post(api, json={"id": chat_id, "messages": [lookup_output("alpha", "A")], "tools": tools})
        error = refused.json()["error"]
        assert refused.status_code == 409 and error.startswith('stale: the result of lookup(key="alpha")'), error
        assert f"wait {waiting.wait} for " in error and 'lookup(key="beta") [call_0]' in error and "\n" not in error
        assert (await runs.status(chat_id)).wait == waiting.wait  # nothing was taken
        status, told = await chunks(http, "POST", api, {"id": chat_id, "messages": [lookup_output("beta", "B")],
                                                        "tools": tools})
        assert status == 200 and told[-1]["type"] == "finish", told[-1]
    messages = (await runs.session(chat_id)).messages
    assert [m.content for m in messages if m.role == "tool"] == ["A", "B"]
    assert messages[-1].content == "Looked up: B."

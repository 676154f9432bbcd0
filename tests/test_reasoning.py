"""The model's reasoning (LiteLLM's `reasoning_content`): read from both vendor wire formats (tests/vendor_server.py
speaks OpenAI-compatible `reasoning_content` and Anthropic `thinking` blocks over real HTTP), kept in rein's IR
(Message.reasoning), never sent to a model again, and shown to pages: AG-UI's REASONING events, the AI SDK's
reasoning parts and its UIMessages.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

import rein
from rein import Agent, LiteLLMProvider
from rein.client import ReinClient
from rein.core.ir import Message
from rein.temporal.bearer import BearerAuth
from rein.web.app import build
from tests.test_agui import body, serve, sse, user
from tests.vendor_server import Reply, VendorServer

pytestmark = pytest.mark.timeout(120)
MODELS = [("openai/gpt-4o", "/v1"), ("anthropic/claude-3-7-sonnet-20250219", "")]


@pytest.mark.parametrize(("model", "path"), MODELS)
async def test_both_wire_formats_give_the_reasoning_and_it_is_never_sent_back(model: str, path: str) -> None:
    with VendorServer() as srv:
        srv.script([Reply(text="It is 4.", reasoning="Two and two make four."),
                    Reply(text="Still 4.", reasoning="Same as before.")])
        provider = LiteLLMProvider(model, api_base=srv.base_url + path, api_key="sk-test")
        whole = await provider.complete([Message(role="user", content="2 + 2?")])
        assert (whole.message.reasoning, whole.message.content) == ("Two and two make four.", "It is 4.")
        asked = [Message(role="user", content="2 + 2?"), whole.message, Message(role="user", content="Sure?")]
        chunks = [c async for c in provider.stream(asked)]
        thought = "".join(c.text for c in chunks if c.type == "reasoning")
        assert thought == "Same as before." and chunks.index(next(c for c in chunks if c.type == "text")) > 0
        sent = json.dumps(srv.requests[-1].body["messages"])
        assert "Two and two" not in sent and "It is 4." in sent


async def test_a_thread_shows_the_reasoning_over_agui_and_the_ai_sdk(dev) -> None:
    with VendorServer() as srv:
        srv.script([Reply(text="It is 4.", reasoning="Two and two make four."),
                    Reply(text="It is 6.", reasoning="Three and three.")])
        agent = Agent(provider=LiteLLMProvider("openai/gpt-4o", api_base=srv.base_url + "/v1", api_key="sk-test"),
                      name="thinker")
        queue = f"reasoning-{uuid.uuid4().hex[:8]}"
        url, server, task = await serve(build(dev.client, [agent], task_queue=queue, auth=BearerAuth(), open=True))
        thread_id = f"reasoning-{uuid.uuid4().hex[:8]}"
        try:
            async with rein.create_worker(dev.client, agents=[agent], task_queue=queue), \
                    httpx.AsyncClient(timeout=60) as http:
                _, events, _ = await sse(http, f"{url}/agui/thinker", body(thread_id, user("2 + 2?")))
                chunks = await _ui_chunks(http, f"{url}/ai-sdk/thinker", thread_id, "3 + 3?")
                messages = (await http.get(f"{url}/ai-sdk/thinker/{thread_id}/messages")).json()
            session = await ReinClient(dev.client, queue).session(thread_id)
        finally:
            server.should_exit = True
            await task
        kinds = [e["type"] for e in events]
        assert kinds.index("REASONING_START") < kinds.index("REASONING_MESSAGE_CONTENT") < kinds.index("REASONING_END") \
            < kinds.index("TEXT_MESSAGE_START")
        assert "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT") == "Two and two make four."
        assert "".join(c["delta"] for c in chunks if c["type"] == "reasoning-delta") == "Three and three."
        thinking = [c["type"] for c in chunks if c["type"].startswith("reasoning")]
        assert thinking[0] == "reasoning-start" and thinking[-1] == "reasoning-end"
        parts = [p for m in messages if m["role"] == "assistant" for p in m["parts"] if p["type"] == "reasoning"]
        assert [p["text"] for p in parts] == ["Two and two make four.", "Three and three."]
        assert [m.reasoning for m in session.messages if m.role == "assistant"] == ["Two and two make four.",
                                                                                      "Three and three."]
        # the second turn's call carried the first answer, not its reasoning
        sent = json.dumps(srv.requests[-1].body["messages"])
        assert "It is 4." in sent and "Two and two" not in sent


async def _ui_chunks(http: httpx.AsyncClient, url: str, thread_id: str, text: str) -> list[dict[str, Any]]:
    payload = {"id": thread_id, "messages": [{"id": uuid.uuid4().hex, "role": "user", "parts": [{"type": "text", "text": text}]}]}
    async with http.stream("POST", url, json=payload) as response:
        return [json.loads(line[6:]) async for line in response.aiter_lines()
                if line.startswith("data: ") and line != "data: [DONE]"]

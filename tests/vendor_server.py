"""A scripted, real HTTP stand-in for model vendors, for wire-level provider tests.

It speaks enough of the OpenAI Chat Completions (POST /v1/chat/completions,
plain and SSE streaming) and Anthropic Messages (POST /v1/messages, plain and
SSE streaming) formats for litellm to talk to it, answers from a script, and
records every request so tests can assert on what was actually sent.

    with VendorServer() as srv:
        srv.script(["hello", Reply(tool_calls=[("c1", "add", {"a": 1})]), Fail(429)])
        ... LiteLLMProvider("openai/gpt-4o", api_base=srv.base_url + "/v1", api_key="sk-test")
        srv.requests[0].body["messages"]
"""

from __future__ import annotations

import os

# litellm fetches its model cost map from GitHub at import time unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """A successful answer: text and/or tool calls given as (id, name, arguments); `reasoning`: what the model
    thought first, told as the vendor tells it (OpenAI-compatible `reasoning_content`, Anthropic `thinking`)."""

    text: str = ""
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    input_tokens: int = 11
    output_tokens: int = 7
    reasoning: str = ""


@dataclass
class Fail:
    """An HTTP error with a vendor-shaped body.

    `echo_auth` copies the request's credential header into the error message,
    as careless vendors and proxies do, so tests can check that it is scrubbed.
    """

    status: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    echo_auth: bool = False


@dataclass
class Slow:
    """Answer `then` only after `seconds` (a vendor that hangs past the model-call timeout)."""

    seconds: float
    then: Reply | Fail = field(default_factory=Reply)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


_OPENAI_ERR = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}
_ANTHROPIC_ERR = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                  404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                  500: "api_error", 529: "overloaded_error"}


def _pieces(s: str, size: int) -> list[str]:
    return [s[i:i + size] for i in range(0, len(s), size)]


class VendorServer:
    """Serves on a free 127.0.0.1 port in a background thread while the context is open."""

    def __init__(
        self,
        chunk_size: int = 4,
        *,
        rate_limit: int | None = None,
        responder: Callable[[Any], Reply | Fail] | None = None,
    ):
        """`rate_limit`: at most this many requests in any one second; those above it get a 429 with
        Retry-After (counted in `rejected`). `responder(body)`: the answer when the script is empty."""
        self.chunk_size = chunk_size
        self.rate_limit = rate_limit
        self.responder = responder
        self.rejected = 0
        self.accepted_at: deque[float] = deque()
        """When each request within the last second was let through (time.monotonic)."""
        self.peak_per_second = 0
        self.requests: list[Recorded] = []
        self._queue: deque[Reply | Fail | Slow] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------
    def start(self) -> VendorServer:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> VendorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # -- script ----------------------------------------------------------
    def script(self, items: list[str | Reply | Fail | Slow]) -> None:
        """Queue answers; a bare str is a text Reply."""
        with self._lock:
            self._queue.extend(Reply(text=i) if isinstance(i, str) else i for i in items)

    def _next(self, body: Any = None) -> Reply | Fail | Slow:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Fail(500, "VendorServer: no scripted response left")

    def _admit(self) -> bool:
        """Count the request in its one-second window; False when it is over the rate limit."""
        now = time.monotonic()
        with self._lock:
            while self.accepted_at and now - self.accepted_at[0] >= 1.0:
                self.accepted_at.popleft()
            if self.rate_limit is not None and len(self.accepted_at) >= self.rate_limit:
                self.rejected += 1
                return False
            self.accepted_at.append(now)
            self.peak_per_second = max(self.peak_per_second, len(self.accepted_at))
            return True

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)


class _Handler(BaseHTTPRequestHandler):
    server_owner: VendorServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = self.path.split("?")[0]
        owner = self.server_owner
        owner._record(Recorded(path, headers, body))
        if path.endswith("/chat/completions"):
            vendor = "openai"
        elif path.endswith("/messages"):
            vendor = "anthropic"
        else:
            return self._json(404, {"error": {"message": f"no route {path}", "type": "not_found_error"}})
        if not owner._admit():
            return self._fail(vendor, Fail(429, "rate limit exceeded", headers={"Retry-After": "1"}), headers)
        item = owner._next(body)
        if isinstance(item, Slow):
            time.sleep(item.seconds)
            item = item.then
        model = body.get("model", "") if isinstance(body, dict) else ""
        if isinstance(item, Fail):
            return self._fail(vendor, item, headers)
        if isinstance(body, dict) and body.get("stream"):
            self._sse_start()
            if vendor == "openai":
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self._openai_stream(item, model, include_usage)
            else:
                self._anthropic_stream(item, model)
            self.wfile.flush()
            self.close_connection = True
            return
        self._json(200, _openai_body(item, model) if vendor == "openai" else _anthropic_body(item, model))

    # -- plumbing ---------------------------------------------------------
    def _json(self, status: int, obj: Any, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, vendor: str, f: Fail, headers: dict[str, str]) -> None:
        msg = f.message
        if f.echo_auth:
            msg += f" (credential seen: {headers.get('authorization') or headers.get('x-api-key')})"
        if vendor == "openai":
            body = {"error": {"message": msg, "type": _OPENAI_ERR.get(f.status, "api_error"),
                              "param": None, "code": None}}
        else:
            body = {"type": "error", "error": {"type": _ANTHROPIC_ERR.get(f.status, "api_error"), "message": msg}}
        self._json(f.status, body, f.headers)

    def _sse_start(self) -> None:
        # No Content-Length: the body ends when the connection closes.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

    def _event(self, obj: Any, event: str | None = None) -> None:
        head = f"event: {event}\n" if event else ""
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        self.wfile.write(f"{head}data: {payload}\n\n".encode())
        self.wfile.flush()

    def _openai_stream(self, r: Reply, model: str, include_usage: bool) -> None:
        size = self.server_owner.chunk_size

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000,
                    "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        self._event(chunk({"role": "assistant", "content": ""}))
        for piece in _pieces(r.reasoning, size):
            self._event(chunk({"reasoning_content": piece}))
        for piece in _pieces(r.text, size):
            self._event(chunk({"content": piece}))
        for idx, (cid, name, args) in enumerate(r.tool_calls):
            self._event(chunk({"tool_calls": [{"index": idx, "id": cid, "type": "function",
                                               "function": {"name": name, "arguments": ""}}]}))
            for piece in _pieces(json.dumps(args), size):
                self._event(chunk({"tool_calls": [{"index": idx, "function": {"arguments": piece}}]}))
        self._event(chunk({}, "tool_calls" if r.tool_calls else "stop"))
        if include_usage:
            self._event({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000,
                         "model": model, "choices": [], "usage": _openai_usage(r)})
        self._event("[DONE]")

    def _anthropic_stream(self, r: Reply, model: str) -> None:
        size = self.server_owner.chunk_size
        start = _anthropic_body(Reply(input_tokens=r.input_tokens, output_tokens=1), model)
        start.update(content=[], stop_reason=None)
        self._event({"type": "message_start", "message": start}, "message_start")
        idx = 0
        if r.reasoning:
            self._event({"type": "content_block_start", "index": idx,
                         "content_block": {"type": "thinking", "thinking": ""}}, "content_block_start")
            for piece in _pieces(r.reasoning, size):
                self._event({"type": "content_block_delta", "index": idx,
                             "delta": {"type": "thinking_delta", "thinking": piece}}, "content_block_delta")
            self._event({"type": "content_block_delta", "index": idx,
                         "delta": {"type": "signature_delta", "signature": "c2lnbmVk"}}, "content_block_delta")
            self._event({"type": "content_block_stop", "index": idx}, "content_block_stop")
            idx += 1
        if r.text:
            self._event({"type": "content_block_start", "index": idx,
                         "content_block": {"type": "text", "text": ""}}, "content_block_start")
            for piece in _pieces(r.text, size):
                self._event({"type": "content_block_delta", "index": idx,
                             "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
            self._event({"type": "content_block_stop", "index": idx}, "content_block_stop")
            idx += 1
        for cid, name, args in r.tool_calls:
            self._event({"type": "content_block_start", "index": idx,
                         "content_block": {"type": "tool_use", "id": cid, "name": name, "input": {}}},
                        "content_block_start")
            for piece in _pieces(json.dumps(args), size):
                self._event({"type": "content_block_delta", "index": idx,
                             "delta": {"type": "input_json_delta", "partial_json": piece}}, "content_block_delta")
            self._event({"type": "content_block_stop", "index": idx}, "content_block_stop")
            idx += 1
        self._event({"type": "message_delta",
                     "delta": {"stop_reason": "tool_use" if r.tool_calls else "end_turn", "stop_sequence": None},
                     "usage": {"output_tokens": r.output_tokens}}, "message_delta")
        self._event({"type": "message_stop"}, "message_stop")


def _openai_usage(r: Reply) -> dict[str, int]:
    return {"prompt_tokens": r.input_tokens, "completion_tokens": r.output_tokens,
            "total_tokens": r.input_tokens + r.output_tokens}


def _openai_body(r: Reply, model: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": r.text or None}
    if r.reasoning:
        msg["reasoning_content"] = r.reasoning
    if r.tool_calls:
        msg["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                             for cid, n, a in r.tool_calls]
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": model,
            "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if r.tool_calls else "stop"}],
            "usage": _openai_usage(r)}


def _anthropic_body(r: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": r.reasoning, "signature": "c2lnbmVk"}] \
        if r.reasoning else []
    content += [{"type": "text", "text": r.text}] if r.text else []
    content += [{"type": "tool_use", "id": cid, "name": n, "input": a} for cid, n, a in r.tool_calls]
    return {"id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if r.tool_calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens}}

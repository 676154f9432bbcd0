"""Serve an Agent over the A2A protocol (JSON-RPC 2.0 over HTTP, protocol version 0.2.0).

    from rein import Agent
    from rein.a2a import serve_a2a

    serve_a2a(Agent("openai/gpt-4o-mini", system="You are helpful."), port=8000)

`A2AServer` holds the protocol logic and can be used without HTTP; `serve_a2a`
puts it behind a stdlib `ThreadingHTTPServer` (`make_server` builds one without
blocking). The agent runs with its own engine: durable Temporal workflows by
default, in-process with `engine="local"`.

Methods: `message/send`, `tasks/get`, `tasks/cancel`, and over HTTP `message/stream`
(Server-Sent Events, one JSON-RPC response per event). The agent card is served at
`/.well-known/agent.json` and `/.well-known/agent-card.json`. With `auth_token`, every
POST needs `Authorization: Bearer <token>`. With a session `store`, the conversation
of each `contextId` is kept between messages (one `Chat` turn per message).

Where this differs from rein-agent 0.2.0's A2A server:

- A run that pauses (a tool waiting for approval under `permission="ask"`, an
  `ask_human` question, or a model error that may be retried) leaves its task in
  state `input-required`, not `completed`. The status message says what is pending
  and how to answer, and its `metadata.interrupt` carries the interrupt as data.
  A `message/send` whose message names that task (`message.taskId`) continues the
  same run: for an approval, a reply of "approve", "approved", "yes", "y", "ok" or
  "allow" approves the pending tools and anything else denies them; for a question,
  the reply text is the answer; for a model error, any message retries.
- A run that raises leaves its task `failed` (with the error in the status message)
  instead of propagating out of `handle_rpc`; a streamed run ends with a final
  `failed` status-update event. A streamed run that pauses ends `input-required`
  (streaming cannot continue it; use `message/send` for runs that may pause).
- A task is stored as soon as its run starts (state `working`), so `tasks/get` and
  `tasks/cancel` work during a run. Canceling a running task does not stop the run,
  but its outcome is discarded; canceling a task whose durable run is paused also
  cancels that workflow.
- Requests that are not JSON objects get -32600, and a `message/send` without a
  message object gets -32602, instead of an exception.
- Unknown methods and unknown tasks still use codes -32601 and -32001, with our own
  English messages.
"""

from __future__ import annotations

import asyncio
import copy
import hmac
import json
import threading
import uuid
from collections.abc import AsyncIterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rein import loop
from rein.log import logger
from rein.result import Interrupt, RunResult

__all__ = ["A2A_PROTOCOL_VERSION", "A2AServer", "make_server", "serve_a2a"]

A2A_PROTOCOL_VERSION = "0.2.0"

UNAUTHORIZED = -32001
TASK_NOT_FOUND = -32001
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

_APPROVALS = frozenset({"approve", "approved", "yes", "y", "ok", "allow"})


def _new_id() -> str:
    return uuid.uuid4().hex


def _text_of(message: Mapping[str, Any]) -> str:
    """The concatenated text parts of an A2A message."""
    texts = []
    for part in message.get("parts") or []:
        if isinstance(part, Mapping) and (part.get("kind") == "text" or "text" in part):
            texts.append(str(part.get("text") or ""))
    return "".join(texts)


def _rpc_result(request_id: Any, result: Any) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _rpc_error(request_id: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class A2AServer:
    """The A2A protocol around one Agent: agent card, JSON-RPC methods and streaming events."""

    def __init__(
        self,
        agent: Any,
        *,
        name: str = "Rein Agent",
        description: str | None = None,
        url: str = "http://localhost:8000",
        version: str = "1.0.0",
        store: Any = None,
        auth_token: str | None = None,
    ) -> None:
        self.agent = agent
        self.name = name
        self.description = description or getattr(agent, "system", None) or "An agent served by rein."
        self.url = url
        self.version = version
        self.store = store
        self.auth_token = auth_token
        self._tasks: dict[str, dict] = {}
        # Paused runs by task id: the exact RunResult the engine can resume.
        self._paused: dict[str, RunResult] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ card and auth

    def agent_card(self) -> dict:
        card: dict[str, Any] = {
            "protocolVersion": A2A_PROTOCOL_VERSION,
            "name": self.name,
            "description": self.description,
            "url": self.url,
            "version": self.version,
            "capabilities": {"streaming": True, "pushNotifications": False, "stateTransitionHistory": True},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [
                {"id": "chat", "name": "chat", "description": self.description, "tags": ["chat"]},
            ],
        }
        if self.auth_token:
            card["securitySchemes"] = {"bearerAuth": {"type": "http", "scheme": "bearer"}}
            card["security"] = [{"bearerAuth": []}]
        return card

    def authorize(self, headers: Mapping[str, Any] | None) -> bool:
        """True without a token; otherwise the Authorization header must be exactly `Bearer <token>`."""
        if not self.auth_token:
            return True
        if headers is None:
            return False
        value = headers.get("Authorization") or headers.get("authorization")
        if not isinstance(value, str):
            return False
        return hmac.compare_digest(value.encode(), f"Bearer {self.auth_token}".encode())

    # ------------------------------------------------------------ JSON-RPC

    def handle_rpc(self, request: Any, *, headers: Mapping[str, Any] | None = None) -> dict:
        """Answer one JSON-RPC request (blocking). Inside an event loop use `await ahandle_rpc(...)`."""
        loop.ensure_no_running_loop("A2AServer.handle_rpc()", "server.ahandle_rpc(...)")
        return asyncio.run(self.ahandle_rpc(request, headers=headers))

    async def ahandle_rpc(self, request: Any, *, headers: Mapping[str, Any] | None = None) -> dict:
        """Answer one JSON-RPC request."""
        request_id = request.get("id") if isinstance(request, Mapping) else None
        if not self.authorize(headers):
            return _rpc_error(request_id, UNAUTHORIZED, "Unauthorized")
        if not isinstance(request, Mapping):
            return _rpc_error(None, INVALID_REQUEST, "Invalid request: a JSON-RPC request must be a JSON object.")
        method = request.get("method")
        params = request.get("params")
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            return _rpc_error(request_id, INVALID_PARAMS, "Invalid params: 'params' must be an object.")
        if method == "message/send":
            message = params.get("message")
            if not isinstance(message, Mapping):
                return _rpc_error(request_id, INVALID_PARAMS, "Invalid params: 'params.message' must be an object.")
            return _rpc_result(request_id, await self._send(dict(message)))
        if method == "tasks/get":
            task = self._tasks.get(str(params.get("id")))
            if task is None:
                return self._no_task(request_id, params.get("id"))
            return _rpc_result(request_id, copy.deepcopy(task))
        if method == "tasks/cancel":
            task_id = str(params.get("id"))
            if task_id not in self._tasks:
                return self._no_task(request_id, params.get("id"))
            return _rpc_result(request_id, await self._cancel(task_id))
        if method == "message/stream":
            return _rpc_error(
                request_id, METHOD_NOT_FOUND,
                "Method message/stream needs a streaming transport: use the HTTP server or stream_events().",
            )
        return _rpc_error(request_id, METHOD_NOT_FOUND, f"Unknown method: {method}")

    @staticmethod
    def _no_task(request_id: Any, task_id: Any) -> dict:
        return _rpc_error(request_id, TASK_NOT_FOUND, f"No task with id {task_id!r}.")

    # ------------------------------------------------------------ message/send

    def _new_task(self, message: dict, context_id: str) -> dict:
        """A task in state `working`, registered at once so tasks/get and tasks/cancel see it."""
        task = {
            "id": _new_id(),
            "contextId": context_id,
            "kind": "task",
            "status": {"state": "working"},
            "history": [message],
            "artifacts": [],
        }
        self._tasks[task["id"]] = task
        return task

    async def _send(self, message: dict) -> dict:
        text = _text_of(message)
        task_id = message.get("taskId")
        if isinstance(task_id, str):
            with self._lock:
                paused = self._paused.pop(task_id, None)
            if paused is not None:
                return await self._continue(self._tasks[task_id], message, text, paused)
        context_id = message.get("contextId") or _new_id()
        task = self._new_task(message, context_id)
        try:
            if self.store is not None:
                chat = self.agent.chat(session=self.store.load(context_id))
                result = await chat.asend(text)
                self.store.save(context_id, chat.session)
            else:
                result = await self.agent.arun(text)
        except Exception as exc:
            return self._fail(task, exc)
        return await self._finish(task, result)

    async def _continue(self, task: dict, message: dict, text: str, paused: RunResult) -> dict:
        """A reply to a paused task: approve/deny, answer, or retry the same run."""
        message = {**message, "contextId": task["contextId"]}
        task["history"].append(message)
        task["status"] = {"state": "working"}
        interrupt = paused.interrupt
        kind = interrupt.type if interrupt is not None else "error"
        try:
            if kind == "need_approval":
                approve = text.strip().strip(".!").lower() in _APPROVALS
                result = await self.agent.aresume(paused.session, approve=approve)
            elif kind == "need_input":
                result = await self.agent.aresume(paused.session, answer=text)
            else:
                result = await self.agent.aresume(paused.session)
            if self.store is not None:
                self.store.save(task["contextId"], result.session)
        except Exception as exc:
            return self._fail(task, exc)
        return await self._finish(task, result)

    def _agent_message(self, task: dict, text: str, metadata: dict | None = None) -> dict:
        message = {
            "kind": "message",
            "role": "agent",
            "messageId": _new_id(),
            "parts": [{"kind": "text", "text": text}],
            "contextId": task["contextId"],
            "taskId": task["id"],
        }
        if metadata:
            message["metadata"] = metadata
        return message

    async def _finish(self, task: dict, result: RunResult) -> dict:
        if task["status"].get("state") == "canceled":
            if result.status == "interrupted":
                await _abandon(result)
            return copy.deepcopy(task)
        if result.status == "interrupted":
            interrupt = result.interrupt or Interrupt(type="error", message="The run paused.")
            with self._lock:
                self._paused[task["id"]] = result
            reply = self._agent_message(task, _pending_text(interrupt), {"interrupt": _interrupt_data(interrupt)})
            task["history"].append(reply)
            task["status"] = {"state": "input-required", "message": reply}
            return copy.deepcopy(task)
        text = result.output or ""
        reply = self._agent_message(task, text)
        task["history"].append(reply)
        task["artifacts"] = [{"artifactId": _new_id(), "name": "response", "parts": [{"kind": "text", "text": text}]}]
        task["status"] = {"state": "completed", "message": reply}
        return copy.deepcopy(task)

    def _fail(self, task: dict, exc: Exception) -> dict:
        logger.exception("a2a run failed", extra={"task_id": task["id"]})
        if task["status"].get("state") == "canceled":
            return copy.deepcopy(task)
        reply = self._agent_message(task, f"The agent run failed: {type(exc).__name__}: {exc}")
        task["history"].append(reply)
        task["status"] = {"state": "failed", "message": reply}
        return copy.deepcopy(task)

    # ------------------------------------------------------------ tasks/cancel

    async def _cancel(self, task_id: str) -> dict:
        task = self._tasks[task_id]
        task["status"] = {"state": "canceled"}
        with self._lock:
            paused = self._paused.pop(task_id, None)
        if paused is not None:
            await _abandon(paused)
        return copy.deepcopy(task)

    # ------------------------------------------------------------ message/stream

    async def stream_events(self, request: Mapping[str, Any]) -> AsyncIterator[dict]:
        """The A2A events of one streamed, single-turn run (the store is not used).

        A working status-update, an artifact-update per text chunk, then a final
        status-update: completed, input-required (the run paused) or failed.
        """
        params = request.get("params") or {}
        message = dict(params.get("message") or {}) if isinstance(params, Mapping) else {}
        text = _text_of(message)
        context_id = message.get("contextId") or _new_id()
        task = self._new_task(message, context_id)
        ids = {"taskId": task["id"], "contextId": context_id}
        artifact_id = _new_id()
        yield {"kind": "status-update", **ids, "status": {"state": "working"}, "final": False}

        parts: list[str] = []
        finish = "done"
        error: Exception | None = None
        try:
            async for chunk in self.agent.astream(text):
                if chunk.type == "text" and chunk.text:
                    parts.append(chunk.text)
                    yield {
                        "kind": "artifact-update",
                        **ids,
                        "artifact": {"artifactId": artifact_id, "parts": [{"kind": "text", "text": chunk.text}]},
                        "append": True,
                        "lastChunk": False,
                    }
                elif chunk.type == "done":
                    finish = chunk.finish_reason or "done"
        except Exception as exc:
            logger.exception("a2a stream failed", extra={"task_id": task["id"]})
            error = exc

        full = "".join(parts)
        if task["status"].get("state") == "canceled":
            status: dict[str, Any] = {"state": "canceled"}
        elif error is not None:
            reply = self._agent_message(task, f"The agent run failed: {type(error).__name__}: {error}")
            task["history"].append(reply)
            status = {"state": "failed", "message": reply}
        else:
            task["artifacts"] = [
                {"artifactId": artifact_id, "name": "response", "parts": [{"kind": "text", "text": full}]}
            ]
            if finish == "interrupted":
                reply = self._agent_message(
                    task,
                    "The run paused before finishing (it waits for an approval, an answer or a retry). "
                    "A streamed run cannot be continued; send this request with message/send instead.",
                )
                status = {"state": "input-required", "message": reply}
            else:
                reply = self._agent_message(task, full)
                status = {"state": "completed", "message": reply}
            task["history"].append(reply)
        task["status"] = status
        yield {"kind": "status-update", **ids, "status": status, "final": True}


def _pending_text(interrupt: Interrupt) -> str:
    if interrupt.type == "need_approval":
        return f"{interrupt.message} Reply to this task with \"approve\" to run it, or anything else to deny it."
    if interrupt.type == "need_input":
        return f"{interrupt.message} Reply to this task with your answer."
    return f"{interrupt.message} Send any message to this task to retry."


def _interrupt_data(interrupt: Interrupt) -> dict:
    call = interrupt.tool_call
    return {
        "type": interrupt.type,
        "tool": call.name if call is not None else None,
        "arguments": call.arguments if call is not None else None,
    }


async def _abandon(paused: RunResult) -> None:
    """Cancel the durable workflow that waits for this paused run (nothing to do for local runs)."""
    if paused.run_id is None:
        return
    try:
        from rein import engine

        await engine.cancel_session(paused.session, "task canceled through A2A")
    except Exception:
        logger.exception("a2a could not cancel the paused run", extra={"run_id": paused.run_id})


# ---------------------------------------------------------------- HTTP


_CARD_PATHS = ("/.well-known/agent.json", "/.well-known/agent-card.json")


def make_server(server: A2AServer, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    """An HTTP server for `server`, bound but not serving yet (`port=0` picks a free port)."""

    class Handler(BaseHTTPRequestHandler):
        a2a = server

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            logger.debug("a2a http " + format % args)

        def _send_json(self, status: int, body: Any) -> None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0]
            if path in _CARD_PATHS:
                self._send_json(200, self.a2a.agent_card())
            else:
                self._send_json(404, {"error": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            try:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"")
            except (ValueError, UnicodeDecodeError):
                self._send_json(400, {"error": "invalid json"})
                return
            request_id = request.get("id") if isinstance(request, dict) else None
            if not self.a2a.authorize(self.headers):
                self._send_json(200, _rpc_error(request_id, UNAUTHORIZED, "Unauthorized"))
                return
            if isinstance(request, dict) and request.get("method") == "message/stream":
                self._stream(request)
                return
            try:
                response = self.a2a.handle_rpc(request, headers=self.headers)
            except Exception as exc:
                logger.exception("a2a request failed")
                response = _rpc_error(request_id, INTERNAL_ERROR, f"Internal error: {type(exc).__name__}: {exc}")
            self._send_json(200, response)

        def _stream(self, request: dict) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

            async def pump() -> None:
                events = self.a2a.stream_events(request)
                try:
                    async for event in events:
                        line = json.dumps(_rpc_result(request.get("id"), event), ensure_ascii=False)
                        self.wfile.write(f"data: {line}\n\n".encode("utf-8"))
                        self.wfile.flush()
                finally:
                    await events.aclose()

            try:
                asyncio.run(pump())
            except (BrokenPipeError, ConnectionResetError):
                logger.debug("a2a stream client went away")

    return ThreadingHTTPServer((host, port), Handler)


def serve_a2a(
    agent: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = "Rein Agent",
    description: str | None = None,
    version: str = "1.0.0",
    store: Any = None,
    auth_token: str | None = None,
) -> None:
    """Serve `agent` over A2A on http://host:port until Ctrl-C."""
    a2a = A2AServer(
        agent, name=name, description=description, url=f"http://{host}:{port}",
        version=version, store=store, auth_token=auth_token,
    )
    httpd = make_server(a2a, host, port)
    bound_port = httpd.server_address[1]
    if bound_port != port:
        a2a.url = f"http://{host}:{bound_port}"
    print(f"rein A2A server '{name}' listening on {a2a.url}")
    print(f"  agent card: {a2a.url}/.well-known/agent.json  (Ctrl-C to stop)")
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        print("\nrein A2A server stopped.")
    finally:
        httpd.server_close()

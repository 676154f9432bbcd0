"""Serve an Agent over the A2A protocol with the official `a2a-sdk` (protocol 1.0, JSON-RPC over HTTP).

    from rein import Agent
    from rein.web.a2a import serve_a2a

    serve_a2a(Agent("openai/gpt-4o-mini", system="You are helpful."), port=8000)

Needs the `a2a` extra: `pip install 'rein[a2a]'`. The SDK does the protocol (JSON-RPC
methods, Server-Sent Events for streaming, the agent card at `/.well-known/agent-card.json`,
version negotiation, 0.3 clients on the same endpoint); rein supplies the `AgentExecutor`
that turns each task into a run of the agent on its own engine (a durable Temporal
workflow by default, in-process with `engine="local"`).

A task is a run. With `state_dir` (`serve_a2a`'s default: `REIN_HOME/a2a/<agent name>`),
tasks live in an SQLite task store (the SDK's `DatabaseTaskStore`) and a paused run's Session
(which names its durable run) is kept next to them, so a restarted server still answers
`GetTask` and continues a paused task: on the durable engine it signals the very workflow
that waits.

- A run that pauses (a tool waiting for approval under `permission="ask"`, an `ask_human`
  question, a model error that may be retried) leaves its task `input-required`; the status
  message says what is pending and its metadata carries the interrupt as data. A message with
  that task's id continues the run: for an approval, "approve", "approved", "yes", "y", "ok"
  or "allow" approves the pending tools and anything else denies them; for a question the text
  is the answer; after a model error any message retries.
- A run that raises leaves its task `failed`, with the error in the status message.
- A task a crash cut off (the server stopped while it was `submitted` or `working`) is marked
  `failed` when the server starts again, with a status message that says so (send it again).
- On the durable engine each context id is a thread (rein.core.threads): its conversation lives in Temporal,
  a task is a turn, and any server of the same agent goes on with it. On the local engine, with a session
  `store`, the conversation of each context id is kept between tasks.
- A streaming (`message/stream`) client gets a new task's text as the model writes it: chunks
  appended to the task's `response` artifact, then a closing chunk that replaces them with the
  whole answer (so the task holds it once). A reply to a paused task is answered whole
  (`Agent.aresume` does not stream). docs/streaming.md says more.
- With `auth_token`, every request to the JSON-RPC endpoint needs `Authorization: Bearer <token>`
  (HTTP 401 otherwise); the agent card stays public and names the bearer scheme. Without it, anyone who reaches
  the server may use it (rein-agent 0.2.0's default), and the server says so as it starts.
- Like every rein web surface it sits behind rein.web.guard: it serves loopback names, REIN_WEB_PUBLIC_HOST and the
  host its card's `url` names (403 otherwise: a DNS-rebound name), and a browser page of another site changes
  nothing (403/415). Served on 0.0.0.0, give the name clients use as `url` or in REIN_WEB_PUBLIC_HOST.
"""

from __future__ import annotations

import contextlib
import hmac
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rein import settings
from rein.blueprint.store import FileSessionStore, MemorySessionStore
from rein.core.ir import StreamChunk
from rein.core.log import logger
from rein.core.result import Interrupt, RunResult
from rein.web.guard import Policy, surface

try:
    from a2a.helpers.proto_helpers import (
        new_task_from_user_message,
        new_text_message,
        new_text_part,
    )
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskStore, TaskUpdater
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        Role,
        SecurityRequirement,
        SecurityScheme,
        StringList,
        TaskState,
    )
    from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
    from google.protobuf.json_format import MessageToDict
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(f"rein.web.a2a needs the a2a extra: pip install 'rein[a2a]' ({exc})") from None

__all__ = ["A2A_PROTOCOL_VERSION", "A2AServer", "make_server", "serve_a2a"]

A2A_PROTOCOL_VERSION = PROTOCOL_VERSION_CURRENT
"""The A2A protocol version the server speaks (0.3 clients are served too)."""

_APPROVALS = frozenset({"approve", "approved", "yes", "y", "ok", "allow"})
_RPC_PATH = "/"
_RESPONSE = "response"
"""The id of a task's one answer artifact: live chunks append to it, the whole answer replaces them."""


class A2AServer:
    """One Agent as an A2A server: the agent card, the SDK's request handler and rein's executor.

    `app()` is the ASGI application (Starlette); `make_server` / `serve_a2a` run it with uvicorn.
    """

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
        state_dir: str | Path | None = None,
    ) -> None:
        self.agent = agent
        self.name = name
        self.description = description or getattr(agent, "system", None) or "An agent served by rein."
        self.url = url
        self.version = version
        self.store = store
        self.threads = agent._engine() != "local"
        """Each context id is a thread (rein.core.threads) of the durable engine; the local engine keeps a
        context's conversation in `store`, if given."""
        self.auth_token = auth_token
        self.state_dir = Path(state_dir) if state_dir is not None else None
        # The Session of each paused run, by task id: what a reply continues from.
        self.paused: Any = (
            FileSessionStore(self.state_dir / "paused") if self.state_dir is not None else MemorySessionStore()
        )
        self.task_store: TaskStore = self._task_store()

    def thread_id(self, context_id: str) -> str:
        """The thread of an A2A context: the agent's name and the context id (another agent's context is another thread)."""
        return f"{self.agent.name}-a2a-{context_id}"

    def _task_store(self) -> TaskStore:
        if self.state_dir is None:
            return InMemoryTaskStore()
        from a2a.server.tasks import DatabaseTaskStore
        from sqlalchemy.ext.asyncio import create_async_engine

        self.state_dir.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(f"sqlite+aiosqlite:///{self.state_dir / 'tasks.db'}")
        return DatabaseTaskStore(engine)

    def agent_card(self) -> AgentCard:
        card = AgentCard(
            name=self.name,
            description=self.description,
            version=self.version,
            supported_interfaces=[
                AgentInterface(
                    url=self.url,
                    protocol_binding=TransportProtocol.JSONRPC.value,
                    protocol_version=A2A_PROTOCOL_VERSION,
                )
            ],
            capabilities=AgentCapabilities(streaming=True, push_notifications=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="chat", name="chat", description=self.description, tags=["chat"])],
        )
        if self.auth_token:
            card.security_schemes["bearerAuth"].CopyFrom(
                SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
            )
            card.security_requirements.append(SecurityRequirement(schemes={"bearerAuth": StringList(list=[])}))
        return card

    def authorize(self, headers: Any) -> bool:
        """True without a token; otherwise the Authorization header must be exactly `Bearer <token>`."""
        if not self.auth_token:
            return True
        value = headers.get("authorization") if headers is not None else None
        if not isinstance(value, str):
            return False
        return hmac.compare_digest(value.encode(), f"Bearer {self.auth_token}".encode())

    def app(self) -> Starlette:
        """The ASGI application: the agent card routes and the JSON-RPC endpoint."""
        if not self.auth_token:  # rein-agent 0.2.0's default, kept: said where the operator looks
            logger.warning("a2a: no auth_token: any A2A client that reaches %s starts tasks and answers paused ones "
                           "(approvals) without signing in; pass auth_token=... to require a bearer token", self.url)
        card = self.agent_card()
        handler = DefaultRequestHandler(agent_executor=_RunExecutor(self), task_store=self.task_store, agent_card=card)
        routes = [
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, _RPC_PATH, enable_v0_3_compat=True),
        ]
        # Behind rein.web.guard like every rein surface: a page of another site, or a DNS-rebound name, changes nothing.
        # The hosts served: loopback, REIN_WEB_PUBLIC_HOST and the host the card names.
        hosts = [*settings.current().web_public_host, urlsplit(self.url).netloc]
        web = surface(routes, lifespan=self._lifespan, policy=Policy.from_settings(hosts=hosts))
        web.add_middleware(_BearerAuth, server=self)
        return web

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.recover()
        yield

    async def recover(self) -> int:
        """Mark tasks a crash cut off (still submitted or working in the store) failed; how many."""
        if self.state_dir is None:
            return 0
        from a2a.server.context import ServerCallContext
        from a2a.types import ListTasksRequest

        context, cut_off = ServerCallContext(), []
        for state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING):
            token = ""
            while True:
                page = await self.task_store.list(ListTasksRequest(status=state, page_size=100, page_token=token), context)
                cut_off += list(page.tasks)
                token = page.next_page_token
                if not token:
                    break
        for task in cut_off:
            task.status.state = TaskState.TASK_STATE_FAILED
            task.status.message.CopyFrom(new_text_message(
                "The A2A server stopped while this task ran; its run's outcome is unknown here. Send the message again.",
                context_id=task.context_id, task_id=task.id, role=Role.ROLE_AGENT))
            task.status.timestamp.GetCurrentTime()
            await self.task_store.save(task, context)
        if cut_off:
            logger.warning("a2a: %d task(s) cut off by a stop were marked failed", len(cut_off))
        return len(cut_off)


class _BearerAuth:
    """Refuses JSON-RPC requests without the server's bearer token; the agent card stays public."""

    def __init__(self, app: ASGIApp, server: A2AServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "POST":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            if not self.server.authorize(headers):
                body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Unauthorized"}}
                response = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _RunExecutor(AgentExecutor):
    """Each new task starts a run; a message to a paused (input-required) task continues it."""

    def __init__(self, server: A2AServer) -> None:
        self.server = server

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            task.id, task.context_id = context.task_id or task.id, context.context_id or task.context_id
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        paused = self.server.paused.load(task.id)
        await updater.start_work()
        try:
            if paused is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                result = await self._continue(paused, text, MessageToDict(task.status.message.metadata),
                                             _peer(context, bool(self.server.auth_token)))
                self.server.paused.delete(task.id)
            else:
                result = await self._start(task.context_id, text, _LiveText(updater))
        except Exception as exc:
            logger.exception("a2a run failed", extra={"task_id": task.id})
            await updater.failed(self._say(updater, f"The agent run failed: {type(exc).__name__}: {exc}"))
            return
        if self.server.store is not None and not self.server.threads:
            self.server.store.save(task.context_id, result.session)
        if result.status == "interrupted":
            interrupt = result.interrupt or Interrupt(type="error", message="The run paused.")
            self.server.paused.save(task.id, result.session)
            message = self._say(updater, _pending_text(interrupt))
            message.metadata.update({"interrupt": _interrupt_data(interrupt)})
            await updater.requires_input(message)
            return
        answer = result.output or ""
        # One part with the whole answer replaces the live chunks: the task a client gets holds it once.
        await updater.add_artifact(
            [new_text_part(answer)], artifact_id=_RESPONSE, name="response", append=False, last_chunk=True
        )
        await updater.complete(self._say(updater, answer))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Ends the task; a paused durable run is cancelled too (a running one is abandoned)."""
        task_id = context.task_id or ""
        session = self.server.paused.load(task_id)
        if session is not None:
            self.server.paused.delete(task_id)
            await _abandon(session)
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        await updater.cancel()

    async def _start(self, context_id: str, text: str, live: _LiveText) -> RunResult:
        """A new turn of the context's thread (durable engine), or a new run (a Chat turn with a store), its text
        sent to the client as the model writes it."""
        agent = self.server.agent
        if self.server.threads:
            items = agent.chat(thread_id=self.server.thread_id(context_id))._astream(text)
        elif self.server.store is not None:
            items = agent.chat(session=self.server.store.load(context_id))._astream(text)
        else:
            items = agent._astream_run(prompt=text)
        result = None
        async for item in items:
            if isinstance(item, RunResult):
                result = item
            else:
                await live.send(item)
        if result is None:
            raise RuntimeError("the run's stream ended without its result")
        return result

    async def _continue(self, session: Any, text: str, metadata: dict[str, Any], peer: str) -> RunResult:
        """A reply to a paused task: approve/deny, answer, or retry the same run, recorded as the peer's."""
        agent = self.server.agent
        kind = (metadata.get("interrupt") or {}).get("type", "error")
        if kind == "need_approval":
            approve = text.strip().strip(".!").lower() in _APPROVALS
            return await agent.aresume(session, approve=approve, approver=peer)
        if kind == "need_input":
            return await agent.aresume(session, answer=text, approver=peer)
        return await agent.aresume(session, approver=peer)

    @staticmethod
    def _say(updater: TaskUpdater, text: str) -> Any:
        return new_text_message(text, context_id=updater.context_id, task_id=updater.task_id, role=Role.ROLE_AGENT)


def _peer(context: Any, token: bool) -> str:
    """Who a reply over A2A comes from, as its decision records it (never this process's person: the reply is a
    remote peer's): the user the A2A server authenticated, else `a2a:token` (a holder of the server's bearer
    token), else `a2a:anonymous`."""
    user = context.call_context.user if context.call_context is not None else None
    if user is not None and user.is_authenticated:
        return f"a2a:{user.user_name}"
    return "a2a:token" if token else "a2a:anonymous"


class _LiveText:
    """A run's text as it comes, as chunks appended to the task's "response" artifact. Text that a
    tool call follows was not the answer: the next model call's text starts the artifact again."""

    def __init__(self, updater: TaskUpdater) -> None:
        self.updater = updater
        self.fresh = True

    async def send(self, chunk: StreamChunk) -> None:
        if chunk.type == "tool_calls":
            self.fresh = True
        elif chunk.type == "text" and chunk.text:
            await self.updater.add_artifact(
                [new_text_part(chunk.text)], artifact_id=_RESPONSE, name="response", append=not self.fresh,
                last_chunk=False,
            )
            self.fresh = False


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


async def _abandon(session: Any) -> None:
    """Cancel the durable workflow that waits on this Session (nothing to do for local runs)."""
    try:
        from rein.durable import engine

        await engine.cancel_session(session, "task canceled through A2A")
    except Exception:
        logger.exception("a2a could not cancel the paused run")


# ---------------------------------------------------------------- HTTP


class _Served:
    """A uvicorn server running in a background thread (what `make_server` returns)."""

    def __init__(self, server: A2AServer, host: str, port: int) -> None:
        import uvicorn

        config = uvicorn.Config(server.app(), host=host, port=port, log_level="warning", lifespan="on")
        self.uvicorn = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.uvicorn.run, name="rein-a2a", daemon=True)
        self.a2a = server

    def start(self, timeout: float = 30) -> _Served:
        self.thread.start()
        for _ in range(int(timeout * 20)):
            if self.uvicorn.started:
                return self
            if not self.thread.is_alive():
                break
            threading.Event().wait(0.05)
        raise RuntimeError("the A2A server did not start")

    def shutdown(self) -> None:
        self.uvicorn.should_exit = True
        self.thread.join(timeout=10)


def make_server(server: A2AServer, host: str = "127.0.0.1", port: int = 8000) -> _Served:
    """Start `server` over HTTP in a background thread (`port=0` picks a free port); `.shutdown()` stops it."""
    if port == 0:
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        server.url = f"http://{host}:{port}"  # before the card is built
    return _Served(server, host, port).start()


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
    state_dir: str | Path | None = None,
) -> None:
    """Serve `agent` over A2A on http://host:port until Ctrl-C.

    Tasks are kept in `state_dir`, by default `REIN_HOME/a2a/<agent name>`, so they outlive the server.
    """
    import uvicorn

    if state_dir is None:
        from rein.durable.embedded_server import rein_home

        state_dir = rein_home() / "a2a" / str(getattr(agent, "name", "agent"))
    a2a = A2AServer(
        agent, name=name, description=description, url=f"http://{host}:{port}",
        version=version, store=store, auth_token=auth_token, state_dir=state_dir,
    )
    print(f"rein A2A server '{name}' on {a2a.url} (agent card: {a2a.url}/.well-known/agent-card.json)")
    uvicorn.run(a2a.app(), host=host, port=port, log_level="warning", lifespan="on")

"""The AG-UI endpoint: a browser's agent UI (`@ag-ui/client`'s HttpAgent, CopilotKit, ...) talking to rein threads.

`app(client, agents=[...])` is an ASGI app (Starlette) to mount anywhere; `rein serve` mounts it at `/agui`:

- `POST /{agent}` takes a `RunAgentInput` and answers with the AG-UI run as server-sent events. `threadId` is the
  rein thread id (the first message starts the thread), the new user message goes to the thread with its id as the
  message id (a retried POST joins the same turn), trailing tool messages answer the client tool calls the turn
  waits for, and `resume` entries decide the interrupts the previous run ended with (rein.web.agui_input), each
  bound to the wait its interrupt id names (rein.web.resume: a stale one is a RUN_ERROR, nothing decided).
- `GET /{agent}/{threadId}` is a viewer's stream of the thread's turns (EventSource: it reconnects by itself).

Every event has an id; a client that sends the last one it has (`Last-Event-ID`) gets every later event once
(rein.web.agui_events). Viewers in one process share one reader per thread (rein.web.hub). Callers sign in as on
every rein web surface (rein.web.auth: the shared token or a JWT; none configured: the local token under
REIN_HOME; open only when asked, loopback only), a JWT's tenant claim scopes the threads they reach, and a stream
ends when the caller's sign-in expires. `POST /read-token` mints a read token for an EventSource
(`GET ...?read_token=`). Every request goes through rein.web.guard first. docs/web.md tells it all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ag_ui.core import BaseEvent, MessagesSnapshotEvent, RunErrorEvent, RunFinishedEvent, RunStartedEvent
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from rein.client import DecisionRejected, NoWorker, ReinClient, ThreadRefused
from rein.core.contract import SEARCH_KEYS
from rein.core.shared_state import StateError, check
from rein.temporal.bearer import BearerAuth
from rein.web import resume
from rein.web.agui_events import Emitted, Resumed, TurnEvents, parse_event_id, snapshot, state_snapshot
from rein.web.agui_input import Ask, BadInput, read
from rein.web.auth import Viewer, WebAuth
from rein.web.guard import surface
from rein.web.hub import Hub

log = logging.getLogger("rein.agui")

KEEPALIVE_S = 15.0
"""An SSE comment this often while nothing happens, so proxies keep the connection."""
AGENT_LOOKUP_S = 10.0
"""How long an endpoint serving any agent (none named) looks for a worker that knows one before it answers 404."""
TENANT_CLAIM: str | None = None
"""The JWT claim naming a caller's tenant: None reads REIN_TENANT_CLAIM, else `tenant` (rein.web.auth)."""


class Refused(Exception):
    """An HTTP refusal before the stream starts (`status`, the message)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class AgUi:
    """The endpoint's state: the client, the agents it serves, the check, the hub."""

    def __init__(self, client: Client, agents: Sequence[Any], *, task_queue: str | None,
                 auth: BearerAuth | WebAuth | None, tenant_claim: str | None, open: bool | None = None):
        self.runs = ReinClient(client.client if isinstance(client, ReinClient) else client,
                               task_queue or (client.task_queue if isinstance(client, ReinClient) else None))
        self.agents = {_name(a): a for a in agents}
        """The agents served (none given: any agent a worker on the client's queues knows, looked up once)."""
        self.queues: dict[str, str] = {name: self.runs.task_queue for name in self.agents}
        self.auth = auth if isinstance(auth, WebAuth) else WebAuth(auth, tenant_claim, open=open)
        self.hub = Hub(self.runs.client)
        self.encoder = EventEncoder()

    # ---------------------------------------------------------------- requests

    async def post(self, request: Request) -> Response:
        try:
            caller = await self._caller(request)
            agent = await self._agent(request.path_params["agent"])
            ask = read(await request.body())
            self._check_tools(agent, ask)
            await self._reach(ask.input.thread_id, agent, caller, must_exist=ask.kind != "message")
            ask.state = await self._page_state(ask.input.thread_id, ask.input.state, _prop_int(ask, "stateVersion"), caller)
        except Refused as refused:
            return JSONResponse({"error": str(refused)}, status_code=refused.status)
        except BadInput as bad:
            return JSONResponse({"error": str(bad)}, status_code=422)
        last = parse_event_id(request.headers.get("last-event-id") or _prop(ask, "lastEventId"))
        events = self._resumed(ask, last) if last is not None else self._run(ask, agent, caller)
        return self._stream(events, caller)

    async def get(self, request: Request) -> Response:
        try:
            caller = await self._caller(request)
            agent = await self._agent(request.path_params["agent"])
            thread_id = request.path_params["thread_id"]
            await self._reach(thread_id, agent, caller, must_exist=True)
        except Refused as refused:
            return JSONResponse({"error": str(refused)}, status_code=refused.status)
        last = parse_event_id(request.headers.get("last-event-id") or request.query_params.get("after"))
        return self._stream(self._follow(thread_id, last), caller)

    async def read_token(self, request: Request) -> Response:
        """A short-lived token for reads only: `GET /{agent}/{threadId}?read_token=...` from an EventSource."""
        try:
            caller = await self._caller(request)
        except Refused as refused:
            return JSONResponse({"error": str(refused)}, status_code=refused.status)
        return JSONResponse(self.auth.mint_read(caller))

    async def _caller(self, request: Request) -> Viewer:
        """Who calls (the inbox page's sign-in and tenant rule, rein.web.auth), recorded on what they decide."""
        try:
            return await self.auth.viewer(request)
        except HTTPException as refused:
            raise Refused(refused.status_code, str(refused.detail)) from None

    async def _agent(self, name: str) -> str:
        """The agent's name, once it is known to be served (its threads' task queue in `queues`): else 404."""
        if name in self.queues:
            return name
        if self.agents:
            raise Refused(404, f"no agent {name!r} here; this endpoint serves: {', '.join(sorted(self.agents))}")
        from rein.ops.worker_lookup import AgentNotServed, queue_for

        try:
            self.queues[name] = await asyncio.wait_for(queue_for(self.runs, name), AGENT_LOOKUP_S)
        except (AgentNotServed, TimeoutError):
            raise Refused(404, f"no worker serves an agent {name!r} (start one: rein worker --agent MODULE:ATTR)") from None
        return name

    def _check_tools(self, agent: str, ask: Ask) -> None:
        own = _tool_names(self.agents.get(agent))
        taken = sorted(own & {t.name for t in ask.tools})
        if taken:
            raise BadInput(f"client tools may not take the agent's own tool names: {', '.join(taken)}")

    def _tenant(self, caller: Viewer) -> str | None:
        return caller.tenant

    async def _reach(self, thread_id: str, agent: str, caller: Viewer, must_exist: bool = False) -> None:
        """The thread is the agent's and in the caller's tenant (or does not exist yet): else 404/409."""
        try:
            described = await self.runs.client.get_workflow_handle(thread_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND and not must_exist:
                return
            raise Refused(404, f"no thread {thread_id!r}") from None
        attributes = described.typed_search_attributes
        tenant = self._tenant(caller)
        if tenant is not None and attributes.get(SEARCH_KEYS["ReinTenant"]) != tenant:
            raise Refused(404, f"no thread {thread_id!r} in tenant {tenant!r}")
        owner = attributes.get(SEARCH_KEYS["ReinAgent"])
        if owner and owner != agent:
            raise Refused(409, f"thread {thread_id!r} is agent {owner!r}'s, not {agent!r}'s")

    # ---------------------------------------------------------------- what a POST does

    async def _run(self, ask: Ask, agent: str, caller: Viewer) -> AsyncIterator[Emitted]:
        """Send what the input brings, then tell the run that follows from the thread's stream."""
        thread_id, run_id = ask.input.thread_id, ask.input.run_id
        run = TurnEvents(thread_id, run_id, anchor=0)
        # Sent by a task of its own: a client that leaves after RUN_STARTED (told at once: the message may wait for
        # a worker to take it) cancels only its response, never the message it sent.
        sending = asyncio.ensure_future(self._send(ask, agent, caller, run))
        sending.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved even if nobody waits
        yield None, run.started()
        try:
            offset = await asyncio.shield(sending)
        except (ThreadRefused, DecisionRejected, NoWorker, RPCError) as refused:
            yield None, RunErrorEvent(message=str(refused), code=getattr(refused, "kind", type(refused).__name__))
            return
        yield None, await self._state_snapshot(thread_id, run)
        if ask.kind == "watch":  # a page that opens the thread: the conversation so far (before the turn under way)
            messages = (await self.runs.session(thread_id)).messages
            asked = [n for n, m in enumerate(messages) if m.role == "user"]
            yield None, snapshot(messages[: asked[-1] + 1] if offset >= 0 and asked else messages)
        if offset < 0:  # nothing under way to tell
            yield None, RunFinishedEvent(thread_id=thread_id, run_id=run_id, result={"idle": True})
            return
        run.anchor = offset
        async for emitted in self._told(thread_id, offset, run):
            yield emitted

    async def _send(self, ask: Ask, agent: str, caller: Viewer, run: TurnEvents) -> int:
        """Give the thread what the input brings; the stream offset the run is told from (-1: nothing to tell)."""
        thread_id, who = ask.input.thread_id, caller.subject
        if ask.kind == "message":
            sender = self.runs if self.queues[agent] == self.runs.task_queue else ReinClient(self.runs.client, self.queues[agent])
            receipt = await sender.send(thread_id, ask.text, agent=agent, mode=ask.mode,
                                           message_id=ask.message_id, sender=who, tenant=self._tenant(caller),
                                           stream=True, tools=ask.tools, state=ask.state)
            run.waiting_for = None if receipt.joined else ask.message_id
            return receipt.offset
        if ask.kind == "results":
            status = await self.runs.status(thread_id)
            resume.results_fit(status, thread_id, ask.shown)
            taken = await self.runs.tool_results(thread_id, ask.results, approver=who, wait=status.wait,
                                                 until_taken=True, update_id=f"agui-{ask.input.run_id}-results")
            run.answering = frozenset(taken.answered)
            return taken.offset
        view = await self.runs.thread(thread_id)
        if ask.kind == "resume":
            run.answering = await resume.decide(self.runs, thread_id, ask.decisions, who=who,
                                                update_prefix=f"agui-{ask.input.run_id}")
            return view.offset
        return view.turn_offset if view.open else -1

    async def _told(self, thread_id: str, offset: int, run: TurnEvents,
                    resumed: Resumed | None = None) -> AsyncIterator[Emitted]:
        async with self.hub.watch(thread_id, offset) as feed:
            async for at, item, more in feed.read(offset):
                emitted = run.feed(at, item, more)
                for pair in resumed(emitted) if resumed is not None else emitted:
                    if isinstance(pair[1], MessagesSnapshotEvent) and not pair[1].messages:  # before an interrupt
                        pair[1].messages = snapshot((await self.runs.session(thread_id)).messages).messages
                    yield pair
                    if run.follow and isinstance(pair[1], RunStartedEvent):  # each of a viewer's runs: the state
                        yield None, await self._state_snapshot(thread_id, run)
                if run.finished:
                    return

    async def _resumed(self, ask: Ask, last: tuple[int, int, int]) -> AsyncIterator[Emitted]:
        """A POST that reconnects: the same run's events after `last`, from a translator rebuilt at its anchor."""
        anchor, offset, k = last
        run = TurnEvents(ask.input.thread_id, ask.input.run_id, anchor=anchor)
        resumed = Resumed((offset, k))
        yield ".".join(map(str, last)), run.started()
        yield None, await self._state_snapshot(ask.input.thread_id, run)
        async for pair in self._told(ask.input.thread_id, anchor, run, resumed):
            yield pair
        end = resumed.missed_end()
        if end is not None:  # the client had the run's end: this request is a run too, and ends the same way
            yield None, snapshot((await self.runs.session(ask.input.thread_id)).messages)
            yield None, end

    async def _follow(self, thread_id: str, last: tuple[int, int, int] | None) -> AsyncIterator[Emitted]:
        """A viewer's stream: every turn from the one under way (or the next) on, each an AG-UI run."""
        if last is None:
            view = await self.runs.thread(thread_id)
            anchor = view.turn_offset if view.open else view.offset
        else:
            anchor = last[0]
        run = TurnEvents(thread_id, "", anchor=anchor, follow=True)
        async for pair in self._told(thread_id, anchor, run, Resumed(last[1:]) if last is not None else None):
            yield pair

    # ---------------------------------------------------------------- shared state (rein.core.shared_state)

    async def _page_state(self, thread_id: str, value: Any, version: int | None, caller: Viewer) -> Any:
        """A page's state with its input. Written only when the page names the version it read (`version`; AG-UI
        clients send their state with every run, so a state without one is what the page holds, not a write): the
        thread's own already, nothing; else refused (409) when the state changed since. A new thread starts with it:
        returned for its first message."""
        if value is None:
            return None
        try:
            check(value)
        except StateError as refused:
            raise BadInput(str(refused)) from None
        try:
            current = await self.runs.state(thread_id)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return value if value != {} else None  # the thread's first message starts it with this state
        if version is None or value == current.value:
            return None
        try:
            await self.runs.set_state(thread_id, value, version=version, by=caller.subject)
        except (DecisionRejected, NoWorker) as refused:
            raise Refused(409, f"the page's state was not written: {refused}") from None
        return None

    async def _state_snapshot(self, thread_id: str, run: TurnEvents) -> BaseEvent:
        """STATE_SNAPSHOT of the thread's state now; the run tells only later changes."""
        state = await self.runs.state(thread_id)
        run.state_version = state.version
        return state_snapshot(state)

    # ---------------------------------------------------------------- the response

    def _stream(self, events: AsyncIterator[Emitted], caller: Viewer) -> StreamingResponse:
        return StreamingResponse(self._sse(events, caller), media_type=self.encoder.get_content_type(),
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def _sse(self, events: AsyncIterator[Emitted], caller: Viewer) -> AsyncIterator[str]:
        """Each event as SSE with its id (also in its metadata: HttpAgent does not show SSE ids); a comment while
        nothing happens; a RUN_ERROR (`SignInExpired`) and the end when the caller's sign-in expires. A client that
        goes away ends only this response: the turn goes on in its thread."""
        queue: asyncio.Queue[Emitted | None] = asyncio.Queue()

        async def produce() -> None:
            try:
                async for pair in events:
                    await queue.put(pair)
            except Exception as exc:  # the thread's stream could not be read: the client hears why
                log.warning("AG-UI stream failed: %s", exc)
                await queue.put((None, RunErrorEvent(message=f"reading the thread failed: {exc}", code="StreamFailed")))
            finally:
                await queue.put(None)

        producer = asyncio.create_task(produce())
        try:
            while True:
                left = caller.left_s()
                if left is not None and left <= 0:
                    yield self.encoder.encode(RunErrorEvent(message="your sign-in expired: sign in again",
                                                            code="SignInExpired"))
                    break
                try:
                    pair = await asyncio.wait_for(queue.get(), KEEPALIVE_S if left is None else min(KEEPALIVE_S, left))
                except TimeoutError:
                    if left is None or left > KEEPALIVE_S:
                        yield ": keepalive\n\n"
                    continue
                if pair is None:
                    break
                yield self._encoded(*pair)
        finally:
            producer.cancel()
            with contextlib.suppress(BaseException):
                await producer

    def _encoded(self, event_id: str | None, event: BaseEvent) -> str:
        if event_id is None:
            return self.encoder.encode(event)
        metadata = event.metadata or {}
        event.metadata = {**metadata, "rein": {**metadata.get("rein", {}), "eventId": event_id}}
        return f"id: {event_id}\n" + self.encoder.encode(event)


def app(client: Client, agents: Sequence[Any] = (), *, task_queue: str | None = None,
        auth: BearerAuth | WebAuth | None = None, tenant_claim: str | None = TENANT_CLAIM,
        open: bool | None = None) -> Starlette:
    """The AG-UI endpoint for `agents` (Agent objects or the names of agents workers serve; none: any agent a worker
    knows, on its own queue or `task_queue`), on `client` (a temporalio Client or a ReinClient). `auth`: who may
    call (default: the environment's sign-in settings; none set: the local token under REIN_HOME, as `rein serve`);
    `open` (default REIN_WEB_OPEN): nobody signs in, loopback peers only; `tenant_claim`: the JWT claim naming a
    caller's tenant. Guarded (rein.web.guard: REIN_WEB_ORIGINS, REIN_WEB_PUBLIC_HOST, REIN_WEB_MAX_BODY). Its
    `state.agui` is the endpoint (`hub.readers`: threads read now)."""
    endpoint = AgUi(client, agents, task_queue=task_queue, auth=auth, tenant_claim=tenant_claim, open=open)
    routes = [Route("/read-token", endpoint.read_token, methods=["POST"]),
              Route("/{agent}", endpoint.post, methods=["POST"]),
              Route("/{agent}/{thread_id:path}", endpoint.get, methods=["GET"])]

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await endpoint.hub.close()

    web = surface(routes, open=endpoint.auth.open, lifespan=lifespan)
    web.state.agui = endpoint
    return web


def _name(agent: Any) -> str:
    return agent if isinstance(agent, str) else str(agent.name)


def _tool_names(agent: Any) -> set[str]:
    registry = getattr(agent, "registry", None)
    return set(registry.names()) if registry is not None else set()


def _prop_int(ask: Ask, name: str) -> int | None:
    props = ask.input.forwarded_props
    value = props.get(name) if isinstance(props, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _prop(ask: Ask, name: str) -> str | None:
    props = ask.input.forwarded_props
    value = props.get(name) if isinstance(props, dict) else None
    return value if isinstance(value, str) else None



"""The AI SDK endpoint: `useChat` (`ai` 7.x, `@ai-sdk/react` 4.x) talking to rein threads, beside AG-UI.

`app(client, agents=[...])` is an ASGI app; `rein serve` mounts it at `/ai-sdk`. `DefaultChatTransport` given
`api: "/ai-sdk/AGENT"` (and, where sign-in is on, `headers` with the bearer token) speaks it as it is:

- `POST /{agent}`: the chat request (rein.web.ai_sdk_input); the chat id is the rein thread id. Answers with the
  UI message stream (SSE, `x-vercel-ai-ui-message-stream: v1`) of the turn the request starts or goes on with.
- `GET /{agent}/{chat_id}/stream`: `useChat`'s `resume`: the turn under way replayed from its start (the active
  assistant message, whole) and on to its end or its next wait; 204 when no turn is under way.
- `GET /{agent}/{chat_id}/messages`: the thread's conversation as `UIMessage[]`, for a page that opens a chat.
- `POST /{agent}/{chat_id}/stop`: stop the turn under way (the thread stays; a closed connection stops nothing).
- `GET`/`PUT /{agent}/{chat_id}/state`: the thread's shared state (rein.core.shared_state), written on the version
  the page read (a stale write: 409). A chat request may bring the same write in its `state` field.

It is the AG-UI endpoint's sibling on the same machinery (rein.web.agui.AgUi: sign-in and tenants, agents, the
thread's stream read by one reader per thread, rein.web.hub); the stream is framed as an AG-UI run and told in
the SDK's parts (rein.web.ai_sdk_events). docs/web.md tells it all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ag_ui.core import StateDeltaEvent
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.client import Client
from temporalio.service import RPCError

from rein.client import DecisionQueued, DecisionRejected, NoWorker, ThreadRefused
from rein.core.contract import RunStatusView
from rein.core.errors import validation_text
from rein.core.ir import ToolCall
from rein.temporal.bearer import BearerAuth
from rein.web import resume
from rein.web.agui import KEEPALIVE_S, TENANT_CLAIM, AgUi, Refused, log
from rein.web.agui_events import TurnEvents
from rein.web.agui_input import BadInput
from rein.web.ai_sdk_events import Chunk, UiChunks, state_part, turn_message_id, ui_messages
from rein.web.ai_sdk_input import Ask, PageState, approval_id, read
from rein.web.auth import Viewer, WebAuth, until_expired
from rein.web.guard import surface
from rein.web.hub import Hub
from rein.web.resume import Answer

HEADERS = {"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no",
           "x-vercel-ai-ui-message-stream": "v1"}
"""The SDK's own response headers for a UI message stream (`UI_MESSAGE_STREAM_HEADERS` in `ai`)."""
REGENERATE = ("regenerating or editing is not supported: a rein thread keeps its history, so an answer or a sent "
              "message cannot be taken back; send a new message, or fork the thread before it (rein fork THREAD "
              "--at-step N)")


class AiSdk(AgUi):
    """The endpoint: AgUi's sign-in, agents, threads and hub, with the AI SDK's requests and stream."""

    def __init__(self, client: Client, agents: Sequence[Any], *, task_queue: str | None,
                 auth: BearerAuth | WebAuth | None, tenant_claim: str | None, open: bool | None = None,
                 hub: Hub | None = None):
        super().__init__(client, agents, task_queue=task_queue, auth=auth, tenant_claim=tenant_claim, open=open)
        self.own_hub = hub is None
        self.hub = hub or self.hub

    # ---------------------------------------------------------------- requests

    async def chat(self, request: Request) -> Response:
        try:
            caller = await self._caller(request)
            agent = await self._agent(request.path_params["agent"])
            ask = read(await request.body())
            own = set(self._own_tools(agent)) & {t.name for t in ask.tools}
            if own:
                raise BadInput(f"client tools may not take the agent's own tool names: {', '.join(sorted(own))}")
            await self._reach(ask.thread_id, agent, caller, must_exist=ask.kind != "message")
            if ask.kind == "regenerate":
                raise Refused(409, REGENERATE)
            if ask.request.state is not None:
                ask.start_state = await self._page_state(ask.thread_id, ask.request.state.value,
                                                         ask.request.state.version, caller)
            offset, answering = await self._answer(ask, caller) if ask.kind == "answers" else (-1, frozenset())
        except Refused as refused:
            return JSONResponse({"error": str(refused)}, status_code=refused.status)
        except BadInput as bad:
            return JSONResponse({"error": str(bad)}, status_code=422)
        if ask.kind == "message":
            return self._ui_stream(self._message(ask, agent, caller), caller)
        if offset < 0:  # nothing new: the rest of the turn under way, if one is, on the message the page has
            return self._ui_stream(await self._nothing_new(ask), caller)
        return self._ui_stream(self._turn_chunks(ask.thread_id, offset, ask.request.message_id, answering=answering),
                               caller)

    async def resume(self, request: Request) -> Response:
        try:
            thread_id, caller = await self._thread(request)
        except Refused as refused:
            return JSONResponse({"error": str(refused)}, status_code=refused.status)
        view = await self.runs.thread(thread_id)
        if not view.open:
            return Response(status_code=204)
        return self._ui_stream(self._turn_chunks(thread_id, view.turn_offset, from_turn=True), caller)

    async def messages(self, request: Request) -> Response:
        try:
            thread_id, _ = await self._thread(request)
        except Refused as refused:
            return JSONResponse({"error": str(refused)}, status_code=refused.status)
        session = await self.runs.session(thread_id)
        status = await self.runs.status(thread_id)
        return JSONResponse(ui_messages(session, _asking(status)))

    async def stop(self, request: Request) -> Response:
        try:
            thread_id, caller = await self._thread(request)
            stopped = await self.runs.stop_turn(thread_id, by=caller.subject)
        except Refused as refused:
            return JSONResponse({"error": str(refused)}, status_code=refused.status)
        except (DecisionRejected, NoWorker) as refused:
            return JSONResponse({"error": str(refused)}, status_code=409)
        except DecisionQueued as queued:  # no worker has taken it yet: the thread applies it when one does
            return JSONResponse({"queued": str(queued)}, status_code=202)
        return JSONResponse({"stopped": stopped})

    async def state(self, request: Request) -> Response:
        """GET: the thread's shared state `{"value", "version"}`; PUT `{"value", "version"}`: write it on the version
        the page read (409 when it changed since), answering the new version."""
        try:
            thread_id, caller = await self._thread(request)
            if request.method == "GET":
                return JSONResponse((await self.runs.state(thread_id)).model_dump(mode="json"))
            write = _page_write(await request.body())
            await self._page_state(thread_id, write.value, write.version, caller)
        except Refused as refused:
            return JSONResponse({"error": str(refused)}, status_code=refused.status)
        except BadInput as bad:
            return JSONResponse({"error": str(bad)}, status_code=422)
        return JSONResponse((await self.runs.state(thread_id)).model_dump(mode="json"))

    async def _thread(self, request: Request) -> tuple[str, Viewer]:
        """The chat the request names, once the caller may reach it (404 otherwise), and the caller."""
        caller = await self._caller(request)
        agent = await self._agent(request.path_params["agent"])
        thread_id = str(request.path_params["chat_id"])
        await self._reach(thread_id, agent, caller, must_exist=True)
        return thread_id, caller

    def _own_tools(self, agent: str) -> list[str]:
        registry = getattr(self.agents.get(agent), "registry", None)
        return list(registry.names()) if registry is not None else []

    # ---------------------------------------------------------------- what a POST does

    async def _answer(self, ask: Ask, caller: Viewer) -> tuple[int, frozenset[str]]:
        """The page's approvals and tool outputs, as the same validated decisions as `rein approve` and
        `ReinClient.tool_results`, the approvals bound to the wait their ids name (rein.web.resume): the stream offset
        the turn goes on from and what was answered (calls as shown ids and bare ids); (-1, none) when the message
        brings nothing the thread waits for. Refused (409) when an approval is stale: nothing is decided then."""
        thread_id, who = ask.thread_id, caller.subject
        status = await self.runs.status(thread_id)
        answers = [Answer(a.approval_id, a.wait, a.tool_call_id, "approve" if a.approved else "deny",
                          a.reason or ("" if a.approved else "denied in the page")) for a in ask.approvals]
        try:
            resume.check(status, thread_id, answers)
        except DecisionRejected as refused:
            raise Refused(409, f"approval {refused}") from None
        pending = {c.id for c in status.pending_tool_calls}
        outputs = {call: text for call, text in ask.outputs.items() if call in pending}
        if not answers and not outputs:
            return -1, frozenset()
        view = await self.runs.thread(thread_id)
        answered: frozenset[str] = frozenset()
        try:
            if answers:
                answered = await resume.decide(self.runs, thread_id, answers, who=who, update_prefix="ai-sdk",
                                               status=status)
            await self._outputs(thread_id, outputs, ask.shown, set(view.client_tools), who)
        except (DecisionRejected, NoWorker) as refused:
            raise Refused(409, str(refused)) from None
        return view.offset, answered | frozenset(outputs)

    async def _outputs(self, thread_id: str, outputs: dict[str, str], shown: dict[str, ToolCall], client: set[str],
                       who: str | None) -> None:
        """The page's outputs: results of its own tools (all at once, bound to the wait they answer), answers to the
        agent's questions; refused, nothing taken, when a call the page shows is not the one the thread waits on."""
        status = await self.runs.status(thread_id)
        resume.results_fit(status, thread_id, {call: shown[call] for call in outputs if call in shown})
        names = {c.id: c.name for c in status.pending_tool_calls}
        results = {call: text for call, text in outputs.items() if names.get(call) in client}
        with contextlib.suppress(DecisionQueued):
            if results:
                await self.runs.tool_results(thread_id, results, approver=who, wait=status.wait,
                                             update_id=f"ai-sdk-{status.wait}-{'-'.join(results)}")
            for call, text in outputs.items():
                if call not in results:
                    await self.runs.answer(thread_id, text, approver=who, update_id=f"ai-sdk-answer-{call}")

    async def _nothing_new(self, ask: Ask) -> AsyncIterator[Chunk]:
        """A request that brings nothing the thread waits for: a turn that waits is told as waiting (its approval
        requests again) and the response ends; a turn under way is told from now on; no turn: an empty answer."""
        view = await self.runs.thread(ask.thread_id)
        if not view.open:
            return _empty()
        status = await self.runs.status(ask.thread_id)
        if status.status.startswith("waiting_"):
            return _waiting(status, ask.request.message_id)
        return self._turn_chunks(ask.thread_id, view.offset, ask.request.message_id)

    async def _message(self, ask: Ask, agent: str, caller: Viewer) -> AsyncIterator[Chunk]:
        """Send the user message (in a task of its own: a page that leaves never cancels it), then tell its turn."""
        sender = self.runs if self.queues[agent] == self.runs.task_queue else type(self.runs)(self.runs.client, self.queues[agent])
        sending = asyncio.ensure_future(sender.send(
            ask.thread_id, ask.text, agent=agent, mode=ask.request.mode, message_id=ask.message_id,
            sender=caller.subject, tenant=self._tenant(caller), stream=True,
            tools=ask.tools, state=ask.start_state))
        sending.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved even if nobody waits
        try:
            receipt = await asyncio.shield(sending)
        except (ThreadRefused, NoWorker, RPCError) as refused:
            yield {"type": "error", "errorText": str(refused)}
            return
        waiting = None if receipt.joined else ask.message_id
        async for chunk in self._turn_chunks(ask.thread_id, receipt.offset, waiting_for=waiting):
            yield chunk

    async def _turn_chunks(self, thread_id: str, offset: int, message_id: str | None = None, *, from_turn: bool = False,
                    answering: frozenset[str] = frozenset(), waiting_for: str | None = None) -> AsyncIterator[Chunk]:
        """The thread's stream from `offset`, framed as one AG-UI run (TurnEvents) and told in UI chunks. The
        `start` chunk names the assistant message: `message_id` (the one an answer goes on with) at once, or with
        `from_turn` (or `waiting_for` a message's turn) the turn's own, when its `turn` item comes."""
        run = TurnEvents(thread_id, "", anchor=offset, waiting_for=waiting_for, answering=answering)
        chunks = UiChunks(frozenset(resume.call_of(a) for a in answering))
        started = not from_turn and waiting_for is None
        if started:
            yield {"type": "start", **({"messageId": message_id} if message_id else {})}
            async for chunk in self._state_part(thread_id, run):
                yield chunk
        async with self.hub.watch(thread_id, offset) as feed:
            async for at, item, more in feed.read(offset):
                waited = run.waiting_for is not None
                emitted = run.feed(at, item, more)
                opened = item.chunk.type == "event" and item.chunk.name == "turn" and run.waiting_for is None
                if not started and opened and (waited or waiting_for is None):
                    started = True
                    yield {"type": "start", "messageId": turn_message_id(item.chunk.data)}
                    async for chunk in self._state_part(thread_id, run):
                        yield chunk
                told = [chunk for _, event in emitted for chunk in chunks(event)]
                if any(isinstance(event, StateDeltaEvent) for _, event in emitted):  # a change: the snapshot
                    told.append(state_part(item.chunk.data or {}))
                if told and not started:  # the turn's own item is no longer on the stream (a long turn rolled over)
                    started = True
                    yield {"type": "start"}
                for chunk in told:
                    yield chunk
                if run.finished:
                    return

    async def _state_part(self, thread_id: str, run: TurnEvents) -> AsyncIterator[Chunk]:
        """The thread's shared state as a `data-state` part (once anything set it); the run tells later changes."""
        state = await self.runs.state(thread_id)
        run.state_version = state.version
        if state.version:
            yield state_part(state.model_dump(mode="json"))

    # ---------------------------------------------------------------- the response

    def _ui_stream(self, chunks: AsyncIterator[Chunk], caller: Viewer) -> StreamingResponse:
        """The response; it ends (an `error` part) when the caller's sign-in expires."""
        return StreamingResponse(until_expired(caller, self._sse_chunks(chunks), SIGN_IN_EXPIRED), media_type="text/event-stream",
                                 headers=HEADERS)

    async def _sse_chunks(self, chunks: AsyncIterator[Chunk]) -> AsyncIterator[str]:
        """Each chunk as an SSE `data:` line, a comment while nothing happens, `[DONE]` at the end. A page that goes
        away ends only this response: the turn goes on in its thread."""
        queue: asyncio.Queue[Chunk | None] = asyncio.Queue()

        async def produce() -> None:
            try:
                async for chunk in chunks:
                    await queue.put(chunk)
            except Exception as exc:  # the thread's stream could not be read: the page hears why
                log.warning("AI SDK stream failed: %s", exc)
                await queue.put({"type": "error", "errorText": f"reading the thread failed: {exc}"})
            finally:
                await queue.put(None)

        producer = asyncio.create_task(produce())
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if chunk is None:
                    break
                yield f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            producer.cancel()
            with contextlib.suppress(BaseException):
                await producer


SIGN_IN_EXPIRED = 'data: {"type":"error","errorText":"your sign-in expired: sign in again"}\n\ndata: [DONE]\n\n'
"""The last of a response whose caller's sign-in expired."""


def _asking(status: RunStatusView) -> dict[str, str]:
    """The calls the run asks approval for now, with their approval ids (the wait they are asked in)."""
    if status.status != "waiting_approval":
        return {}
    asked = status.waiting_on or [c.id for c in status.pending_tool_calls]
    return {call: approval_id(status.wait, call) for call in asked}


def _page_write(body: bytes) -> PageState:
    try:
        write = PageState.model_validate_json(body or b"null")
    except ValidationError as exc:
        raise BadInput(f"the body must be {{\"value\": the whole state, \"version\": the version read}}: "
                       f"{validation_text(exc, 'body')}") from None
    return write


async def _waiting(status: RunStatusView, message_id: str | None) -> AsyncIterator[Chunk]:
    """The turn's wait as it stands: its approval requests (the page has their parts: told again, the same ids)."""
    yield {"type": "start", **({"messageId": message_id} if message_id else {})}
    for call, approval in _asking(status).items():
        yield {"type": "tool-approval-request", "toolCallId": call, "approvalId": approval}
    yield {"type": "finish", "finishReason": "tool-calls" if status.pending_tool_calls else "other"}


async def _empty() -> AsyncIterator[Chunk]:
    yield {"type": "start"}
    yield {"type": "finish", "finishReason": "stop"}


def app(client: Client, agents: Sequence[Any] = (), *, task_queue: str | None = None,
        auth: BearerAuth | WebAuth | None = None, tenant_claim: str | None = TENANT_CLAIM, open: bool | None = None,
        hub: Hub | None = None) -> Starlette:
    """The AI SDK endpoint for `agents` (Agent objects or names; none: any agent a worker knows), on `client` (a
    temporalio Client or a ReinClient). `auth`, `tenant_claim`, `open`: as rein.web.agui.app (guarded the same way,
    rein.web.guard); `hub`: share another endpoint's stream readers (rein serve shares AG-UI's). Its `state.ai_sdk`
    is the endpoint."""
    endpoint = AiSdk(client, agents, task_queue=task_queue, auth=auth, tenant_claim=tenant_claim, open=open, hub=hub)
    routes = [Route("/{agent}", endpoint.chat, methods=["POST"]),
              Route("/{agent}/{chat_id}/stream", endpoint.resume, methods=["GET"]),
              Route("/{agent}/{chat_id}/messages", endpoint.messages, methods=["GET"]),
              Route("/{agent}/{chat_id}/stop", endpoint.stop, methods=["POST"]),
              Route("/{agent}/{chat_id}/state", endpoint.state, methods=["GET", "PUT"])]

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        if endpoint.own_hub:
            await endpoint.hub.close()

    web = surface(routes, open=endpoint.auth.open, lifespan=lifespan)
    web.state.ai_sdk = endpoint
    return web

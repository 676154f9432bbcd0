"""rein's web surfaces in one ASGI app (`rein serve`): the approvals inbox at `/inbox` (rein.web.inbox), the
AG-UI endpoint at `/agui` (rein.web.agui) and the AI SDK's (`useChat`) at `/ai-sdk` (rein.web.ai_sdk), the two
sharing one stream reader per thread. A user's own Starlette or FastAPI app can mount `rein.web.agui.app` or
`rein.web.ai_sdk.app` itself instead. Who the caller is, and which tenant they may see: rein.web.auth; what every
request goes through first (host, origin, content type, size, security headers): rein.web.guard."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from temporalio.client import Client

from rein.temporal.bearer import BearerAuth
from rein.web import agui, ai_sdk
from rein.web.auth import WebAuth
from rein.web.guard import OPEN_NOTICE, surface
from rein.web.inbox import PAGES, Inbox

AGUI_PATH = "/agui"
AI_SDK_PATH = "/ai-sdk"
INBOX_PATH = "/inbox"


def build(client: Client, agents: Sequence[Any] = (), *, task_queue: str | None = None,
          auth: BearerAuth | WebAuth | None = None, ui_url: str | None = None, poll_s: float = 1.0,
          open: bool | None = None) -> Starlette:
    """The app `rein serve` runs: the inbox page and its API (`/inbox`, one visibility reader every `poll_s` for all
    pages; runs link to the Temporal UI at `ui_url`), `POST /agui/{agent}` (an HttpAgent's URL), `GET
    /agui/{agent}/{thread}` (a viewer's stream), `/ai-sdk/{agent}` (useChat's `api`), and `GET /` saying what is
    served. `auth`: who may call (default:
    the environment's sign-in settings, rein.temporal.bearer; none set: the local token under REIN_HOME);
    `open` (default REIN_WEB_OPEN): nobody signs in, loopback peers only. Raises ValueError for open with a sign-in."""
    from rein.client import ReinClient

    web_auth = auth if isinstance(auth, WebAuth) else WebAuth(auth, open=open)
    endpoint = agui.app(client, agents, task_queue=task_queue, auth=web_auth)
    chat = ai_sdk.app(client, agents, task_queue=task_queue, auth=web_auth, hub=endpoint.state.agui.hub)
    names = sorted(endpoint.state.agui.agents)
    inbox = Inbox(ReinClient(client, task_queue), web_auth, ui_url=ui_url, poll_s=poll_s)

    async def index(_: Request) -> JSONResponse:
        return JSONResponse({"inbox": INBOX_PATH, "open": OPEN_NOTICE if web_auth.open else False,
                             "agui": {name: f"{AGUI_PATH}/{name}" for name in names} or f"{AGUI_PATH}/<agent>",
                             "ai-sdk": {name: f"{AI_SDK_PATH}/{name}" for name in names} or f"{AI_SDK_PATH}/<agent>"})

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with endpoint.router.lifespan_context(endpoint):
            yield
            await inbox.close()  # the inbox's reader stops with the server

    routes: list[BaseRoute] = [Route("/", index), *inbox.routes(), Mount(AGUI_PATH, app=endpoint),
                               Mount(AI_SDK_PATH, app=chat)]
    web = surface(routes, pages=PAGES, open=web_auth.open, lifespan=lifespan)
    web.state.agui_agents = names
    web.state.auth = web_auth
    return web

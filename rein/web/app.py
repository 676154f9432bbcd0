"""rein's web surfaces in one ASGI app (`rein serve`): the approvals inbox at `/inbox` (rein.web.inbox) and the
AG-UI endpoint at `/agui` (rein.web.agui). A user's own Starlette or FastAPI app can mount `rein.web.agui.app`
itself instead. Who the caller of the inbox is, and which tenant they may see: rein.web.auth."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from temporalio.client import Client

from rein.ops import agui
from rein.web.inbox import Inbox
from rein.web.auth import WebAuth
from rein.temporal.bearer import BearerAuth

AGUI_PATH = "/agui"
INBOX_PATH = "/inbox"


def build(client: Client, agents: Sequence[Any] = (), *, task_queue: str | None = None, auth: BearerAuth | None = None,
          ui_url: str | None = None, poll_s: float = 1.0) -> Starlette:
    """The app `rein serve` runs: the inbox page and its API (`/inbox`, one visibility reader every `poll_s` for all
    pages; runs link to the Temporal UI at `ui_url`), `POST /agui/{agent}` (an HttpAgent's URL), `GET
    /agui/{agent}/{thread}` (a viewer's stream), and `GET /` saying what is served. `auth`: who may call (default:
    the environment's rein web settings, rein.temporal.bearer; none set: anyone)."""
    from rein.client import ReinClient

    endpoint = agui.app(client, agents, task_queue=task_queue, auth=auth)
    names = sorted(endpoint.state.agui.agents)
    web_auth = WebAuth(auth)
    inbox = Inbox(ReinClient(client, task_queue), web_auth, ui_url=ui_url, poll_s=poll_s)

    async def index(_: Request) -> JSONResponse:
        return JSONResponse({"inbox": INBOX_PATH,
                             "agui": {name: f"{AGUI_PATH}/{name}" for name in names} or f"{AGUI_PATH}/<agent>"})

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with endpoint.router.lifespan_context(endpoint):
            yield
            await inbox.close()  # the inbox's reader stops with the server

    routes: list[BaseRoute] = [Route("/", index), *inbox.routes(), Mount(AGUI_PATH, app=endpoint)]
    web = Starlette(routes=routes, lifespan=lifespan)
    web.state.agui_agents = names
    web.state.auth = web_auth
    return web

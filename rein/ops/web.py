"""rein's web surfaces in one ASGI app (`rein serve`): the AG-UI endpoint at `/agui` (rein.ops.agui), beside the
surfaces other modules add. A user's own Starlette or FastAPI app can mount `rein.ops.agui.app` itself instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from temporalio.client import Client

from rein.ops import agui

AGUI_PATH = "/agui"


def build(client: Client, agents: Sequence[Any], *, task_queue: str | None = None) -> Starlette:
    """The app `rein serve` runs: `POST /agui/{agent}` (an HttpAgent's URL), `GET /agui/{agent}/{thread}` (a
    viewer's stream), and `GET /` saying what is served."""
    endpoint = agui.app(client, agents, task_queue=task_queue)
    names = sorted(endpoint.state.agui.agents)

    async def index(_: Request) -> JSONResponse:
        return JSONResponse({"agui": {name: f"{AGUI_PATH}/{name}" for name in names} or f"{AGUI_PATH}/<agent>"})

    web = Starlette(routes=[Route("/", index), Mount(AGUI_PATH, app=endpoint)],
                    lifespan=lambda _: endpoint.router.lifespan_context(endpoint))
    web.state.agui_agents = names
    return web

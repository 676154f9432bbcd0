"""rein's web surfaces in one Starlette app (`rein serve`): the inbox page at /inbox, and the AG-UI endpoint at /agui
when agents are given. Who the caller is and which tenant they may see: rein.ops.web_auth (shared by both).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount

from rein.ops.inbox_web import Inbox
from rein.ops.web_auth import WebAuth
from rein.temporal.bearer import BearerAuth

if TYPE_CHECKING:
    from rein.client import ReinClient


def web_app(client: ReinClient, *, agents: Sequence[Any] = (), auth: BearerAuth | None = None, ui_url: str | None = None,
            poll_s: float = 1.0) -> Starlette:
    """The app `rein serve` runs: the inbox (rein.ops.inbox_web) and, with `agents`, the AG-UI endpoint at /agui."""
    web_auth = WebAuth(auth)
    inbox = Inbox(client, web_auth, ui_url=ui_url, poll_s=poll_s)
    routes: list[BaseRoute] = [*inbox.routes()]
    if agents:
        routes.append(Mount("/agui", app=agui_app(client, agents)))  # issue 47: the AG-UI endpoint over threads

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await inbox.close()  # the poller stops with the server

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.auth = web_auth
    return app


def agui_app(client: ReinClient, agents: Sequence[Any]) -> Any:
    """The AG-UI endpoint (rein.ops.agui) for `agents`."""
    try:
        from rein.ops import agui  # type: ignore[attr-defined]
    except ImportError as exc:
        raise RuntimeError("this build of rein has no AG-UI endpoint (rein.ops.agui)") from exc
    return agui.app(client, agents=list(agents))

"""rein's web surfaces in one Starlette app (`rein serve`): the inbox page at /inbox, and the AG-UI endpoint at /agui
when agents are given. Also what every surface shares: who the caller is and which tenant they may see.

Sign-in is the bearer token rein's codec server accepts (rein.temporal.bearer: REIN_CODEC_TOKEN, or a JWT checked
against REIN_CODEC_JWKS_URL). A JWT's tenant claim (REIN_TENANT_CLAIM, default `tenant`) scopes the caller to that
tenant; the value `*` (or the shared secret) sees every tenant. No setting at all: open, for a laptop.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import BaseRoute, Mount

from rein.temporal.bearer import BearerAuth, BearerCheck

if TYPE_CHECKING:
    from rein.client import ReinClient

TENANT_CLAIM_VAR = "REIN_TENANT_CLAIM"
ALL_TENANTS = "*"


@dataclass(frozen=True)
class Viewer:
    """A signed-in caller: `subject` is recorded as the approver; `tenant` None sees and decides every tenant."""

    subject: str
    tenant: str | None = None

    def allows(self, tenant: str | None) -> bool:
        return self.tenant is None or self.tenant == tenant


class WebAuth:
    """Who calls a web surface, from the request's `Authorization: Bearer ...` header."""

    def __init__(self, auth: BearerAuth | None = None, tenant_claim: str | None = None):
        self.auth = auth if auth is not None else BearerAuth.from_env()
        self.open = not self.auth.configured
        self.check = BearerCheck(self.auth)
        self.tenant_claim = tenant_claim or os.environ.get(TENANT_CLAIM_VAR) or "tenant"

    def describe(self) -> str:
        """One line for the start: how people sign in."""
        if self.open:
            return ("open: no REIN_CODEC_TOKEN or REIN_CODEC_JWKS_URL is set, so anyone who reaches this port sees and "
                    "decides every tenant's runs (fine on a laptop; set one before sharing it)")
        ways = (["the shared token (REIN_CODEC_TOKEN)"] if self.auth.token else []) + (
            [f"a JWT from REIN_CODEC_JWKS_URL, scoped by its {self.tenant_claim!r} claim"] if self.auth.jwks_url else [])
        return "sign-in: " + " or ".join(ways or ["anyone (REIN_CODEC_AUTH=none)"])

    async def viewer(self, request: Request) -> Viewer:
        """The caller, or HTTPException 401 (no or a bad token) / 403 (a JWT without a tenant claim)."""
        if self.open:
            return Viewer("anyone")
        caller = await self.check.caller(request.headers.get("Authorization"))
        if caller is None:
            raise HTTPException(401, "sign in: a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
        if not caller.claims:
            return Viewer(caller.subject)  # the shared secret, or REIN_CODEC_AUTH=none: an operator
        claim = caller.claims.get(self.tenant_claim)
        if isinstance(claim, list) and len(claim) == 1:
            claim = claim[0]
        if not isinstance(claim, str) or not claim:
            raise HTTPException(403, f"your token has no {self.tenant_claim!r} claim: rein cannot tell whose runs you decide")
        return Viewer(caller.subject, None if claim == ALL_TENANTS else claim)


def web_app(client: ReinClient, *, agents: Sequence[Any] = (), auth: BearerAuth | None = None, ui_url: str | None = None,
            poll_s: float = 1.0) -> Starlette:
    """The app `rein serve` runs: the inbox (rein.ops.inbox_web) and, with `agents`, the AG-UI endpoint at /agui."""
    from rein.ops.inbox_web import Inbox

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

"""Who calls one of rein's web surfaces (`rein serve`: the inbox, the AG-UI endpoint) and which tenant they may see.

Sign-in, in this order of what is configured (docs/inbox.md, "Sign-in"):
- the bearer token rein's codec server accepts (rein.temporal.bearer): the shared secret REIN_CODEC_TOKEN (an
  operator: every tenant, recorded as REIN_WEB_TOKEN_NAME) or a JWT checked against REIN_CODEC_JWKS_URL (its `sub`
  recorded; its tenant claim, REIN_TENANT_CLAIM, default `tenant`, scopes the caller; `*` sees every tenant);
- none configured: the local token under REIN_HOME (rein.web.tokens), recorded as the local person (REIN_IDENTITY);
- open (REIN_WEB_OPEN, `rein serve --open`): nobody signs in, for loopback only (rein.web.guard refuses any other
  peer), recorded as the local person too.
REIN_CODEC_AUTH=none opens the codec server, never a web surface.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from starlette.exceptions import HTTPException
from starlette.requests import Request

from rein import settings
from rein.temporal.bearer import BearerAuth, BearerCheck
from rein.web.tokens import ReadTokens, local_token

ALL_TENANTS = "*"
READ_TOKEN_PARAM = "read_token"


@dataclass(frozen=True)
class Viewer:
    """A signed-in caller: `subject` is recorded as the approver; `tenant` None sees and decides every tenant;
    `expires` (a Unix time) ends their live streams (a JWT's `exp`, a read token's)."""

    subject: str
    tenant: str | None = None
    expires: float | None = None

    def allows(self, tenant: str | None) -> bool:
        return self.tenant is None or self.tenant == tenant

    def left_s(self) -> float | None:
        """Seconds until the sign-in expires (None: never)."""
        return None if self.expires is None else self.expires - time.time()


class WebAuth:
    """Who calls a web surface: `Authorization: Bearer ...`, or `?read_token=` on a read."""

    def __init__(self, auth: BearerAuth | None = None, tenant_claim: str | None = None, *, open: bool | None = None,
                 token: str | None = None):
        given = auth if auth is not None else BearerAuth.from_settings()
        self.auth = replace(given, open=False)
        configured = bool(self.auth.token or self.auth.jwks_url)
        self.open = settings.current().web_open if open is None else open
        if self.open and configured:
            raise ValueError("open mode (REIN_WEB_OPEN, --open) and a sign-in (REIN_CODEC_TOKEN, REIN_CODEC_JWKS_URL) "
                             "are both set: pick one")
        self.local = None if configured or self.open else (token or local_token())
        """The local token (no sign-in configured, not open): whoever holds it is the local person."""
        self.check = BearerCheck(self.auth)
        self.tenant_claim = tenant_claim or settings.current().tenant_claim
        self.reads = ReadTokens()
        self.me = settings.current().identity
        """Who the local token and open mode decide as: the `identity` setting (REIN_IDENTITY, default USER@HOST), as
        the CLI and scripts do."""
        self.token_name = settings.current().web_token_name.strip() or "token"
        """Who the shared token decides as (REIN_WEB_TOKEN_NAME)."""

    @property
    def mode(self) -> str:
        """`open`, `local` (rein's own token), or `configured` (the shared token or JWTs)."""
        return "open" if self.open else "local" if self.local else "configured"

    def describe(self) -> str:
        """One line for the start: how people sign in."""
        if self.open:
            return (f"OPEN: no sign-in (REIN_WEB_OPEN / --open): anyone on this machine decides as {self.me}; "
                    "refused to every peer but loopback")
        if self.local:
            return f"sign-in: this link (the token in {settings.current().home}; `rein inbox link` shows it again)"
        ways = (["the shared token (REIN_CODEC_TOKEN)"] if self.auth.token else []) + (
            [f"a JWT from REIN_CODEC_JWKS_URL, scoped by its {self.tenant_claim!r} claim"] if self.auth.jwks_url else [])
        return "sign-in: " + " or ".join(ways)

    async def viewer(self, request: Request) -> Viewer:
        """The caller, or HTTPException 401 (no or a bad token) / 403 (a JWT without a tenant claim)."""
        if self.open:
            return Viewer(self.me)
        header = request.headers.get("Authorization")
        if header is None and request.method in ("GET", "HEAD") and READ_TOKEN_PARAM in request.query_params:
            return self._read_viewer(request.query_params[READ_TOKEN_PARAM])
        scheme, _, given = (header or "").partition(" ")
        if self.local and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.local.encode()):
            return Viewer(self.me)
        caller = await self.check.caller(header)
        if caller is None:
            raise HTTPException(401, "sign in: a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
        if not caller.claims:  # the shared secret: an operator
            return Viewer(self.token_name)
        expires = caller.claims.get("exp")
        expires = float(expires) if isinstance(expires, int | float) else None
        claim = caller.claims.get(self.tenant_claim)
        if isinstance(claim, list) and len(claim) == 1:
            claim = claim[0]
        if not isinstance(claim, str) or not claim:
            raise HTTPException(403, f"your token has no {self.tenant_claim!r} claim: rein cannot tell whose runs you decide")
        return Viewer(caller.subject, None if claim == ALL_TENANTS else claim, expires)

    def _read_viewer(self, token: str) -> Viewer:
        claims = self.reads.check(token)
        if claims is None:
            raise HTTPException(401, "the read token is not valid (expired, or minted by a server with another "
                                     "REIN_WEB_READ_KEY): mint another",
                                headers={"WWW-Authenticate": "Bearer"})
        tenant = claims.get("tenant")
        return Viewer(str(claims["sub"]), tenant if isinstance(tenant, str) else None, float(claims["exp"]))

    def mint_read(self, viewer: Viewer) -> dict[str, object]:
        """A read token for `viewer` (the JSON a mint endpoint answers)."""
        token, until = self.reads.mint(viewer.subject, viewer.tenant, viewer.expires)
        return {"read_token": token, "expires_at": until, "expires_in": max(0, int(until - time.time())),
                "param": READ_TOKEN_PARAM}


async def until_expired(viewer: Viewer, stream: AsyncIterator[str], farewell: str) -> AsyncIterator[str]:
    """`stream` until the viewer's sign-in expires; then `farewell` (one last SSE event) and the end."""
    items = aiter(stream)
    try:
        while True:
            left = viewer.left_s()
            if left is not None and left <= 0:
                yield farewell
                return
            try:
                item = await asyncio.wait_for(anext(items), left) if left is not None else await anext(items)
            except StopAsyncIteration:
                return
            except TimeoutError:
                yield farewell
                return
            yield item
    finally:
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            await aclose()

"""Who calls one of rein's web surfaces (`rein serve`: the inbox, the AG-UI endpoint) and which tenant they may see.

Sign-in is the bearer token rein's codec server accepts (rein.temporal.bearer: REIN_CODEC_TOKEN, or a JWT checked
against REIN_CODEC_JWKS_URL). A JWT's tenant claim (REIN_TENANT_CLAIM, default `tenant`) scopes the caller to that
tenant; the value `*` (or the shared secret) sees every tenant. No setting at all: open, for a laptop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import Request

from rein.temporal.bearer import BearerAuth, BearerCheck

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

"""Who is calling: the bearer token every rein web surface accepts (the codec server, `rein serve`).

One setting for all of them (docs/codec-server.md): a shared secret in REIN_CODEC_TOKEN, or a JWT signed
by the identity provider whose keys are at REIN_CODEC_JWKS_URL, for this service's audience
(REIN_CODEC_JWT_AUDIENCE, required with a JWKS URL: a token the provider signed for another application is
no key here) and issuer (REIN_CODEC_JWT_ISSUER, checked when set). A JWT's claims travel with the caller, so a
web surface can scope what it shows (a tenant claim); the shared secret is an operator's, unscoped.
"""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import dataclass, field
from typing import Any

TOKEN_VAR, JWKS_VAR, AUDIENCE_VAR, ISSUER_VAR, AUTH_VAR = (
    "REIN_CODEC_TOKEN", "REIN_CODEC_JWKS_URL", "REIN_CODEC_JWT_AUDIENCE", "REIN_CODEC_JWT_ISSUER", "REIN_CODEC_AUTH")
JWT_ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"]


@dataclass(frozen=True)
class BearerAuth:
    """Who may call: a shared secret, a JWT signed by the identity provider, or (open) anyone."""

    token: str | None = None
    jwks_url: str | None = None
    audience: str | None = None
    issuer: str | None = None
    open: bool = False

    @classmethod
    def from_settings(cls) -> BearerAuth:
        """The REIN_CODEC_* settings (rein.settings); none at all is `configured` False (each surface decides)."""
        from rein.settings import current

        now = current()
        return cls(token=now.codec_token.get_secret_value() if now.codec_token else None, jwks_url=now.codec_jwks_url,
                   audience=now.codec_jwt_audience, issuer=now.codec_jwt_issuer, open=now.codec_auth == "none")

    @property
    def configured(self) -> bool:
        return bool(self.token or self.jwks_url or self.open)

    def misconfigured(self) -> str | None:
        """Why these settings cannot be served (one line naming the missing setting), or None."""
        if self.jwks_url and not self.audience:
            return (f"{JWKS_VAR} is set but {AUDIENCE_VAR} is not: without it a JWT the identity provider signed for "
                    f"any other application would be let in; set {AUDIENCE_VAR} to this service's audience "
                    "(docs/codec-server.md)")
        return None


class BearerMisconfigured(ValueError):
    """Bearer settings a service must not start with (BearerAuth.misconfigured says why)."""


@dataclass(frozen=True)
class Caller:
    """A caller the check let in: `subject` names them in audits; `claims` are the JWT's (empty for the
    shared secret and for an open surface)."""

    subject: str
    claims: dict[str, Any] = field(default_factory=dict)


class BearerCheck:
    """Checks an `Authorization` header: the shared secret (constant-time) or a JWT (keys cached)."""

    def __init__(self, auth: BearerAuth):
        """BearerMisconfigured: a JWKS URL without the audience (every surface refuses to start so)."""
        why = auth.misconfigured()
        if why is not None:
            raise BearerMisconfigured(why)
        self.auth = auth
        self._jwks = None
        if auth.jwks_url:
            import jwt

            self._jwks = jwt.PyJWKClient(auth.jwks_url, cache_keys=True)

    async def caller(self, authorization: str | None) -> Caller | None:
        """The caller, or None when the header does not let them in."""
        if self.auth.open:
            return Caller("anyone")
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        if self.auth.token and hmac.compare_digest(token.encode(), self.auth.token.encode()):
            return Caller("token")
        if self._jwks is None:
            return None
        claims = await asyncio.to_thread(self._claims, token)
        return None if claims is None else Caller(str(claims.get("sub") or claims.get("email") or "jwt"), claims)

    def _claims(self, token: str) -> dict[str, Any] | None:
        import jwt

        assert self._jwks is not None
        try:
            key = self._jwks.get_signing_key_from_jwt(token)
            return dict(jwt.decode(token, key.key, algorithms=JWT_ALGORITHMS, audience=self.auth.audience,
                                   issuer=self.auth.issuer, options={"require": ["exp", "aud"]}))
        except jwt.PyJWTError:
            return None

"""A codec server, so the Temporal UI (and `temporal` CLI) can show encrypted payloads to key holders.

    REIN_CODEC_KEY=... python -m rein.temporal.codec_server --port 8081 --ui-origin http://localhost:8233

Then in the UI: Settings (the top-right icon) -> Codec Server -> http://localhost:8081, or
`temporal workflow show --codec-endpoint http://localhost:8081 ...`. It speaks Temporal's
remote codec protocol (POST /encode and /decode with `{"payloads": [...]}` in protobuf JSON)
and answers CORS preflights from the UI's origin.

Every /encode and /decode call needs `Authorization: Bearer <token>` (docs/codec-server.md):
either the shared secret in REIN_CODEC_TOKEN (`temporal --codec-auth "Bearer <secret>"`), or a
JWT the Temporal UI forwards ("Pass access token"), checked against the identity provider's keys
at REIN_CODEC_JWKS_URL (and REIN_CODEC_JWT_AUDIENCE / REIN_CODEC_JWT_ISSUER when set). With
neither, it does not start, unless REIN_CODEC_AUTH=none says on purpose that anyone who reaches
it may decrypt (a localhost-only setup).
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from rein.temporal.codec import ENV_VAR, codec_from_env

DEFAULT_UI_ORIGIN = "http://localhost:8233"
TOKEN_VAR, JWKS_VAR, AUDIENCE_VAR, ISSUER_VAR, AUTH_VAR = (
    "REIN_CODEC_TOKEN", "REIN_CODEC_JWKS_URL", "REIN_CODEC_JWT_AUDIENCE", "REIN_CODEC_JWT_ISSUER", "REIN_CODEC_AUTH")


class NoCodecAuth(ValueError):
    """The codec server was given no way to tell key holders from strangers."""


@dataclass(frozen=True)
class CodecAuth:
    """Who may call the codec server: a shared secret, a JWT signed by the identity provider, or (open) anyone."""

    token: str | None = None
    jwks_url: str | None = None
    audience: str | None = None
    issuer: str | None = None
    open: bool = False

    @classmethod
    def from_env(cls) -> CodecAuth:
        env = os.environ
        auth = cls(token=env.get(TOKEN_VAR) or None, jwks_url=env.get(JWKS_VAR) or None,
                   audience=env.get(AUDIENCE_VAR) or None, issuer=env.get(ISSUER_VAR) or None,
                   open=(env.get(AUTH_VAR) or "").lower() == "none")
        if not (auth.token or auth.jwks_url or auth.open):
            raise NoCodecAuth(
                f"the codec server decrypts for whoever calls it: set {TOKEN_VAR} (a shared secret callers send "
                f"as 'Authorization: Bearer ...') or {JWKS_VAR} (to accept the JWT the Temporal UI forwards), "
                f"or {AUTH_VAR}=none to serve anyone who can reach it")
        return auth


class TokenCheck:
    """Checks the caller's bearer token: the shared secret (constant-time) or a JWT."""

    def __init__(self, auth: CodecAuth):
        self.auth = auth
        self._jwks = None
        if auth.jwks_url:
            import jwt

            self._jwks = jwt.PyJWKClient(auth.jwks_url, cache_keys=True)

    async def allows(self, request: web.Request) -> bool:
        if self.auth.open:
            return True
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return False
        if self.auth.token and hmac.compare_digest(token.encode(), self.auth.token.encode()):
            return True
        return self._jwks is not None and await asyncio.to_thread(self._valid_jwt, token)

    def _valid_jwt(self, token: str) -> bool:
        import jwt

        assert self._jwks is not None
        try:
            key = self._jwks.get_signing_key_from_jwt(token)
            jwt.decode(token, key.key, algorithms=["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"],
                       audience=self.auth.audience, issuer=self.auth.issuer,
                       options={"verify_aud": self.auth.audience is not None, "require": ["exp"]})
        except jwt.PyJWTError:
            return False
        return True


def build_app(codec: PayloadCodec, ui_origins: Iterable[str] = (DEFAULT_UI_ORIGIN,),
              auth: CodecAuth | None = None) -> web.Application:
    """`auth` default: CodecAuth.from_env() (raises NoCodecAuth when nothing is configured)."""
    origins = {o.rstrip("/") for o in ui_origins}
    check = TokenCheck(auth or CodecAuth.from_env())

    def cors(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
        origin = request.headers.get("Origin", "")
        if origin.rstrip("/") in origins or "*" in origins:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = "content-type, x-namespace, authorization"
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Vary"] = "Origin"
        return response

    def handler(encode: bool):  # noqa: ANN202
        async def handle(request: web.Request) -> web.StreamResponse:
            if request.method == "OPTIONS":
                return cors(request, web.Response())
            if not await check.allows(request):
                return cors(request, web.Response(
                    status=401, text="a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"}))
            if request.content_type != "application/json":
                return cors(request, web.Response(status=415, text="send application/json"))
            try:
                payloads = json_format.Parse(await request.read(), Payloads())
                done = await (codec.encode if encode else codec.decode)(payloads.payloads)
            except Exception as exc:  # a wrong key or a malformed body: say so, keep serving
                return cors(request, web.Response(status=400, text=f"{type(exc).__name__}: {exc}"))
            body = json_format.MessageToJson(Payloads(payloads=done))
            return cors(request, web.Response(text=body, content_type="application/json"))

        return handle

    app = web.Application()
    for path, encode in (("/encode", True), ("/decode", False)):
        app.router.add_route("POST", path, handler(encode))
        app.router.add_route("OPTIONS", path, handler(encode))
    return app


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument(
        "--ui-origin", action="append", default=None,
        help=f"an origin allowed by CORS, e.g. the Temporal UI (default {DEFAULT_UI_ORIGIN}); repeatable",
    )
    args = parser.parse_args(argv)
    codec = codec_from_env()
    if codec is None:
        parser.error(f"{ENV_VAR} is not set: the codec server needs the keys the workers use")
    try:
        app = build_app(codec, args.ui_origin or [DEFAULT_UI_ORIGIN])
    except NoCodecAuth as exc:
        parser.error(str(exc))
    web.run_app(app, host=args.host, port=args.port,
                print=lambda _: print(f"rein codec server on http://{args.host}:{args.port}", flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

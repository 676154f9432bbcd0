"""A codec server, so the Temporal UI (and `temporal` CLI) can show encrypted payloads to key holders.

    REIN_CODEC_KEY=... python -m rein.temporal.codec_server --port 8081 --ui-origin http://localhost:8233

Then in the UI: Settings (the top-right icon) -> Codec Server -> http://localhost:8081, or
`temporal workflow show --codec-endpoint http://localhost:8081 ...`. It speaks Temporal's
remote codec protocol (POST /encode and /decode with `{"payloads": [...]}` in protobuf JSON)
and answers CORS preflights from the UI's origin.

Every /encode and /decode call needs `Authorization: Bearer <token>` (docs/codec-server.md):
either the shared secret in REIN_CODEC_TOKEN (`temporal --codec-auth "Bearer <secret>"`), or a
JWT the Temporal UI forwards ("Pass access token"), checked against the identity provider's keys
at REIN_CODEC_JWKS_URL for the audience REIN_CODEC_JWT_AUDIENCE (required with it; REIN_CODEC_JWT_ISSUER
checked when set). With
neither, it does not start, unless REIN_CODEC_AUTH=none says on purpose that anyone who reaches
it may decrypt (a localhost-only setup).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from rein.temporal.bearer import AUTH_VAR, JWKS_VAR, TOKEN_VAR, BearerAuth, BearerCheck
from rein.temporal.codec import ENV_VAR, codec_from_env

DEFAULT_UI_ORIGIN = "http://localhost:8233"
class NoCodecAuth(ValueError):
    """The codec server was given no way to tell key holders from strangers."""


def codec_auth_from_env() -> BearerAuth:
    """The bearer settings (rein.temporal.bearer); raises NoCodecAuth when none is set: a codec server decrypts."""
    auth = BearerAuth.from_settings()
    if not auth.configured:
        raise NoCodecAuth(
            f"the codec server decrypts for whoever calls it: set {TOKEN_VAR} (a shared secret callers send "
            f"as 'Authorization: Bearer ...') or {JWKS_VAR} (to accept the JWT the Temporal UI forwards), "
            f"or {AUTH_VAR}=none to serve anyone who can reach it")
    why = auth.misconfigured()
    if why is not None:
        raise NoCodecAuth(why)
    return auth


def build_app(codec: PayloadCodec, ui_origins: Iterable[str] = (DEFAULT_UI_ORIGIN,),
              auth: BearerAuth | None = None) -> web.Application:
    """`auth` default: the environment's (raises NoCodecAuth when nothing is configured)."""
    origins = {o.rstrip("/") for o in ui_origins}
    auth = auth or codec_auth_from_env()
    if auth.misconfigured():
        raise NoCodecAuth(auth.misconfigured())
    check = BearerCheck(auth)

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
            if await check.caller(request.headers.get("Authorization")) is None:
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

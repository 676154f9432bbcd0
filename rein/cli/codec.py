"""`rein codec-server`: let the Temporal UI and CLI decrypt payloads with the workers' key."""

from __future__ import annotations

from typing import Annotated

import typer

from rein.cli.app import EXIT_USAGE, CliError, app


@app.command("codec-server")
def codec_server(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8081,
    host: Annotated[str, typer.Option(help="Interface to bind (callers need a token: docs/codec-server.md).")] = "127.0.0.1",
    ui_origin: Annotated[list[str] | None, typer.Option(
        help="An origin allowed to call it, e.g. the Temporal UI's URL; repeatable (default http://localhost:8233).")] = None,
) -> None:
    """Decrypt payloads for the Temporal UI and `temporal` CLI (needs REIN_CODEC_KEY, like the workers),
    for callers with a valid token: REIN_CODEC_TOKEN (a shared secret) or REIN_CODEC_JWKS_URL (the
    JWT the UI forwards); REIN_CODEC_AUTH=none serves anyone."""
    from aiohttp import web

    from rein.temporal.codec import ENV_VAR, codec_from_env
    from rein.temporal.codec_server import DEFAULT_UI_ORIGIN, NoCodecAuth, build_app

    codec = codec_from_env()
    if codec is None:
        raise CliError(f"{ENV_VAR} is not set: the codec server needs the keys the workers use", EXIT_USAGE)
    try:
        server = build_app(codec, ui_origin or [DEFAULT_UI_ORIGIN])
    except NoCodecAuth as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    web.run_app(server, host=host, port=port,
                print=lambda _: print(f"rein codec server on http://{host}:{port}; in the UI: Settings -> "
                                      f"Codec Server -> http://{host}:{port}", flush=True))


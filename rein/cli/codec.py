"""`rein codec-server`: let the Temporal UI and CLI decrypt payloads with the workers' key."""

from __future__ import annotations

from typing import Annotated

import typer

from rein.cli.app import EXIT_USAGE, CliError, app


@app.command("codec-server")
def codec_server(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8081,
    host: Annotated[str, typer.Option(help="Interface to bind (anyone who reaches it can decrypt).")] = "127.0.0.1",
    ui_origin: Annotated[list[str] | None, typer.Option(
        help="An origin allowed to call it, e.g. the Temporal UI's URL; repeatable (default http://localhost:8233).")] = None,
) -> None:
    """Decrypt payloads for the Temporal UI and `temporal` CLI (needs REIN_CODEC_KEY, like the workers)."""
    from aiohttp import web

    from rein.temporal.codec import ENV_VAR, codec_from_env
    from rein.temporal.codec_server import DEFAULT_UI_ORIGIN, build_app

    codec = codec_from_env()
    if codec is None:
        raise CliError(f"{ENV_VAR} is not set: the codec server needs the keys the workers use", EXIT_USAGE)
    web.run_app(build_app(codec, ui_origin or [DEFAULT_UI_ORIGIN]), host=host, port=port,
                print=lambda _: print(f"rein codec server on http://{host}:{port}; in the UI: Settings -> "
                                      f"Codec Server -> http://{host}:{port}", flush=True))


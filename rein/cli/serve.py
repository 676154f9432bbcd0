"""`rein serve`: rein's web surfaces in one process (rein.ops.web): the approvals inbox at /inbox, and the AG-UI
endpoint at /agui for the agents given with --agent."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from rein.cli.app import EXIT_USAGE, Address, CliError, Namespace, app, connect_client, load_agent_target

UI_VAR = "REIN_UI_URL"


def _ui_url(given: str | None, address: str | None) -> str | None:
    """The Temporal UI the inbox links runs to: --ui, REIN_UI_URL, else the embedded server's own UI."""
    if given or os.environ.get(UI_VAR):
        return given or os.environ.get(UI_VAR)
    if address or os.environ.get("TEMPORAL_ADDRESS"):
        return None
    from rein.durable.embedded_server import embedded_status

    return (embedded_status() or {}).get("ui")


@app.command()
def serve(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8090,
    host: Annotated[str, typer.Option(help="Interface to bind (people sign in with a token: docs/inbox.md).")] = "127.0.0.1",
    agent: Annotated[list[str] | None, typer.Option(
        "--agent", help="MODULE:ATTR of an agent the AG-UI endpoint (/agui) serves; repeatable.")] = None,
    ui: Annotated[str | None, typer.Option(help="The Temporal UI's URL, for links to runs (default: REIN_UI_URL, or "
                                           "the embedded server's UI).")] = None,
    poll: Annotated[float, typer.Option(min=0.1, max=60, help="Seconds between reads of what waits (one reader for "
                                        "every open page).")] = 1.0,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Serve rein's web pages: the approvals inbox at /inbox (every decision people owe, live, with rules) and, for
    --agent, the AG-UI endpoint at /agui. Sign-in: the token or JWT rein's codec server accepts (REIN_CODEC_TOKEN /
    REIN_CODEC_JWKS_URL), scoped by the JWT's tenant claim (REIN_TENANT_CLAIM); with neither it is open."""
    import asyncio

    import uvicorn

    from rein.ops.web import web_app

    agents = [load_agent_target(target) for target in agent or []]

    async def go() -> None:
        client = await connect_client(address, namespace)
        try:
            application = web_app(client, agents=agents, ui_url=_ui_url(ui, address), poll_s=poll)
        except RuntimeError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        server = uvicorn.Server(uvicorn.Config(application, host=host, port=port, log_level="warning", lifespan="on"))
        print(f"rein serve on http://{host}:{port}: the inbox at http://{host}:{port}/inbox"
              + (f", AG-UI at http://{host}:{port}/agui" if agents else ""), flush=True)
        print(application.state.auth.describe(), flush=True)
        await server.serve()
        if not server.started:
            raise CliError(f"could not listen on {host}:{port} (is the port taken?)")

    asyncio.run(go())

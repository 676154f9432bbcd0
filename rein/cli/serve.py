"""`rein serve`: rein's web surfaces in one process (rein.web.app): the approvals inbox at /inbox (docs/inbox.md)
and the AG-UI endpoint at /agui (docs/web.md)."""

from __future__ import annotations

import os
import socket
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


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, listening before `rein serve` says where: whoever reads that line can connect at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as error:
        raise CliError(f"cannot listen on {host}:{port}: {error.strerror or error}; pick another --port") from None


@app.command("serve")
def serve(
    agent: Annotated[list[str] | None, typer.Option("--agent", help="An agent to serve at /agui/NAME: its name (a worker "
                                                    "serves it) or MODULE:ATTR; repeatable (default: any agent a worker "
                                                    "serves).")] = None,
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Interface to bind (set REIN_CODEC_TOKEN or REIN_CODEC_JWKS_URL before "
                                           "binding beyond this machine: docs/web.md, docs/inbox.md).")] = "127.0.0.1",
    task_queue: Annotated[str | None, typer.Option(help="The task queue threads start on, and the rules' workflow "
                                                        "(default REIN_TASK_QUEUE or `rein`).")] = None,
    ui: Annotated[str | None, typer.Option(help="The Temporal UI's URL, for the inbox's links to runs (default: "
                                           "REIN_UI_URL, or the embedded server's UI).")] = None,
    poll: Annotated[float, typer.Option(min=0.1, max=60, help="Seconds between the inbox's reads of what waits (one "
                                        "reader for every open page).")] = 1.0,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Serve rein's web surfaces: the approvals inbox (GET /inbox: every decision people owe, live, with rules)
    and the AG-UI endpoint (POST /agui/AGENT, the URL an HttpAgent is given) for browsers talking to agents'
    threads. Callers need the token or JWT rein's codec server accepts, when set (a JWT's tenant claim scopes them)."""
    import asyncio

    import uvicorn

    from rein.temporal.bearer import BearerAuth
    from rein.web.app import build

    why = BearerAuth.from_env().misconfigured()
    if why is not None:
        raise CliError(why, EXIT_USAGE)
    agents = [load_agent_target(a) if ":" in a else a for a in agent or []]

    listening = _listen(host, port)

    async def go() -> None:
        client = await connect_client(address, namespace)
        web = build(client.client, agents, task_queue=task_queue, ui_url=_ui_url(ui, address), poll_s=poll)
        print(f"rein serve on http://{host}:{port}: AG-UI at /agui/<agent> for "
              f"{', '.join(sorted(web.state.agui_agents)) or 'any agent a worker serves'}", flush=True)
        print(f"the inbox at http://{host}:{port}/inbox; {web.state.auth.describe()}", flush=True)
        await uvicorn.Server(uvicorn.Config(web, host=host, port=port, log_level="warning")).serve(sockets=[listening])

    asyncio.run(go())

"""`rein serve`: rein's web surfaces in one process (the AG-UI endpoint at /agui: docs/web.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from rein.cli.app import Address, Namespace, app, connect_client, load_agent_target


@app.command("serve")
def serve(
    agent: Annotated[list[str] | None, typer.Option("--agent", help="An agent to serve at /agui/NAME: its name (a worker "
                                                    "serves it) or MODULE:ATTR; repeatable (default: any agent a worker "
                                                    "serves).")] = None,
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Interface to bind (set REIN_CODEC_TOKEN or REIN_CODEC_JWKS_URL before "
                                           "binding beyond this machine: docs/web.md).")] = "127.0.0.1",
    task_queue: Annotated[str | None, typer.Option(help="The task queue threads start on (default REIN_TASK_QUEUE or "
                                                        "`rein`).")] = None,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Serve rein's web surfaces: the AG-UI endpoint (POST /agui/AGENT, the URL an HttpAgent is given) for
    browsers talking to agents' threads. Callers need the token or JWT rein's codec server accepts, when set."""
    import asyncio

    import uvicorn

    from rein.ops.web import build

    agents = [load_agent_target(a) if ":" in a else a for a in agent or []]

    async def go() -> None:
        client = await connect_client(address, namespace)
        web = build(client.client, agents, task_queue=task_queue)
        print(f"rein serve on http://{host}:{port}: AG-UI at /agui/<agent> for "
              f"{', '.join(sorted(web.state.agui_agents)) or 'any agent a worker serves'}", flush=True)
        await uvicorn.Server(uvicorn.Config(web, host=host, port=port, log_level="warning")).serve()

    asyncio.run(go())

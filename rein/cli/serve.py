"""`rein serve`: rein's web surfaces in one process (rein.web.app): the approvals inbox at /inbox (docs/inbox.md),
the AG-UI endpoint at /agui (docs/web.md) and the AI SDK's (`useChat`) at /ai-sdk (docs/ai-sdk.md). Never open by
default: with no sign-in configured it signs people in with the local token under REIN_HOME (rein.web.tokens),
through the link it prints (`rein inbox link` shows it again); `--open` (loopback only) serves without sign-in."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from typing import TYPE_CHECKING, Annotated

import typer

from rein.cli.app import EXIT_USAGE, Address, CliError, Namespace, app, connect_client, load_agent_target

if TYPE_CHECKING:
    from rein.web.auth import WebAuth

SERVED_FILE = "web-serve.json"
"""Where the last `rein serve` started says where it listens (REIN_HOME), for `rein inbox link`."""


def _ui_url(given: str | None, address: str | None) -> str | None:
    """The Temporal UI the inbox links runs to: --ui, REIN_UI_URL, else the embedded server's own UI."""
    from rein.settings import current

    if given or current().ui_url:
        return given or current().ui_url
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


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _base_url(host: str, port: int) -> str:
    """Where a browser on this machine reaches the server (an any-address bind: through 127.0.0.1)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def _record(base_url: str) -> None:
    from rein.settings import current

    home = current().home.expanduser()
    home.mkdir(parents=True, exist_ok=True)
    (home / SERVED_FILE).write_text(json.dumps({"url": base_url, "pid": os.getpid()}))


def served_url() -> str | None:
    """The URL the last `rein serve` of this REIN_HOME listened on."""
    from rein.settings import current

    try:
        return str(json.loads((current().home.expanduser() / SERVED_FILE).read_text())["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _sign_in(host: str, open_mode: bool) -> WebAuth:
    """How people sign in, or one line (exit 2): a JWKS URL without its audience, open mode off loopback."""
    from rein.settings import current
    from rein.temporal.bearer import BearerAuth
    from rein.web.auth import WebAuth

    why = BearerAuth.from_settings().misconfigured()
    if why is not None:
        raise CliError(why, EXIT_USAGE)
    open_mode = open_mode or current().web_open
    if open_mode and not _loopback(host):
        raise CliError(f"--open (REIN_WEB_OPEN) serves loopback only, not --host {host}: bind 127.0.0.1, or sign "
                       "people in (docs/inbox.md)", EXIT_USAGE)
    try:
        return WebAuth(open=open_mode)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


@app.command("serve")
def serve(
    agent: Annotated[list[str] | None, typer.Option("--agent", help="An agent to serve at /agui/NAME and /ai-sdk/NAME: "
                                                    "its name (a worker serves it) or MODULE:ATTR; repeatable (default: "
                                                    "any agent a worker serves).")] = None,
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Interface to bind (set REIN_CODEC_TOKEN or REIN_CODEC_JWKS_URL before "
                                           "binding beyond this machine: docs/web.md, docs/inbox.md).")] = "127.0.0.1",
    task_queue: Annotated[str | None, typer.Option(help="The task queue threads start on, and the rules' workflow "
                                                        "(default REIN_TASK_QUEUE or `rein`).")] = None,
    ui: Annotated[str | None, typer.Option(help="The Temporal UI's URL, for the inbox's links to runs (default: "
                                           "REIN_UI_URL, or the embedded server's UI).")] = None,
    poll: Annotated[float, typer.Option(min=0.1, max=60, help="Seconds between the inbox's reads of what waits (one "
                                        "reader for every open page).")] = 1.0,
    open_mode: Annotated[bool, typer.Option("--open", help="Serve without sign-in (also REIN_WEB_OPEN=1): loopback "
                                            "binds only; every page says so.")] = False,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Serve rein's web surfaces: the approvals inbox (GET /inbox: every decision people owe, live, with rules),
    the AG-UI endpoint (POST /agui/AGENT, the URL an HttpAgent is given) and the AI SDK's (POST /ai-sdk/AGENT,
    useChat's `api`) for browsers talking to agents' threads. Sign-in: the token or JWT rein's codec server accepts,
    when set (a JWT's tenant claim scopes them); else the link this prints (its token kept in REIN_HOME; `rein inbox
    link` shows it again)."""
    import asyncio

    import uvicorn

    from rein.web.app import build
    from rein.web.tokens import sign_in_link

    auth = _sign_in(host, open_mode)
    agents = [load_agent_target(a) if ":" in a else a for a in agent or []]

    listening = _listen(host, port)
    base = _base_url(host, port)

    async def go() -> None:
        client = await connect_client(address, namespace)
        web = build(client.client, agents, task_queue=task_queue, ui_url=_ui_url(ui, address), poll_s=poll,
                    auth=auth)
        _record(base)
        print(f"rein serve on http://{host}:{port}: AG-UI at /agui/<agent>, the AI SDK at /ai-sdk/<agent> for "
              f"{', '.join(sorted(web.state.agui_agents)) or 'any agent a worker serves'}", flush=True)
        print(f"the inbox at {base}/inbox; {web.state.auth.describe()}", flush=True)
        if auth.local:
            print(f"sign in: {sign_in_link(base, auth.local)}", flush=True)
        await uvicorn.Server(uvicorn.Config(web, host=host, port=port, log_level="warning")).serve(sockets=[listening])

    asyncio.run(go())

"""`rein server` (start or join the shared embedded server), `rein server status`, `rein server stop`."""

from __future__ import annotations

import signal
import time
from typing import Annotated, Any

import typer

from rein.cli.app import (
    EXIT_ERROR,
    CliError,
    JsonFlag,
    escape,
    out_console,
    print_json,
    server_app,
)


@server_app.callback()
def server(
    ctx: typer.Context,
    port: Annotated[int | None, typer.Option(help="Frontend port when it starts (default: a free one).")] = None,
    ui_port: Annotated[int | None, typer.Option(help="Web UI port when it starts (default: a free one).")] = None,
) -> None:
    """Run rein's shared server (state in REIN_HOME) with the web UI until Ctrl-C.

    It is the server every rein command and script without TEMPORAL_ADDRESS uses; it stops
    when its last user exits. `rein server status` and `rein server stop` manage it.
    Long by design: start or join, print the addresses and the UI links, then hold until Ctrl-C.
    """
    if ctx.invoked_subcommand is not None:
        return
    from rein.durable.embedded_server import (
        embedded_status,
        ensure_embedded,
        listening,
        rein_home,
        release_embedded,
    )

    running = embedded_status()
    if running is None:
        for name, value in (("--port", port), ("--ui-port", ui_port)):
            if value and listening(value):
                raise CliError(f"port {value} ({name}) is already in use by another program; pick another {name}")
        from rein import settings

        settings.export(**{name: value for name, value in (("server_port", port), ("ui_port", ui_port)) if value})
    else:
        wanted = [(port, running["address"].rsplit(":", 1)[-1]), (ui_port, (running.get("ui") or "").rsplit(":", 1)[-1])]
        if any(value and str(value) != actual for value, actual in wanted):
            raise CliError(f"rein's server already runs at {running['address']} (UI {running.get('ui')}); "
                           "`rein server stop` it first to change its ports")

    stopping = False

    def stop_on_signal(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    try:
        address = ensure_embedded()
        state = embedded_status() or {}
        print(f"Temporal dev server: {address}  (export TEMPORAL_ADDRESS={address} for other tools)", flush=True)
        print(f"Temporal UI:         {state.get('ui') or 'not available'}", flush=True)
        print(f"State:               {state.get('db') or rein_home()}", flush=True)
        if state.get("ui"):
            from rein.ops.ui_links import ui_links

            links = ui_links(state["ui"])
            width = max(len(what) for what in links) + 2
            for what, url in links.items():
                print(f"  {what + ':':<{width}}{url}", flush=True)
        print("rein's search attributes are registered. "
              + ("It was already running; " if running else "") + "Ctrl-C to leave (it stops when no rein process uses it).",
              flush=True)
        while not stopping:
            time.sleep(0.25)
            if embedded_status() is None:
                raise CliError(f"the server stopped (see {rein_home() / 'server.log'})")
    finally:
        release_embedded()


@server_app.command("status")
def server_status(as_json: JsonFlag = False) -> None:
    """Is rein's shared server running? Its address, UI, state file and users."""
    from rein.durable.embedded_server import embedded_status, rein_home

    state = embedded_status()
    if as_json:
        print_json(state)
    elif state is None:
        out_console().print(f"not running (REIN_HOME={escape(str(rein_home()))})")
    else:
        from rich.table import Table

        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim")
        grid.add_column()
        for label, value in (("address", state.get("address")), ("UI", state.get("ui")), ("state", state.get("db")),
                             ("log", state.get("log")), ("in use", "yes" if state.get("in_use") else "no"),
                             ("pid", str(state.get("pid")))):
            grid.add_row(label, escape(str(value)))
        out_console().print(grid)
    if state is None:
        raise typer.Exit(EXIT_ERROR)


@server_app.command("stop")
def server_stop() -> None:
    """Stop rein's shared server now (its runs stay in REIN_HOME)."""
    from rein.durable.embedded_server import rein_home, stop_embedded

    stopped = stop_embedded()
    out_console().print("stopped" if stopped else f"not running (REIN_HOME={escape(str(rein_home()))})")


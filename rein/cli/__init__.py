"""`rein`: the operator's command line (typer + rich).

    rein server                                   the Temporal dev server with rein's search attributes and the UI
    rein worker --agent rein.examples.calculator:agent   serve agents' runs
    rein start calculator "what is 2+3?"          start a run (served by a worker)
    rein run rein.examples.calculator:agent "2+3?"  run an agent here, live, asking at the terminal
    rein list | show ID | status ID | result ID | watch ID
    rein approve ID | deny ID | answer ID TEXT | retry ID | cancel ID
    rein send THREAD "hi" --agent NAME [--mode steer]  a message to a conversation thread (starts it)
    rein threads | watch THREAD                   conversation threads; follow one across its turns
    rein schedule create ID --agent A --prompt P --every 1h | list | describe | pause | trigger | delete
    rein deployment status | set-current BUILD   Worker Versioning (docs/deploys.md)
    rein trace ID | --since 1d                    send finished runs' traces to OTEL_EXPORTER_OTLP_ENDPOINT
    rein codec-server                             let the UI decrypt payloads (REIN_CODEC_KEY)
    rein inbox [--agent A --tenant T --tool X] | inbox approve|deny [filters] [--yes]   every decision people owe
    rein policy add allow --tool read_file [--arg path=/tmp/*] | list | remove ID | explain RUN   rules that decide
    rein serve [--port 8000]                      rein's web surfaces: the inbox at /inbox, the AG-UI endpoint at /agui/AGENT
    rein new my-agent                             create a new agent project
    rein replay --since 7d | FILE...              replay histories against this build (the CI gate)
    rein history export ID -o FILE                save a run's history
    rein limits set --model openai/gpt-4o --rps 10  a provider's rate limit, tenants' weights (docs/fleet.md)
    rein usage --since 24h                        spend per tenant and per agent
    rein eval --agent new:agent --since 7d --fail-under 0.95  replay recorded runs against a changed agent

`rein.cli.app` holds the typer app and the shared helpers; each command group is a module that
decorates `app`, and `rein.cli.commands` imports them all (a new group is one module plus one line there).
Every error is one line on stderr and a non-zero exit code (see EXIT_CODES);
`--debug` (anywhere on the line, or REIN_DEBUG=1) adds the traceback. Ctrl-C is one line too, at any
moment (rein.cli.interrupt): importing this package loads nothing else, so `entry` installs that handler
before typer, temporalio or an agent is imported. The names below are loaded on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NoReturn

_EXPORTS = (
    "EXIT_CANCELLED", "EXIT_CODES", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_NEEDS_PERSON", "EXIT_NO_WORKER", "EXIT_NOT_FOUND",
    "EXIT_OK", "EXIT_REJECTED", "EXIT_RUN_FAILED", "EXIT_UNREACHABLE", "EXIT_USAGE", "CliError", "main",
)
__all__ = [*_EXPORTS, "entry"]

if TYPE_CHECKING:
    from rein.cli.app import (
        EXIT_CANCELLED,
        EXIT_CODES,
        EXIT_ERROR,
        EXIT_INTERRUPTED,
        EXIT_NEEDS_PERSON,
        EXIT_NO_WORKER,
        EXIT_NOT_FOUND,
        EXIT_OK,
        EXIT_REJECTED,
        EXIT_RUN_FAILED,
        EXIT_UNREACHABLE,
        EXIT_USAGE,
        CliError,
    )
    from rein.cli.dispatch import main


def entry(argv: list[str] | None = None) -> NoReturn:
    """The `rein` console script (and `python -m rein.cli`, `python worker.py`): Ctrl-C's one line first,
    then the command."""
    from rein.cli import interrupt

    interrupt.install()
    interrupt.fate("nothing was done (the command had not started)")  # until `main` starts the command
    from rein.cli.dispatch import run_and_exit

    run_and_exit(argv)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rein.cli' has no attribute {name!r}")
    value = getattr(importlib.import_module("rein.cli.dispatch" if name == "main" else "rein.cli.app"), name)
    globals()[name] = value
    return value

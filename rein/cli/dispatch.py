"""Running one `rein` command: `main` (its exit code, errors as one line) and the console script's exit.

Importing this registers every command group on `rein.cli.app.app` (rein.cli.commands); the console script
(`rein.cli.entry()`) imports it once Ctrl-C's handler is in.
"""

from __future__ import annotations

import copy
import os
import sys
import traceback
from typing import NoReturn

import typer
from typer.main import get_command_name

import rein.cli.commands  # noqa: F401  (registers every command group on `app`)
from rein.cli import interrupt
from rein.cli.app import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, app, explain
from rein.cli.usage import click_error


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code. Errors are one line on stderr (tracebacks with --debug)."""
    interrupt.fate("")  # the command starts: it says what Ctrl-C leaves behind (rein.cli.interrupt)
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    try:
        if debug:  # worker logs in this process (and the processes it starts) keep their tracebacks too
            from rein import settings

            settings.export(debug=True)
        # Click's standalone mode off: a usage mistake comes here as a UsageError (one line, not typer's box);
        # `--help` and typer.Exit come back as their exit code (commands themselves return None).
        code = only_the_named_command(args)(args=args, prog_name="rein", standalone_mode=False)
        return code if isinstance(code, int) else EXIT_OK
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or EXIT_OK
        print(f"rein: {exc.code}", file=sys.stderr)  # a library's sys.exit("message")
        return EXIT_ERROR
    except KeyboardInterrupt:  # no handler installed (main called in-process), or within interrupt.graceful()
        print(interrupt.line(), file=sys.stderr)
        return EXIT_INTERRUPTED
    except BaseException as exc:
        said = click_error(exc, command_path(args))  # a usage mistake (exit 2), a prompt aborted: one line
        if said is not None:
            if said[0]:
                print(said[0], file=sys.stderr)
            return said[1]
        if debug or _debug_set():
            traceback.print_exc()
        message, code = explain(exc)
        print(f"rein: {message}", file=sys.stderr)
        return code


def _debug_set() -> bool:
    """REIN_DEBUG, read only when a command failed: `rein --help` never loads the settings."""
    from rein.core.log import debug_enabled

    return debug_enabled()


def only_the_named_command(args: list[str]) -> typer.Typer:
    """`app` with only the command or group `args` names (and the global options), else the whole `app`.

    Typer builds a click command for every registered command on each call (~70 ms for all of
    them), though one runs. Help, a bare `rein`, or a name no command has get the whole `app`, so
    the top-level help and "No such command" (with its suggestion) read the same.
    """
    name = args[0] if args and not args[0].startswith("-") else None
    commands = [c for c in app.registered_commands if get_command_name(c.name or getattr(c.callback, "__name__", "")) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    view = copy.copy(app)
    view.registered_commands, view.registered_groups = commands, groups
    return view


def command_path(args: list[str]) -> str:
    """`rein schedule create` for `args` naming that command (as far as they name commands and groups)."""
    path, level = ["rein"], app
    for arg in args:
        group = next((g for g in level.registered_groups if g.name == arg), None)
        if group is not None and group.typer_instance is not None:
            path.append(arg)
            level = group.typer_instance
            continue
        if any(get_command_name(c.name or getattr(c.callback, "__name__", "")) == arg for c in level.registered_commands):
            path.append(arg)
        break
    return " ".join(path)


def run_and_exit(argv: list[str] | None = None) -> NoReturn:
    """The `rein` console script once Ctrl-C's handler is in (rein.cli.entry): run, flush, and leave
    without the interpreter's teardown.

    temporalio's Rust core threads may still call into Python while the interpreter
    finalizes, which aborts the process (exit 134, `PyGILState_Release`, sdk-python#300)
    after the command has already succeeded; `os._exit` after flushing skips that race.
    """
    code = main(argv)
    _close_engine()
    if "rein.tracing.setup" in sys.modules:  # spans still queued (a worker's last run span) go out first
        sys.modules["rein.tracing.setup"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or EXIT_ERROR
    os._exit(code)


def _close_engine() -> None:
    """What the engine's atexit hook would do (stop its worker and a server it started)."""
    engine = sys.modules.get("rein.durable.engine")
    instance = getattr(getattr(engine, "Engine", None), "_instance", None)
    if instance is not None:
        try:
            instance.close()
        except Exception:
            pass

"""A usage mistake as one line: `rein status: missing argument RUN_ID (see rein status --help)`.

Click finds the mistake (a missing argument, an unknown option or command, an option without its value, a value
of the wrong kind) and raises a UsageError; rein.cli.dispatch runs every command with click's standalone mode off
and prints this line for it, at that one place, instead of typer's box of usage, hint and error (4 to 6 lines).

Typer ships its own copy of click since 0.2x (typer._click, not public) and used click itself before: click's
classes are known here by name, so either works.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from rein.cli.app import EXIT_INTERRUPTED, EXIT_USAGE

KINDS = {
    "int_parsing": "is not a whole number", "int_from_float": "is not a whole number",
    "float_parsing": "is not a number", "bool_parsing": "is not true or false", "missing": "is missing",
}
"""How a value of the wrong kind reads (typer checks values with pydantic: its error type -> rein's words)."""


def is_a(obj: Any, name: str) -> bool:
    """`obj` is an instance of click's class `name` (typer's copy or click's own)."""
    return any(kind.__name__ == name for kind in type(obj).__mro__)


def click_error(err: BaseException, path: str = "rein") -> tuple[str, int] | None:
    """Click's error as rein's one line and exit code (None: not click's): a usage mistake is exit 2. `path`: the
    command the line names when click's error does not know it (an option without its value)."""
    if is_a(err, "NoArgsIsHelpError"):  # a bare `rein`: typer printed the help as it raised this
        return "", EXIT_USAGE
    if is_a(err, "UsageError"):
        return usage_line(err, path), EXIT_USAGE
    if is_a(err, "Abort"):  # the input ended at a prompt (Ctrl-D): as Ctrl-C (docs/cli.md, exit 130)
        return "rein: interrupted: the input ended at a prompt; nothing more was done", EXIT_INTERRUPTED
    if is_a(err, "ClickException"):
        return f"rein: {_sentence(err.format_message())}", int(getattr(err, "exit_code", 1))  # type: ignore[attr-defined]
    return None


def usage_line(err: Any, path: str = "rein") -> str:
    """The mistake, where it was made and where to read more, in one line."""
    path = err.ctx.command_path if err.ctx is not None else path
    return f"{path}: {_what(err)} (see {path} --help)"


def _what(err: Any) -> str:
    ctx = err.ctx
    if err.message.startswith("Missing command"):
        names = _commands(ctx)
        return f"missing command: {' or '.join(names) if len(names) < 3 else 'one of ' + ', '.join(names)}" if names \
            else "missing command"
    if is_a(err, "MissingParameter"):
        return f"missing {_param_kind(err.param)} {_name(err.param)}"
    if is_a(err, "BadParameter"):
        return f"bad value for {_name(err.param)}: {_bad_value(err)}"
    if is_a(err, "NoSuchOption"):
        similar = sorted(err.possibilities or ())
        return f"unknown option {err.option_name}" + (f" (did you mean {' or '.join(similar)}?)" if similar else "")
    if is_a(err, "BadOptionUsage") and "requires an argument" in err.message:
        return f"option {err.option_name} needs a value"
    unknown = re.match(r"No such command '([^']+)'", err.message)
    if unknown is not None:
        return _unknown_command(unknown.group(1), ctx)
    extra = re.match(r"Got unexpected extra argument(?:s|\(s\))? \((.+)\)", err.message)
    if extra is not None:
        return f"unexpected argument{'s' if ' ' in extra.group(1) else ''} {extra.group(1)}"
    return _sentence(err.message)


def _commands(ctx: Any) -> list[str]:
    """The commands of the group `ctx` is at (none for a command)."""
    command: Any = getattr(ctx, "command", None)
    return list(command.list_commands(ctx)) if hasattr(command, "list_commands") else []


def _unknown_command(name: str, ctx: Any) -> str:
    close = difflib.get_close_matches(name, _commands(ctx), n=3)
    return f"unknown command {name!r}" + (f" (did you mean {' or '.join(close)}?)" if close else "")


def _param_kind(param: Any) -> str:
    return "argument" if getattr(param, "param_type_name", "") == "argument" else "option"


def _name(param: Any) -> str:
    """RUN_ID for an argument, the long spelling of an option (`--limit`, not `-n`)."""
    if param is None:
        return "a value"
    if _param_kind(param) == "argument":
        return str(param.name or "value").upper()
    return max(param.opts, key=len) if param.opts else str(param.name or "value")


def _bad_value(err: Any) -> str:
    """What is wrong with the value: pydantic's verdict in rein's words, else click's sentence."""
    from pydantic import ValidationError

    cause = err.__cause__
    if isinstance(cause, ValidationError) and cause.errors():
        first = cause.errors()[0]
        said = KINDS.get(first["type"])
        if said is not None:
            return f"{first['input']!r} {said}"
        from rein.core.errors import validation_text

        return f"{first['input']!r}: {_sentence(validation_text(cause, 'value').split(': ', 1)[-1])}"
    return _sentence(err.message)


def _sentence(text: str) -> str:
    """Click's sentence as part of rein's line: no capital first, no final period."""
    text = " ".join(text.split()).rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text

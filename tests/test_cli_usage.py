"""Every usage mistake of `rein` is one line on stderr and exit 2 (rein.cli.usage), for every command: a missing
argument, an unknown option, an option without its value, a bad value, an unknown or missing command. Never
typer's box (its usage, hint and error, 4 to 6 lines).

Every command is checked through `rein.cli.main` (what the console script runs), in this process: the mistake is
found before any command runs, and 50 commands in a process each would cost a minute of CPU. The console script
itself, in processes, says the same for the examples the issue names.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

import rein.cli.commands  # noqa: F401  (registers every command)
from rein.cli import main
from rein.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
BOX = set("╭╮╰╯│─")


def _commands() -> list[tuple[str, Any]]:
    """(path, click command) of every command and group under `rein`."""
    found: list[tuple[str, Any]] = []

    def walk(command: Any, path: list[str]) -> None:
        if path:
            found.append((" ".join(path), command))
        if hasattr(command, "list_commands"):
            for name in command.list_commands(None):
                walk(command.get_command(None, name), [*path, name])

    walk(typer.main.get_command(app), [])
    return found


COMMANDS = _commands()
LEAVES = [(path, command) for path, command in COMMANDS if not hasattr(command, "list_commands")]
GROUPS = [path for path, command in COMMANDS if hasattr(command, "list_commands")]


def _said(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert out == "", out
    assert not BOX & set(err) and "Usage:" not in err and len(err.splitlines()) == 1, err
    return code, err.rstrip("\n")


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS])
def test_an_unknown_option_is_one_line(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _said(capsys, [*path.split(), "--no-such-option"]) == (
        2, f"rein {path}: unknown option --no-such-option (see rein {path} --help)")


def _first_required(command: Any) -> Any:
    return next((p for p in command.params if p.required), None)


@pytest.mark.parametrize("path", [path for path, command in LEAVES if _first_required(command) is not None])
def test_a_missing_argument_or_option_is_one_line(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    param = dict(LEAVES)[path].params and _first_required(dict(LEAVES)[path])
    missing = f"argument {param.name.upper()}" if param.param_type_name == "argument" else \
        f"option {max(param.opts, key=len)}"
    assert _said(capsys, path.split()) == (2, f"rein {path}: missing {missing} (see rein {path} --help)")


def _valued(command: Any) -> Any:
    """The command's first option that takes a value (not a flag)."""
    return next((p for p in command.params if p.param_type_name == "option" and not p.is_flag and p.nargs == 1
                 and not p.hidden and "--help" not in p.opts), None)


@pytest.mark.parametrize("path", [path for path, command in LEAVES if _valued(command) is not None])
def test_an_option_without_its_value_is_one_line(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    option = max(_valued(dict(LEAVES)[path]).opts, key=len)
    assert _said(capsys, [*path.split(), option]) == (2, f"rein {path}: option {option} needs a value (see rein {path} --help)")


@pytest.mark.parametrize("argv, line", [
    (["list", "--limit", "x"], "rein list: bad value for --limit: 'x' is not a whole number (see rein list --help)"),
    (["threads", "--limit", "1.5"], "rein threads: bad value for --limit: '1.5' is not a whole number (see rein threads "
                                    "--help)"),
    (["serve", "--port", "eighty"], "rein serve: bad value for --port: 'eighty' is not a whole number (see rein serve "
                                    "--help)"),
    (["status", "a", "b", "c"], "rein status: unexpected arguments b c (see rein status --help)"),
])
def test_a_bad_value_is_one_line(argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _said(capsys, argv) == (2, line)


@pytest.mark.parametrize("path", ["", *GROUPS])
def test_an_unknown_command_is_one_line(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    where = f"rein {path}".strip()
    assert _said(capsys, [*path.split(), "frobnicate"]) == (2, f"{where}: unknown command 'frobnicate' (see {where} --help)")


def test_a_near_miss_is_told_what_was_meant(capsys: pytest.CaptureFixture[str]) -> None:
    assert _said(capsys, ["statu"]) == (2, "rein: unknown command 'statu' (did you mean status or start?) (see rein --help)")
    assert _said(capsys, ["list", "--stat"]) == (
        2, "rein list: unknown option --stat (did you mean --status or --stuck or --tenant?) (see rein list --help)")


@pytest.mark.parametrize("path", [path for path in GROUPS if not dict(COMMANDS)[path].invoke_without_command])
def test_a_group_without_its_command_is_one_line_naming_them(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, line = _said(capsys, path.split())
    names = dict(COMMANDS)[path].list_commands(None)
    assert code == 2 and line.startswith(f"rein {path}: missing command: ") and line.endswith(f"(see rein {path} --help)")
    assert all(name in line for name in names), line


@pytest.mark.parametrize("argv, line", [
    (["status"], "rein status: missing argument RUN_ID (see rein status --help)"),
    (["list", "--stat"], "rein list: unknown option --stat (did you mean --status or --stuck or --tenant?) (see rein "
                         "list --help)"),
    (["inbox", "--tool"], "rein inbox: option --tool needs a value (see rein inbox --help)"),
    (["frobnicate"], "rein: unknown command 'frobnicate' (see rein --help)"),
])
def test_the_console_script_says_it_in_one_line(argv: list[str], line: str) -> None:
    proc = subprocess.run([REIN_BIN, *argv], cwd=str(ROOT), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", line + "\n")


def test_help_still_shows_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--help"]) == 0
    assert "RUN_ID" in capsys.readouterr().out.upper()

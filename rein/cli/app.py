"""The typer `app` and what every command shares: exit codes, consoles, connecting, one-line errors.

Command modules (`rein/cli/<group>.py`) do `from rein.cli.app import app` and decorate their
commands; `rein.cli.commands` imports them, and rein.cli.dispatch runs one: its `main` turns any exception
into one line on stderr and an exit code (see EXIT_CODES); `--debug` (anywhere on the line, or
REIN_DEBUG=1) adds the traceback.
"""

from __future__ import annotations

import asyncio
import enum
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from rein.client import ReinClient

T = TypeVar("T")

EXIT_OK = 0
EXIT_ERROR = 1
"""Anything else that went wrong (the message says what)."""
EXIT_USAGE = 2
"""Bad arguments: an unknown option, a malformed MOD:ATTR, an agent that cannot be imported."""
EXIT_NOT_FOUND = 3
"""No run with that id."""
EXIT_UNREACHABLE = 4
"""No Temporal server at the address."""
EXIT_REJECTED = 5
"""The run rejected the decision (nothing pending, an unknown tool-call id, the wrong kind)."""
EXIT_RUN_FAILED = 6
"""`rein result`/`run`/`watch`: the run failed (the message is its cause) or was terminated."""
EXIT_NEEDS_PERSON = 7
"""`rein run` without a terminal stopped at an interrupt; the run waits (the hint says how to go on)."""
EXIT_NO_WORKER = 8
"""A decision found no worker serving the run: it was not sent (nothing applies it later); `--wait` waits."""
EXIT_NOT_REPLAYABLE = 9
"""`rein replay`: a history does not replay with this code (deploying it would strand that run)."""
EXIT_CANCELLED = 10
"""`rein result`/`watch`: the run was cancelled (the message gives the reason); its output, if any, is on stdout."""
EXIT_QUEUED = 11
"""A decision was sent, no worker has taken the run: queued on the server, not applied yet (docs/cli.md)."""
EXIT_EVAL_BELOW = 12
"""`rein eval --fail-under`: the share of recorded runs the changed agent matches is below the bar."""
EXIT_INTERRUPTED = 130
"""Ctrl-C: one line saying what became of the run (rein.cli.interrupt)."""

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "an error not covered below (the message says what)",
    EXIT_USAGE: "bad arguments, a malformed MOD:ATTR or an agent that cannot be loaded",
    EXIT_NOT_FOUND: "no run with that id",
    EXIT_UNREACHABLE: "no Temporal server reachable",
    EXIT_REJECTED: "the run rejected the decision",
    EXIT_RUN_FAILED: "the run failed, was terminated or timed out",
    EXIT_NEEDS_PERSON: "`rein run` without a terminal stopped at an interrupt; the run waits",
    EXIT_NO_WORKER: "no worker serves the run: the decision was not sent (--wait waits for one)",
    EXIT_NOT_REPLAYABLE: "`rein replay`: a history does not replay with this code; `rein deployment`: a build cannot take the runs",
    EXIT_CANCELLED: "`rein result`/`watch`: the run was cancelled (the line gives the reason)",
    EXIT_QUEUED: "queued: the decision was sent, no worker has taken the run; not applied yet (--wait waits for that)",
    EXIT_EVAL_BELOW: "`rein eval --fail-under`: fewer recorded runs match than the bar asks",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}

STATUS_STYLE = {
    "running": "blue",
    "waiting_approval": "bold yellow",
    "waiting_input": "bold yellow",
    "waiting_retry": "bold yellow",
    "done": "green",
    "cancelled": "magenta",
    "failed": "bold red",
    "stuck": "bold red",
    "idle": "cyan",
}


class CliError(Exception):
    """A failure the CLI reports as one line and an exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


class RunStatusChoice(str, enum.Enum):
    running = "running"
    waiting_approval = "waiting_approval"
    waiting_input = "waiting_input"
    waiting_retry = "waiting_retry"
    done = "done"
    cancelled = "cancelled"
    failed = "failed"
    idle = "idle"


def _epilog() -> str:
    codes = " · ".join(f"{code} {what}" for code, what in EXIT_CODES.items())
    return f"Exit codes: {codes}. Add --debug to any command for a traceback."


app = typer.Typer(
    name="rein",
    help="rein: durable agent runs on Temporal. Start, watch and answer runs; serve agents.",
    epilog=_epilog(),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _global_options(
    debug: Annotated[bool, typer.Option(
        "--debug",
        help="Show the traceback of an error (anywhere on the line; or REIN_DEBUG=1), and worker logs in full.")] = False,
) -> None:
    """rein: durable agent runs on Temporal. Start, watch and answer runs; serve agents."""
    # `main` takes --debug out of the arguments wherever it is; this option is here for the help.


server_app = typer.Typer(
    help="The Temporal dev server with rein's search attributes and the web UI.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(server_app, name="server")


def out_console() -> Console:
    from rich.console import Console

    # Wide when piped, so ids and summaries are never cut (a terminal keeps its own width).
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200, highlight=False)


def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)


def escape(text: str) -> str:
    """rich's markup escape. rich is imported where it prints (~50 ms): a `--json` command or a one-line
    error never loads it."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


# --------------------------------------------------------------------------- connection and errors

Address = Annotated[
    str | None,
    typer.Option("--address", help="Temporal frontend host:port (default: TEMPORAL_ADDRESS, a profile, or the embedded server)."),
]
Namespace = Annotated[str | None, typer.Option("--namespace", "-n", help="Temporal namespace (default: TEMPORAL_NAMESPACE or `default`).")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
RunId = Annotated[str, typer.Argument(help="The run's id (its Temporal workflow id).", show_default=False)]


async def connect_client(address: str | None, namespace: str | None, *, person: bool = True) -> ReinClient:
    """The command's client; `person`: its Temporal identity is the person's (REIN_IDENTITY, default USER@HOST),
    as every command that decides or changes something; a worker's keeps temporalio's `PID@HOST`."""
    from rein.temporal.connection import connect, settings

    try:
        if person:
            from rein.durable.bound import person as who

            client = await connect(address, namespace, identity=who())
        else:
            client = await connect(address, namespace)
    except RuntimeError as err:
        if "connect" not in str(err).lower():
            raise
        target = settings(address, namespace)
        where = target.address if target else "the embedded server"
        raise CliError(
            f"cannot reach Temporal at {where} ({connect_reason(err)}); start one with `rein server` "
            "or point --address / TEMPORAL_ADDRESS at a running server",
            EXIT_UNREACHABLE,
        ) from err
    from rein.client import ReinClient, ReinConnection  # once connected: a refused connection never needs it

    return ReinClient(ReinConnection.of(client))


def connect_reason(err: Exception) -> str:
    text = str(err)
    for needle, reason in (("Connection refused", "connection refused"), ("timed out", "timed out"),
                           ("dns error", "unknown host"), ("certificate", "TLS error")):
        if needle.lower() in text.lower():
            return reason
    return text.split(":", 1)[-1].strip()[:120]


def with_client(address: str | None, namespace: str | None, action: Callable[[ReinClient], Awaitable[T]]) -> T:
    async def go() -> T:
        client = await connect_client(address, namespace)
        return await action(client)

    return asyncio.run(go())


def explain(exc: BaseException) -> tuple[str, int]:
    """One line and an exit code for an exception no command turned into a CliError."""
    if isinstance(exc, CliError):
        return str(exc), exc.code
    if "rein.settings" in sys.modules and isinstance(exc, sys.modules["rein.settings"].SettingsError):
        return str(exc), EXIT_USAGE  # a bad REIN_* value: its variable and what it expects
    if "pydantic" in sys.modules and isinstance(exc, sys.modules["pydantic"].ValidationError):
        return _invalid(exc)
    if "temporalio" not in sys.modules and "rein.core.errors" not in sys.modules:
        return _plain(exc)  # raised before Temporal or rein's errors were imported: none of them
    from temporalio.client import WorkflowFailureError
    from temporalio.service import RPCError, RPCStatusCode

    from rein.core.errors import DecisionRejected, RunFailed
    from rein.ops.runs import RunNotFound, failure_message, was_cancelled

    if isinstance(exc, RunNotFound):
        return f"no run with id {str(exc)!r} (check the id, --namespace and --address)", EXIT_NOT_FOUND
    if isinstance(exc, DecisionRejected):
        return f"the run rejected it: {exc}", EXIT_REJECTED
    if was_cancelled(exc):  # closed as Temporal's CANCELED
        run_id = getattr(exc, "run_id", None)
        return (f"run {run_id} was cancelled" if run_id else "the run was cancelled"), EXIT_CANCELLED
    if isinstance(exc, RunFailed):
        return str(exc), EXIT_RUN_FAILED
    if isinstance(exc, WorkflowFailureError):
        return f"the run failed: {failure_message(exc)}", EXIT_RUN_FAILED
    if isinstance(exc, RPCError):
        if exc.status == RPCStatusCode.NOT_FOUND:
            return f"not found: {exc.message}", EXIT_NOT_FOUND
        if exc.status == RPCStatusCode.UNAVAILABLE:
            return f"Temporal is unavailable: {exc.message}", EXIT_UNREACHABLE
        if exc.status == RPCStatusCode.INVALID_ARGUMENT and "search attribute" in exc.message.lower():
            return (f"the server rejected the query ({exc.message}); rein's search attributes are registered by "
                    "`rein server`, a rein worker, or the docker-compose setup job"), EXIT_ERROR
        return f"Temporal said: {exc.message or exc.status.name}", EXIT_ERROR
    if isinstance(exc, RuntimeError) and "client connect" in str(exc).lower():
        return f"cannot reach Temporal ({connect_reason(exc)})", EXIT_UNREACHABLE
    return _plain(exc)


def _invalid(exc: Any) -> tuple[str, int]:
    """A value pydantic refused, in rein's words (a bad setting is rein.settings.SettingsError, above)."""
    from rein.core.errors import validation_text

    return f"invalid {exc.title}: {validation_text(exc)}", EXIT_ERROR


def _plain(exc: BaseException) -> tuple[str, int]:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, (ValueError, RuntimeError)) else text, EXIT_ERROR


# --------------------------------------------------------------------------- agents


def load_agent_target(target: str) -> Any:
    """`module:attr` → the Agent, or a CliError that says what is wrong with the target."""
    from rein.blueprint.agent import load_agent

    module, _, attr = target.partition(":")
    if not module or not attr:
        raise CliError(f"expected MODULE:ATTR (e.g. rein.examples.calculator:agent), got {target!r}", EXIT_USAGE)
    try:
        return load_agent(target)
    except SystemExit as exc:  # load_agent's own message: not an Agent
        raise CliError(str(exc), EXIT_USAGE) from None
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise CliError(f"no module named {exc.name!r} (from {target!r}; run rein from the project's directory)",
                           EXIT_USAGE) from exc
        raise CliError(f"importing {module!r} failed: {exc}", EXIT_USAGE) from exc
    except Exception as exc:
        raise CliError(f"importing {module!r} failed: {type(exc).__name__}: {exc}", EXIT_USAGE) from exc

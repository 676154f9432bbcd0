"""`rein`: the operator's command line (typer + rich).

    rein server                                   the Temporal dev server with rein's search attributes and the UI
    rein worker --agent examples.calculator:agent serve agents' runs
    rein start calculator "what is 2+3?"          start a run (served by a worker)
    rein run examples.calculator:agent "2+3?"     run an agent here, live, asking at the terminal
    rein list | show ID | status ID | result ID | watch ID
    rein approve ID | deny ID | answer ID TEXT | retry ID | cancel ID
    rein codec-server                             let the UI decrypt payloads (REIN_CODEC_KEY)
    rein new my-agent                             create a new agent project

Every error is one line on stderr and a non-zero exit code (see EXIT_CODES);
`--debug` (anywhere on the line, or REIN_DEBUG=1) adds the traceback.
"""

from __future__ import annotations

import asyncio
import enum
import json
import os
import shlex
import signal
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

if TYPE_CHECKING:
    from rein.client import ReinClient
    from rein.runs import RunDetail

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
EXIT_INTERRUPTED = 130
"""Ctrl-C."""

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "an error not covered below (the message says what)",
    EXIT_USAGE: "bad arguments, a malformed MOD:ATTR or an agent that cannot be loaded",
    EXIT_NOT_FOUND: "no run with that id",
    EXIT_UNREACHABLE: "no Temporal server reachable",
    EXIT_REJECTED: "the run rejected the decision",
    EXIT_RUN_FAILED: "the run failed, was terminated or timed out",
    EXIT_NEEDS_PERSON: "`rein run` without a terminal stopped at an interrupt; the run waits",
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
server_app = typer.Typer(
    help="The Temporal dev server with rein's search attributes and the web UI.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(server_app, name="server")


def _out() -> Console:
    # Wide when piped, so ids and summaries are never cut (a terminal keeps its own width).
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200, highlight=False)


def _err() -> Console:
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


# --------------------------------------------------------------------------- connection and errors

Address = Annotated[
    str | None,
    typer.Option("--address", help="Temporal frontend host:port (default: TEMPORAL_ADDRESS, a profile, or the embedded server)."),
]
Namespace = Annotated[str | None, typer.Option("--namespace", "-n", help="Temporal namespace (default: TEMPORAL_NAMESPACE or `default`).")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
RunId = Annotated[str, typer.Argument(help="The run's id (its Temporal workflow id).", show_default=False)]


async def _connect(address: str | None, namespace: str | None) -> ReinClient:
    from rein.client import ReinClient, connect
    from rein.temporal.connection import settings

    try:
        return ReinClient(await connect(address, namespace))
    except RuntimeError as err:
        if "connect" not in str(err).lower():
            raise
        target = settings(address, namespace)
        where = target.address if target else "the embedded server"
        raise CliError(
            f"cannot reach Temporal at {where} ({_connect_reason(err)}); start one with `rein server` "
            "or point --address / TEMPORAL_ADDRESS at a running server",
            EXIT_UNREACHABLE,
        ) from err


def _connect_reason(err: Exception) -> str:
    text = str(err)
    for needle, reason in (("Connection refused", "connection refused"), ("timed out", "timed out"),
                           ("dns error", "unknown host"), ("certificate", "TLS error")):
        if needle.lower() in text.lower():
            return reason
    return text.split(":", 1)[-1].strip()[:120]


def _with_client(address: str | None, namespace: str | None, action: Callable[[ReinClient], Awaitable[T]]) -> T:
    async def go() -> T:
        client = await _connect(address, namespace)
        return await action(client)

    return asyncio.run(go())


def _explain(exc: BaseException) -> tuple[str, int]:
    """One line and an exit code for an exception no command turned into a CliError."""
    from temporalio.client import WorkflowFailureError
    from temporalio.service import RPCError, RPCStatusCode

    from rein.client import DecisionRejected, RunFailed
    from rein.runs import RunNotFound, failure_message

    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, RunNotFound):
        return f"no run with id {str(exc)!r} (check the id, --namespace and --address)", EXIT_NOT_FOUND
    if isinstance(exc, DecisionRejected):
        return f"the run rejected it: {exc}", EXIT_REJECTED
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
        return f"cannot reach Temporal ({_connect_reason(exc)})", EXIT_UNREACHABLE
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, (ValueError, RuntimeError)) else text, EXIT_ERROR


# --------------------------------------------------------------------------- agents


def _load_agent(target: str) -> Any:
    """`module:attr` → the Agent, or a CliError that says what is wrong with the target."""
    from rein.worker import load_agent

    module, _, attr = target.partition(":")
    if not module or not attr:
        raise CliError(f"expected MODULE:ATTR (e.g. examples.calculator:agent), got {target!r}", EXIT_USAGE)
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


# --------------------------------------------------------------------------- rendering


def _age(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _status(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"


def _tool_call_text(call: Any) -> str:
    arguments = json.dumps(call.arguments, ensure_ascii=False, indent=2) if call.arguments else "{}"
    return f"{call.name}  (id {call.id})\n{arguments}"


def _answer_hints(run_id: str, detail: RunDetail) -> list[str]:
    quoted = shlex.quote(run_id)
    itr = detail.interrupt
    if itr is None:
        return []
    if itr.type == "need_approval":
        hints = [f"rein approve {quoted}", f"rein deny {quoted} --reason '...'"]
        if len(detail.pending_tool_calls) > 1:
            hints += [f"rein approve {quoted} --tool-call-id {shlex.quote(c.id)}" for c in detail.pending_tool_calls]
        return hints
    if itr.type == "need_input":
        return [f"rein answer {quoted} '...'"]
    return [f"rein retry {quoted}", f"rein cancel {quoted} --reason '...'"]


def _render_interrupt(console: Console, run_id: str, detail: RunDetail) -> None:
    itr = detail.interrupt
    if itr is None:
        return
    if itr.type == "need_approval":
        body = "Waiting for approval of:\n\n" + "\n\n".join(
            escape(_tool_call_text(c)) for c in detail.pending_tool_calls
        )
    elif itr.type == "need_input":
        body = f"Waiting for input: {escape(itr.message)}"
    else:
        body = f"Waiting after an error: {escape(itr.message)}"
    hints = "\n".join(f"  {escape(h)}" for h in _answer_hints(run_id, detail))
    console.print(Panel(f"{body}\n\n[dim]Answer with:[/]\n{hints}", title="pending", expand=False))


def _render_detail(console: Console, detail: RunDetail, *, steps: bool) -> None:
    header = Table.grid(padding=(0, 2))
    header.add_column(style="dim")
    header.add_column()
    header.add_row("run", escape(detail.id))
    header.add_row("agent", escape(detail.agent or "?"))
    header.add_row("status", _status(detail.status) + ("" if detail.live else "  [dim](no worker answered; from visibility)[/]"))
    if detail.summary:
        header.add_row("summary", escape(detail.summary))
    if detail.fork_of:
        header.add_row("fork of", escape(__import__("rein.cli_fork").cli_fork.lineage_line(detail.fork_of)))
    if detail.stage and detail.status not in ("done", "cancelled", "failed"):
        header.add_row("stage", detail.stage)
    if detail.iteration is not None:
        header.add_row("iterations", str(detail.iteration))
    if detail.usage is not None:
        u = detail.usage
        tokens = f"{u.total_tokens}" + (f" ({u.input_tokens} in, {u.output_tokens} out)" if u.input_tokens else "")
        header.add_row("tokens", tokens)
    started = detail.started.astimezone()
    header.add_row("started", f"{started:%Y-%m-%d %H:%M:%S} ({_age(datetime.now(timezone.utc) - detail.started)} ago)")
    if detail.closed:
        header.add_row("closed", f"{detail.closed.astimezone():%Y-%m-%d %H:%M:%S}")
    if detail.stop_reason and detail.interrupt is None:
        header.add_row("stop reason", detail.stop_reason)
    if detail.ignored_signals:
        header.add_row("ignored signals", str(detail.ignored_signals))
    if detail.error:
        header.add_row("error", f"[red]{escape(detail.error)}[/]")
    if detail.output:
        header.add_row("output", escape(detail.output))
    console.print(header)
    if steps:
        console.print()
        if detail.steps is None:
            console.print("[dim]steps: no worker answered the steps query (start `rein worker` for this agent)[/]")
        else:
            table = Table(title="steps", title_justify="left", show_lines=False)
            for name, justify in (("#", "right"), ("kind", "left"), ("summary", "left"), ("duration", "right"),
                                  ("tokens", "right"), ("error", "left")):
                table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
            for step in detail.steps:
                table.add_row(
                    str(step.index),
                    step.kind,
                    escape(step.summary),
                    f"{step.duration_s:.2f}s" if step.duration_s is not None else "",
                    str(step.usage.total_tokens) if step.usage else "",
                    "[red]error[/]" if step.is_error else "",
                )
            console.print(table)
    if detail.interrupt is not None:
        console.print()
        _render_interrupt(console, detail.id, detail)


# --------------------------------------------------------------------------- server


@server_app.callback()
def server(
    ctx: typer.Context,
    port: Annotated[int | None, typer.Option(help="Frontend port when it starts (default: a free one).")] = None,
    ui_port: Annotated[int | None, typer.Option(help="Web UI port when it starts (default: a free one).")] = None,
) -> None:
    """Run rein's shared server (state in REIN_HOME) with the web UI until Ctrl-C.

    It is the server every rein command and script without TEMPORAL_ADDRESS uses; it stops
    when its last user exits. `rein server status` and `rein server stop` manage it.
    """
    if ctx.invoked_subcommand is not None:
        return
    from rein.server import embedded_status, ensure_embedded, listening, release_embedded, rein_home

    running = embedded_status()
    if running is None:
        for name, value in (("--port", port), ("--ui-port", ui_port)):
            if value and listening(value):
                raise CliError(f"port {value} ({name}) is already in use by another program; pick another {name}")
        if port:
            os.environ["REIN_SERVER_PORT"] = str(port)
        if ui_port:
            os.environ["REIN_UI_PORT"] = str(ui_port)
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
    from rein.server import embedded_status, rein_home

    state = embedded_status()
    if as_json:
        _print_json(state)
    elif state is None:
        _out().print(f"not running (REIN_HOME={escape(str(rein_home()))})")
    else:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim")
        grid.add_column()
        for label, value in (("address", state.get("address")), ("UI", state.get("ui")), ("state", state.get("db")),
                             ("log", state.get("log")), ("in use", "yes" if state.get("in_use") else "no"),
                             ("pid", str(state.get("pid")))):
            grid.add_row(label, escape(str(value)))
        _out().print(grid)
    if state is None:
        raise typer.Exit(EXIT_ERROR)


@server_app.command("stop")
def server_stop() -> None:
    """Stop rein's shared server now (its runs stay in REIN_HOME)."""
    from rein.server import rein_home, stop_embedded

    stopped = stop_embedded()
    _out().print("stopped" if stopped else f"not running (REIN_HOME={escape(str(rein_home()))})")


# --------------------------------------------------------------------------- worker


@app.command()
def worker(
    agent: Annotated[list[str], typer.Option("--agent", "-a", help="MODULE:ATTR of a rein.Agent; repeat for more.",
                                             show_default=False)],
    task_queue: Annotated[str | None, typer.Option(help="Task queue (default: REIN_TASK_QUEUE or `rein`).")] = None,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Serve these agents' runs until Ctrl-C. API keys are read from this process's environment only."""
    import contextlib

    from rein.contract import DEFAULT_TASK_QUEUE, agent_task_queue
    from rein.worker import create_worker, ensure_search_attributes

    agents = [_load_agent(target) for target in agent]
    queue = task_queue or os.environ.get("REIN_TASK_QUEUE") or DEFAULT_TASK_QUEUE
    console = _err()

    async def serve() -> None:
        client = await _connect(address, namespace)
        available = await ensure_search_attributes(client.client)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        # The shared queue (`rein start`, raw clients) and each agent's own queue, where the runs
        # `Agent.run`/`rein run` started live: a script's unfinished runs are finished here too.
        queues = [queue] + [q for q in dict.fromkeys(agent_task_queue(a.name) for a in agents) if q != queue]
        async with contextlib.AsyncExitStack() as stack:
            for name in queues:
                await stack.enter_async_context(create_worker(client.client, agents, task_queue=name))
            names = ", ".join(a.name for a in agents)
            target = client.client.service_client.config.target_host
            console.print(f"rein worker on {target} ({client.client.namespace}), task queues "
                          f"{', '.join(queues)}: {names}")
            if len(available) < 4:
                console.print(f"[yellow]search attributes available: {', '.join(available) or 'none'}[/]")
            console.print("[dim]Ctrl-C stops; runs in flight continue on the next worker.[/]")
            await stop.wait()

    asyncio.run(serve())


# --------------------------------------------------------------------------- start / run


@app.command()
def start(
    agent: Annotated[str, typer.Argument(help="The agent's registered name (a worker must serve it).", show_default=False)],
    prompt: Annotated[str, typer.Argument(help="What to ask.", show_default=False)],
    run_id: Annotated[str | None, typer.Option("--id", help="The run id (default: AGENT-<random>).")] = None,
    task_queue: Annotated[str | None, typer.Option(help="Task queue the agent's worker polls (default: REIN_TASK_QUEUE or `rein`).")] = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Start a run of AGENT and print its id (it runs on a worker: `rein worker --agent ...`)."""
    from temporalio.exceptions import WorkflowAlreadyStartedError

    async def go(client: ReinClient) -> str:
        if task_queue:
            client.task_queue = task_queue
        try:
            handle = await client.start(agent, prompt, run_id=run_id)
        except WorkflowAlreadyStartedError:
            raise CliError(f"a run with id {run_id!r} already exists; pick another --id") from None
        return handle.id

    started = _with_client(address, namespace, go)
    if as_json:
        _print_json({"run_id": started})
        return
    print(started)
    quoted = shlex.quote(started)
    _err().print(f"[dim]started; follow it with `rein watch {quoted}`, see it with `rein show {quoted}`[/]")


@app.command()
def run(
    agent: Annotated[str, typer.Argument(help="MODULE:ATTR of a rein.Agent (the current directory is importable).",
                                         show_default=False)],
    prompt: Annotated[str, typer.Argument(help="What to ask.", show_default=False)],
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="Approve every tool call without asking.")] = False,
) -> None:
    """Run an agent in this process, streaming the answer and each step live; asks here when it needs a person.

    Without a terminal and without --auto-approve it stops at the first question with a hint:
    the run waits (durably) for `rein approve` / `rein answer` / `rein retry`.
    """
    from rein.runs import RunDetail

    target = _load_agent(agent)
    console = _out()
    err = _err()
    interactive = sys.stdin.isatty()

    async def go() -> Any:
        shown: list[Any] = []
        result = await target.arun(prompt)
        while True:
            # A resumed result may carry only the steps since the pause, or all of them.
            cumulative = [s.summary for s in result.steps[: len(shown)]] == [s.summary for s in shown]
            for step in result.steps[len(shown):] if cumulative and shown else result.steps:
                _print_step(err, step)
            shown = list(result.steps)
            if result.status != "interrupted" or result.interrupt is None:
                return result
            itr = result.interrupt
            pending = list(result.session.pending_tool_calls) if itr.type == "need_approval" else []
            detail = RunDetail(id=result.run_id or "local", agent=target.name, status="", summary=None,
                               started=datetime.now(timezone.utc), closed=None, iteration=None, usage=None,
                               interrupt=itr, pending_tool_calls=pending)
            if itr.type == "need_approval" and auto_approve:
                for call in pending:
                    err.print(f"[dim]auto-approved[/] {escape(_call_line(call))}")
                result = await target.aresume(result.session, approve=True)
                continue
            if not interactive:
                _render_interrupt(err, detail.id, detail)
                raise CliError(_stop_hint(result, agent), EXIT_NEEDS_PERSON)
            if itr.type == "need_approval":
                approve = _ask_approval(err, pending)
                result = await target.aresume(result.session, approve=approve)
            elif itr.type == "need_input":
                answer = typer.prompt(itr.message or "Your answer")
                result = await target.aresume(result.session, answer=answer)
            else:
                err.print(f"[red]the model call failed:[/] {escape(itr.message)}")
                if not typer.confirm("Retry?", default=True, err=True):
                    return result
                result = await target.aresume(result.session)

    async def go_durable() -> Any:
        """The run's stream, live: text as the model writes it, each step as it is recorded."""
        from rein import engine
        from rein.client import ReinClient

        eng = await engine.engine()
        key = eng.register(target)
        run_id = engine.new_workflow_id(target)
        client = ReinClient(eng.client)  # lives on the engine's loop: every call goes through eng.submit
        await eng.submit(eng.begin(key, run_id, prompt, None, stream=True))
        caller = asyncio.get_running_loop()
        seen, answer, open_line = 0, "", False
        while True:
            queue: asyncio.Queue[Any] = asyncio.Queue()

            async def pump(skip: int) -> None:  # on the engine loop; the stream replays from its start
                try:
                    count = 0
                    async for chunk in client.stream(run_id):
                        count += 1
                        if count > skip:
                            caller.call_soon_threadsafe(queue.put_nowait, chunk)
                            if chunk.type in ("interrupt", "done"):
                                break
                finally:
                    caller.call_soon_threadsafe(queue.put_nowait, None)

            pumping = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(pump(seen), eng.loop))
            last = None
            while (chunk := await queue.get()) is not None:
                seen += 1
                last = chunk
                if chunk.type == "text":
                    console.print(escape(chunk.text), end="")
                    answer, open_line = answer + chunk.text, True
                elif chunk.type == "step":
                    if open_line:
                        console.print()
                        open_line = False
                    if chunk.name == "tool":
                        answer = ""  # the answer is what the model writes after the last tool
                    _render_chunk(console, err, chunk)
            await pumping
            if last is None or last.type == "done":
                result = await eng.submit(client.wait(run_id))
                if open_line:
                    console.print()
                if answer.strip() != (result.output or "").strip():  # not streamed (or not all of it)
                    console.print(escape(result.output or ""))
                return result
            view = await eng.submit(client.status(run_id))
            itr = view.interrupt
            if itr is None:
                continue
            detail = RunDetail(id=run_id, agent=target.name, status=view.status, summary=None,
                               started=datetime.now(timezone.utc), closed=None, iteration=view.iteration,
                               usage=view.usage, interrupt=itr, pending_tool_calls=view.pending_tool_calls)
            if itr.type == "need_approval" and auto_approve:
                for call in view.pending_tool_calls:
                    err.print(f"[dim]auto-approved[/] {escape(_call_line(call))}")
                await eng.submit(client.approve(run_id, None, "rein run --auto-approve"))
            elif not interactive:
                _render_interrupt(err, run_id, detail)
                raise CliError(_stop_hint(detail, agent), EXIT_NEEDS_PERSON)
            elif itr.type == "need_approval":
                decide = client.approve if _ask_approval(err, view.pending_tool_calls) else client.deny
                await eng.submit(decide(run_id))
            elif itr.type == "need_input":
                await eng.submit(client.answer(run_id, typer.prompt(itr.message or "Your answer")))
            else:
                err.print(f"[red]the model call failed:[/] {escape(itr.message)}")
                if not typer.confirm("Retry?", default=True, err=True):
                    raise CliError(_stop_hint(detail, agent), EXIT_NEEDS_PERSON)
                await eng.submit(client.retry(run_id))

    durable = target._engine() == "temporal"
    try:
        result = asyncio.run(go_durable() if durable else go())
    except (CliError, KeyboardInterrupt):
        raise
    except Exception as exc:  # no key, a rejected key, a fatal model error: the run failed
        message, _ = _explain(exc)
        raise CliError(f"the run failed: {message}", EXIT_RUN_FAILED) from exc
    if not durable:
        console.print(escape(result.output or ""))
    err.print(f"[dim]{result.stop_reason} · {result.usage.total_tokens} tokens · run {result.run_id or 'local'}[/]")


def _call_line(call: Any) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())
    return f"{call.name}({args})"


def _print_step(console: Console, step: Any) -> None:
    extra = []
    if step.duration_s is not None:
        extra.append(f"{step.duration_s:.2f}s")
    if step.usage is not None and step.usage.total_tokens:
        extra.append(f"{step.usage.total_tokens} tokens")
    mark = "[red]✗[/]" if step.is_error else "[green]✓[/]"
    console.print(f"{mark} [dim]{step.kind:5}[/] {escape(step.summary)} [dim]{' · '.join(extra)}[/]")


def _ask_approval(console: Console, calls: list[Any]) -> bool:
    console.print("[bold yellow]Approval needed[/] to run:")
    for call in calls:
        console.print(f"  [bold]{escape(call.name)}[/] [dim](id {escape(call.id)})[/]")
        console.print_json(json.dumps(call.arguments, ensure_ascii=False))
    return typer.confirm("Approve?", default=False, err=True)


def _stop_hint(result: Any, target: str) -> str:
    run_id = getattr(result, "run_id", None) or getattr(result, "id", None)
    run_id = None if run_id == "local" else run_id
    if not run_id:
        return "stopped: the run needs a person and there is no terminal; rerun with --auto-approve"
    quoted = shlex.quote(run_id)
    verb = {"need_approval": f"rein approve {quoted}", "need_input": f"rein answer {quoted} TEXT"}.get(
        result.interrupt.type, f"rein retry {quoted}")
    return (f"stopped: run {run_id} waits for a person and there is no terminal; answer with `{verb}` "
            f"while `rein worker --agent {target}` serves it, or rerun with --auto-approve")


# --------------------------------------------------------------------------- list / show / status / result


@app.command("list")
def list_(
    status: Annotated[RunStatusChoice | None, typer.Option("--status", "-s", help="Only runs in this status: running, waiting_approval, "
                                           "waiting_input, waiting_retry, done, cancelled or failed.",
                                                           case_sensitive=False)] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only runs of this agent (its registered name).")] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs, newest first.", min=1)] = 50,
    fork_of: Annotated[str | None, typer.Option("--fork-of", help="Only forks of this run (rein fork).")] = None,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """List runs: id, agent, status, iterations, tokens, what it waits for, age."""
    from rein.runs import list_runs

    rows = _with_client(address, namespace,
                        lambda client: list_runs(client, status.value if status else None, agent, limit, fork_of))
    if as_json:
        _print_json([row.to_json() for row in rows])
        return
    console = _out()
    if not rows:
        what = f" in status {status.value}" if status else ""
        console.print(f"[dim]no runs{what}{f' of agent {agent}' if agent else ''}[/]")
        return
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("agent")
    table.add_column("status", no_wrap=True)
    table.add_column("iterations", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("waiting for", overflow="fold")
    table.add_column("age", justify="right")
    now = datetime.now(timezone.utc)
    for row in rows:
        table.add_row(escape(row.id), escape(row.agent), _status(row.status),
                      "" if row.iterations is None else str(row.iterations),
                      "" if row.tokens is None else str(row.tokens),
                      escape(row.waits_for), _age(row.age(now)))
    console.print(table)


@app.command()
def show(
    run_id: RunId,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """A run's state and its steps (kind, summary, duration, tokens, errors), and what it waits for."""
    from rein.runs import describe_run

    detail = _with_client(address, namespace, lambda client: describe_run(client, run_id, steps=True))
    if as_json:
        data = detail.to_json()
        data["steps"] = None if detail.steps is None else [s.model_dump(mode="json") for s in detail.steps]
        _print_json(data)
        return
    _render_detail(_out(), detail, steps=True)


@app.command()
def status(
    run_id: RunId,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """A run's status: running, waiting_approval|input|retry, done, cancelled or failed."""
    from rein.runs import describe_run

    detail = _with_client(address, namespace, lambda client: describe_run(client, run_id))
    if as_json:
        _print_json(detail.to_json())
        return
    _render_detail(_out(), detail, steps=False)


@app.command()
def result(
    run_id: RunId,
    address: Address = None,
    namespace: Namespace = None,
    as_json: JsonFlag = False,
) -> None:
    """Wait for a run to finish and print its output (a failed run: its cause, exit code 6)."""
    from rein.runs import RunNotFound, describe_run, is_not_found

    async def go(client: ReinClient) -> Any:
        detail = await describe_run(client, run_id)
        if detail.interrupt is not None:
            hints = " or ".join(f"`{h}`" for h in _answer_hints(run_id, detail)[:2])
            _err().print(f"[yellow]run {escape(run_id)} is {detail.status}[/]; waiting until it finishes "
                         f"(answer it with {escape(hints)})")
        try:
            return await client.result(run_id)
        except Exception as err:
            if is_not_found(err):
                raise RunNotFound(run_id) from None
            raise

    try:
        outcome = _with_client(address, namespace, go)
    except Exception as exc:
        from temporalio.client import WorkflowFailureError

        from rein.runs import failure_message

        if isinstance(exc, WorkflowFailureError):
            raise CliError(f"run {run_id} failed: {failure_message(exc)}", EXIT_RUN_FAILED) from exc
        raise
    if as_json:
        _print_json(outcome.model_dump(mode="json", exclude={"session"}))
        return
    _out().print(escape(outcome.output or ""))
    if outcome.stop_reason not in ("done", "stop"):
        _err().print(f"[dim]stop reason: {outcome.stop_reason}[/]")


# --------------------------------------------------------------------------- decisions


Approver = Annotated[str | None, typer.Option(
    help="Who decides, recorded in Session.decisions (default: this client's Temporal identity). "
         "Asserted by the caller: access control is Temporal's.")]


def _decide(address: str | None, namespace: str | None, run_id: str, what: str,
            action: Callable[[ReinClient], Awaitable[Any]]) -> Any:
    """Send a decision through the run's validated update; a rejection is one line and exit 5."""
    from rein.client import DecisionRejected
    from rein.runs import describe_run

    async def go(client: ReinClient) -> Any:
        task = asyncio.ensure_future(action(client))
        done, _ = await asyncio.wait({task}, timeout=NO_WORKER_HINT_AFTER_S)
        if not done:
            await _warn_without_worker(client, run_id, what)
        try:
            return await task
        except DecisionRejected:
            await describe_run(client, run_id)  # an unknown id is "not found", not a rejection
            raise

    try:
        return _with_client(address, namespace, go)
    except DecisionRejected as exc:
        raise CliError(str(exc), EXIT_REJECTED) from exc


NO_WORKER_HINT_AFTER_S = 3.0
"""A decision is an Update a worker must process; after this long, check whether any worker polls."""


async def _warn_without_worker(client: ReinClient, run_id: str, what: str) -> None:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    try:
        queue = (await client.handle(run_id).describe()).task_queue
        described = await client.client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=client.client.namespace, task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ))
    except Exception:
        return
    if not described.pollers:
        _err().print(f"[yellow]no worker polls task queue {escape(queue)!r}: the {what} waits until one starts "
                     "(`rein worker --agent MODULE:ATTR`); Ctrl-C to stop waiting[/]")


@app.command()
def approve(
    run_id: RunId,
    tool_call_id: Annotated[str | None, typer.Option(help="Only this tool call (default: every pending call).")] = None,
    approver: Approver = None,
    reason: Annotated[str, typer.Option(help="Why (recorded).")] = "",
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Approve a run's pending tool calls."""
    ids = _decide(address, namespace, run_id, "approval", lambda c: c.approve(run_id, tool_call_id, approver, reason))
    _out().print(f"approved {', '.join(ids or []) or 'nothing'} in run {escape(run_id)}")


@app.command()
def deny(
    run_id: RunId,
    tool_call_id: Annotated[str | None, typer.Option(help="Only this tool call (default: every pending call).")] = None,
    approver: Approver = None,
    reason: Annotated[str, typer.Option(help="Why (the model sees it).")] = "",
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Deny a run's pending tool calls; the model is told they were denied, and why."""
    ids = _decide(address, namespace, run_id, "denial", lambda c: c.deny(run_id, tool_call_id, approver, reason))
    _out().print(f"denied {', '.join(ids or []) or 'nothing'} in run {escape(run_id)}")


@app.command()
def answer(
    run_id: RunId,
    text: Annotated[str, typer.Argument(help="The answer the run waits for.", show_default=False)],
    approver: Approver = None,
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Answer a run waiting for input (an `ask_human` question)."""
    _decide(address, namespace, run_id, "answer", lambda c: c.answer(run_id, text, approver))
    _out().print(f"answered run {escape(run_id)}")


@app.command()
def retry(run_id: RunId, address: Address = None, namespace: Namespace = None) -> None:
    """Retry a run waiting after an error (its model attempts were exhausted)."""
    _decide(address, namespace, run_id, "retry", lambda c: c.retry(run_id))
    _out().print(f"retrying run {escape(run_id)}")


@app.command()
def cancel(
    run_id: RunId,
    reason: Annotated[str, typer.Option(help="Why (recorded).")] = "",
    address: Address = None,
    namespace: Namespace = None,
) -> None:
    """Cancel a run: it ends with stop reason `cancelled`."""
    _decide(address, namespace, run_id, "cancellation", lambda c: c.cancel(run_id, reason))
    _out().print(f"cancelled run {escape(run_id)}")


# --------------------------------------------------------------------------- watch


@app.command()
def watch(run_id: RunId, address: Address = None, namespace: Namespace = None) -> None:
    """Follow a run's stream live (text, tool calls, steps) until it pauses for a person or ends."""
    from rein.runs import RunNotFound, describe_run, is_not_found

    out = _out()
    err = _err()

    async def go(client: ReinClient) -> RunDetail:
        detail = await describe_run(client, run_id)
        if detail.closed is not None or detail.interrupt is not None:
            await _follow_steps(client, run_id, err)  # already paused or ended: its steps so far
        else:
            seen_pauses = 0
            try:
                async for chunk in client.stream(run_id):  # from the start: the steps so far, then live
                    _render_chunk(out, err, chunk)
                    if chunk.type == "interrupt":
                        seen_pauses += 1
                    if chunk.type == "done" or (chunk.type == "interrupt" and seen_pauses > detail.pause):
                        break
            except Exception as exc:
                if is_not_found(exc):
                    raise RunNotFound(run_id) from None
                raise
            detail = await describe_run(client, run_id)
        return detail

    detail = _with_client(address, namespace, go)
    out.print()
    _render_detail(err, detail, steps=False)
    if detail.status == "failed":
        raise CliError(f"run {run_id} failed: {detail.error}", EXIT_RUN_FAILED)


async def _follow_steps(client: ReinClient, run_id: str, err: Console) -> None:
    """A paused or finished run: print its steps so far."""
    from rein.runs import describe_run

    for step in (await describe_run(client, run_id, steps=True)).steps or []:
        _print_step(err, step)


def _render_chunk(out: Console, err: Console, chunk: Any) -> None:
    kind = getattr(chunk, "type", None)
    if kind == "text":
        out.print(escape(chunk.text), end="")
    elif kind == "tool_calls":
        for call in chunk.tool_calls or []:
            err.print(f"\n[cyan]→ {escape(_call_line(call))}[/]")
    elif kind == "step" and chunk.data:
        from rein.result import Step

        _print_step(err, Step.model_validate(chunk.data))
    elif kind == "interrupt" and chunk.data:
        err.print(f"\n[yellow]paused ({escape(str(chunk.data.get('type')))}): {escape(chunk.data.get('message') or '')}[/]")


# --------------------------------------------------------------------------- codec server


@app.command("codec-server")
def codec_server(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8081,
    host: Annotated[str, typer.Option(help="Interface to bind (anyone who reaches it can decrypt).")] = "127.0.0.1",
    ui_origin: Annotated[list[str] | None, typer.Option(
        help="An origin allowed to call it, e.g. the Temporal UI's URL; repeatable (default http://localhost:8233).")] = None,
) -> None:
    """Decrypt payloads for the Temporal UI and `temporal` CLI (needs REIN_CODEC_KEY, like the workers)."""
    from aiohttp import web

    from rein.temporal.codec import ENV_VAR, codec_from_env
    from rein.temporal.codec_server import DEFAULT_UI_ORIGIN, build_app

    codec = codec_from_env()
    if codec is None:
        raise CliError(f"{ENV_VAR} is not set: the codec server needs the keys the workers use", EXIT_USAGE)
    web.run_app(build_app(codec, ui_origin or [DEFAULT_UI_ORIGIN]), host=host, port=port,
                print=lambda _: print(f"rein codec server on http://{host}:{port}; in the UI: Settings -> "
                                      f"Codec Server -> http://{host}:{port}", flush=True))


# --------------------------------------------------------------------------- new


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="The project's directory name (the agent is named after it).",
                                        show_default=False)],
    template: Annotated[str, typer.Option("--template", "-t", help="minimal or coder.")] = "minimal",
    dir: Annotated[str, typer.Option("--dir", help="Where to create the project directory.")] = ".",
) -> None:
    """Create a new agent project from a template."""
    from rein.scaffold import create_project

    try:
        path = create_project(name, template, dir)
    except (ValueError, FileExistsError) as exc:
        raise CliError(str(exc)) from None
    print(f"Created project {name!r} in {path.resolve()} (template: {template})")
    print()
    print("Next steps:")
    print(f"  cd {shlex.quote(str(path))}")
    if template == "coder":
        print("  cp .env.example .env    # then set REIN_MODEL and your vendor's API key")
        print('  python main.py "what does this project do?"')
    else:
        print("  python main.py          # offline, with a scripted model")
        print("  cp .env.example .env    # for a real model: set REIN_MODEL and your vendor's API key")
    print("  pytest                  # needs: pip install 'rein[test]'")


__import__("rein.cli_fork").cli_fork.register(app)  # `rein fork`, `rein rewind`
__import__("rein.cli_trace").cli_trace.register(app)  # `rein trace`


# --------------------------------------------------------------------------- entry points


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code. Errors are one line on stderr (tracebacks with --debug)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("REIN_DEBUG", "") not in ("", "0")
    args = [a for a in args if a != "--debug"]
    try:
        # Standalone mode: typer reports usage errors itself (exit 2) and raises SystemExit when done.
        app(args=args, prog_name="rein", standalone_mode=True)
        return EXIT_OK
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or EXIT_OK
        print(f"rein: {exc.code}", file=sys.stderr)  # a library's sys.exit("message")
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("rein: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BaseException as exc:
        if debug:
            traceback.print_exc()
        message, code = _explain(exc)
        print(f"rein: {message}", file=sys.stderr)
        return code


def entry() -> NoReturn:
    """The `rein` console script: run, flush, and leave without the interpreter's teardown.

    temporalio's Rust core threads may still call into Python while the interpreter
    finalizes, which aborts the process (exit 134, `PyGILState_Release`, sdk-python#300)
    after the command has already succeeded; `os._exit` after flushing skips that race.
    """
    code = main()
    _close_engine()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or EXIT_ERROR
    os._exit(code)


def _close_engine() -> None:
    """What the engine's atexit hook would do (stop its worker and a server it started)."""
    engine = sys.modules.get("rein.engine")
    instance = getattr(getattr(engine, "Engine", None), "_instance", None)
    if instance is not None:
        try:
            instance.close()
        except Exception:
            pass


if __name__ == "__main__":
    entry()

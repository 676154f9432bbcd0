"""`rein run`: run an agent in this process, live, asking at the terminal when it needs a person.

One interrupt loop (`_drive`) serves both engines: a driver starts the run and resumes it with
a `Decision`, and reports each pause; `_decide` asks the person (or auto-approves, or stops
with a hint when there is no terminal).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from rein.cli import interrupt
from rein.cli.app import (
    EXIT_INTERRUPTED,
    EXIT_NEEDS_PERSON,
    EXIT_RUN_FAILED,
    CliError,
    app,
    err_console,
    escape,
    explain,
    load_agent_target,
    out_console,
)
from rein.cli.render import call_line, print_step, render_chunk, render_interrupt

if TYPE_CHECKING:
    from rich.console import Console


@dataclass
class Decision:
    """What the person decided at a pause."""

    kind: Literal["approve", "deny", "answer", "retry"]
    text: str | None = None
    approver: str | None = None


@dataclass
class Pause:
    """A run waiting for a person: its id (None in-process), why, and the tool calls it asks about."""

    run_id: str | None
    interrupt: Any
    pending: list[Any] = field(default_factory=list)

    def detail(self, agent: str) -> Any:
        from rein.ops.runs import RunDetail

        return RunDetail(id=self.run_id or "local", agent=agent, status="", summary=None,
                         started=datetime.now(UTC), closed=None, iteration=None, usage=None,
                         interrupt=self.interrupt, pending_tool_calls=self.pending)


@app.command()
def run(
    agent: Annotated[str, typer.Argument(help="MODULE:ATTR of a rein.Agent (the current directory is importable).",
                                         show_default=False)],
    prompt: Annotated[str, typer.Argument(help="What to ask.", show_default=False)],
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="Approve every tool call without asking.")] = False,
) -> None:
    """Run an agent in this process, streaming the answer and each step live; asks here when it needs a person.

    Without a terminal and without --auto-approve it stops at the first question with a hint:
    the run waits (durably) for `rein approve` / `rein answer` / `rein retry`. Ctrl-C stops this command
    at once (exit 130) with one line saying where the run stands and how to answer it; a durable run waits.
    """
    interrupt.fate("no run was started")
    target = load_agent_target(agent)
    durable = target._engine() == "temporal"
    driver: LocalDriver | DurableDriver = (DurableDriver if durable else LocalDriver)(target, prompt, agent)
    try:
        result = asyncio.run(_drive(driver, agent, auto_approve, sys.stdin.isatty()))
    except (CliError, KeyboardInterrupt):
        raise
    except typer.Abort:  # end of input at a prompt (Ctrl-D): the person left, the run did not fail
        if sys.stderr.isatty():
            print(file=sys.stderr)  # the cursor sits after the prompt
        raise CliError(interrupt.line().removeprefix("rein: "), EXIT_INTERRUPTED) from None
    except Exception as exc:  # no key, a rejected key, a fatal model error: the run failed
        message, _ = explain(exc)
        raise CliError(message if message.startswith("run ") else f"the run failed: {message}", EXIT_RUN_FAILED) from exc
    err_console().print(f"[dim]{result.stop_reason} · {result.usage.total_tokens} tokens · "
                        f"run {result.run_id or 'local'}[/]")


async def _drive(driver: LocalDriver | DurableDriver, agent: str, auto_approve: bool, interactive: bool) -> Any:
    """The interrupt loop: run until the end, deciding at every pause."""
    err = err_console()
    pause = await driver.begin()
    while pause is not None:
        if pause.run_id and pause.run_id != "local":
            interrupt.fate(f"run {pause.run_id} {_waits_for(pause)}; answer it with {_answer_with(pause)} "
                           f"while `rein worker --agent {agent}` serves it")
        decision = _decide(err, pause, driver.target.name, agent, auto_approve, interactive)
        if decision is None:  # the person declined to retry a failed model call
            return driver.give_up(pause, agent)
        pause = await driver.resume(decision)
    return driver.finish()


def _decide(err: Console, pause: Pause, name: str, agent: str, auto_approve: bool,
            interactive: bool) -> Decision | None:
    itr = pause.interrupt
    if itr.type == "need_approval" and auto_approve:
        for call in pause.pending:
            err.print(f"[dim]auto-approved[/] {escape(call_line(call))}")
        return Decision("approve", approver="rein run --auto-approve")
    if not interactive:
        render_interrupt(err, pause.run_id or "local", pause.detail(name))
        raise CliError(_stop_hint(pause, agent), EXIT_NEEDS_PERSON)
    if itr.type == "need_approval":
        return Decision("approve" if _ask_approval(err, pause.pending) else "deny")
    if itr.type == "need_input":
        return Decision("answer", text=typer.prompt(itr.message or "Your answer"))
    err.print(f"[red]the model call failed:[/] {escape(itr.message)}")
    return Decision("retry") if typer.confirm("Retry?", default=True, err=True) else None


class LocalDriver:
    """The in-process engine: each step is printed as the run returns; the answer at the end."""

    def __init__(self, target: Any, prompt: str, spec: str):
        self.target, self.prompt = target, prompt
        self.result: Any = None
        self.shown: list[Any] = []

    async def begin(self) -> Pause | None:
        interrupt.fate("the run was in this process only (the local engine) and stopped with it")
        return self._after(await self.target.arun(self.prompt))

    async def resume(self, decision: Decision) -> Pause | None:
        return self._after(await self.target.aresume(
            self.result.session, approve=decision.kind != "deny", answer=decision.text))

    def _after(self, result: Any) -> Pause | None:
        self.result = result
        # A resumed result may carry only the steps since the pause, or all of them.
        cumulative = [s.summary for s in result.steps[: len(self.shown)]] == [s.summary for s in self.shown]
        for step in result.steps[len(self.shown):] if cumulative and self.shown else result.steps:
            print_step(err_console(), step)
        self.shown = list(result.steps)
        if result.status != "interrupted" or result.interrupt is None:
            return None
        itr = result.interrupt
        pending = list(result.session.pending_tool_calls) if itr.type == "need_approval" else []
        return Pause(result.run_id, itr, pending)

    def give_up(self, pause: Pause, agent: str) -> Any:
        return self.finish()

    def finish(self) -> Any:
        out_console().print(escape(self.result.output or ""))
        return self.result


class DurableDriver:
    """A durable run on this process's engine: its stream, live (text as the model writes it,
    each step as it is recorded); decisions go through the run's validated updates."""

    def __init__(self, target: Any, prompt: str, spec: str):
        self.target, self.prompt, self.spec = target, prompt, spec
        self.seen, self.answer, self.open_line = 0, "", False
        self.eng: Any = None
        self.client: Any = None
        self.run_id = ""

    async def begin(self) -> Pause | None:
        from rein.client import ReinClient
        from rein.durable import engine

        self.eng = await engine.engine()
        interrupt.on_leave(self.eng.routing.let_go)  # Ctrl-C: the run follows the current build, not this process's
        key = self.eng.register(self.target)
        self.run_id = engine.new_workflow_id(self.target)
        self.client = ReinClient(self.eng.client)  # lives on the engine's loop: every call goes through eng.submit
        interrupt.fate(f"run {self.run_id} may have started; `rein status {self.run_id}` shows whether it did")
        await self.eng.submit(self.eng.begin(key, self.run_id, self.prompt, None, stream=True))
        self._running()
        return await self._follow()

    async def resume(self, decision: Decision) -> Pause | None:
        c, run_id = self.client, self.run_id
        send = {"approve": lambda: c.approve(run_id, None, decision.approver),
                "deny": lambda: c.deny(run_id), "answer": lambda: c.answer(run_id, decision.text),
                "retry": lambda: c.retry(run_id)}[decision.kind]
        said = {"approve": "approval", "deny": "denial"}.get(decision.kind, decision.kind)
        interrupt.fate(f"run {run_id}: the {said} may not have reached it; `rein status {run_id}` shows where it stands")
        await self.eng.submit(send())
        self._running()
        return await self._follow()

    def _running(self) -> None:
        """Ctrl-C from here: the run goes on on the server, waiting for a worker once this process is gone."""
        run_id = self.run_id
        interrupt.fate(f"run {run_id} goes on when a worker serves it (`rein worker --agent {self.spec}`); "
                       f"follow it with `rein watch {run_id}`")

    async def _follow(self) -> Pause | None:
        """Print the stream until the run pauses (its Pause) or ends (None)."""
        while True:
            last = None
            async for chunk in self.eng.relay(lambda: self._chunks(skip=self.seen)):
                self.seen += 1
                last = chunk
                self._show(chunk)
            if last is None or last.type == "done":
                self.result = await self.eng.submit(self.client.wait(self.run_id))
                return None
            view = await self.eng.submit(self.client.status(self.run_id))
            if view.interrupt is not None:
                return Pause(self.run_id, view.interrupt, list(view.pending_tool_calls))

    async def _chunks(self, skip: int) -> AsyncIterator[Any]:
        """The run's stream from chunk `skip` to its next pause or end (it replays from its start)."""
        count = 0
        async for chunk in self.client.stream(self.run_id):
            count += 1
            if count > skip:
                yield chunk
                if chunk.type in ("interrupt", "done"):
                    return

    def _show(self, chunk: Any) -> None:
        console = out_console()
        if chunk.type == "text":
            console.print(escape(chunk.text), end="")
            self.answer, self.open_line = self.answer + chunk.text, True
        elif chunk.type == "step":
            if self.open_line:
                console.print()
                self.open_line = False
            if chunk.name == "tool":
                self.answer = ""  # the answer is what the model writes after the last tool
            render_chunk(console, err_console(), chunk)

    def give_up(self, pause: Pause, agent: str) -> Any:
        raise CliError(_stop_hint(pause, agent), EXIT_NEEDS_PERSON)

    def finish(self) -> Any:
        console = out_console()
        if self.open_line:
            console.print()
        if self.answer.strip() != (self.result.output or "").strip():  # not streamed (or not all of it)
            console.print(escape(self.result.output or ""))
        return self.result


def _ask_approval(console: Console, calls: list[Any]) -> bool:
    console.print("[bold yellow]Approval needed[/] to run:")
    for call in calls:
        console.print(f"  [bold]{escape(call.name)}[/] [dim](id {escape(call.id)})[/]")
        console.print_json(json.dumps(call.arguments, ensure_ascii=False))
    return typer.confirm("Approve?", default=False, err=True)


def _stop_hint(pause: Pause, target: str) -> str:
    if not pause.run_id or pause.run_id == "local":
        return "stopped: the run needs a person and there is no terminal; rerun with --auto-approve"
    return (f"stopped: run {pause.run_id} waits for a person and there is no terminal; answer with {_answer_with(pause)} "
            f"while `rein worker --agent {target}` serves it, or rerun with --auto-approve")


def _waits_for(pause: Pause) -> str:
    return {"need_approval": "waits for approval", "need_input": "waits for an answer"}.get(
        pause.interrupt.type, "waits after a failed model call")


def _answer_with(pause: Pause) -> str:
    """The command that answers the pause, in backticks."""
    quoted = shlex.quote(pause.run_id or "")
    return {"need_approval": f"`rein approve {quoted}` (or `rein deny {quoted}`)",
            "need_input": f"`rein answer {quoted} TEXT`"}.get(pause.interrupt.type, f"`rein retry {quoted}`")

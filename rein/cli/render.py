"""How runs look in a terminal: a run's detail, its pending interrupt, steps and stream chunks."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from rein.cli.app import STATUS_STYLE, escape

if TYPE_CHECKING:
    from rich.console import Console

    from rein.ops.runs import RunDetail


# --------------------------------------------------------------------------- rendering


def age(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def styled_status(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"


def tool_call_text(call: Any) -> str:
    arguments = json.dumps(call.arguments, ensure_ascii=False, indent=2) if call.arguments else "{}"
    return f"{call.name}  (id {call.id})\n{arguments}"


def answer_hints(run_id: str, detail: RunDetail) -> list[str]:
    quoted = shlex.quote(run_id)
    itr = detail.interrupt
    if itr is None:
        return []
    if itr.type == "need_approval":
        hints = [f"rein approve {quoted}", f"rein deny {quoted} --reason '...'"]
        if len(detail.pending_tool_calls) > 1:
            hints += [f"rein approve {quoted} --call {shlex.quote(c.id)}" for c in detail.pending_tool_calls]
        return hints
    if itr.type == "need_input":
        return [f"rein answer {quoted} '...'"]
    return [f"rein retry {quoted}", f"rein cancel {quoted} --reason '...'"]


def render_interrupt(console: Console, run_id: str, detail: RunDetail) -> None:
    from rich.panel import Panel

    itr = detail.interrupt
    if itr is None:
        return
    if itr.type == "need_approval":
        body = "Waiting for approval of:\n\n" + "\n\n".join(
            escape(tool_call_text(c)) for c in detail.pending_tool_calls
        )
    elif itr.type == "need_input":
        body = f"Waiting for input: {escape(itr.message)}"
    else:
        body = f"Waiting after an error: {escape(itr.message)}"
    hints = "\n".join(f"  {escape(h)}" for h in answer_hints(run_id, detail))
    if itr.wait:
        body += f"\n\n[dim]wait {escape(itr.wait)}: a decision naming it is refused once the run waits on another[/]"
    if detail.served is False:  # a decision now would not be sent (exit 8)
        hints += "\n[dim]once a worker serves it (or add --wait: it waits for one)[/]"
    console.print(Panel(f"{body}\n\n[dim]Answer with:[/]\n{hints}", title="pending", expand=False))


def render_detail(console: Console, detail: RunDetail, *, steps: bool) -> None:
    from rich.table import Table

    # Long by design: one line per fact `rein show` prints, in the order a person reads them.
    header = Table.grid(padding=(0, 2))
    header.add_column(style="dim")
    header.add_column()
    header.add_row("run", escape(detail.id))
    header.add_row("agent", escape(detail.agent or "?"))
    header.add_row("status", styled_status(detail.status) + ("" if detail.live else "  [dim](no worker answered; from visibility)[/]"))
    if detail.summary:
        header.add_row("summary", escape(detail.summary))
    if detail.fork_of:
        header.add_row("fork of", escape(lineage_line(detail.fork_of)))
    if detail.stage and detail.status not in ("done", "cancelled", "failed"):
        header.add_row("stage", detail.stage)
    if detail.iteration is not None:
        header.add_row("iterations", str(detail.iteration))
    if detail.usage is not None:
        u = detail.usage
        tokens = f"{u.total_tokens}" + (f" ({u.input_tokens} in, {u.output_tokens} out)" if u.input_tokens else "")
        if detail.turns is not None:  # a thread: every turn's
            tokens += f", all {detail.turns} turn{'s' if detail.turns != 1 else ''}"
        header.add_row("tokens", tokens)
        if u.cost_usd is not None:
            header.add_row("cost", f"${u.cost_usd:.4f}")  # with the run's child agents (docs/fleet.md)
    if detail.tenant:
        header.add_row("tenant", escape(detail.tenant))
    started = detail.started.astimezone()
    header.add_row("started", f"{started:%Y-%m-%d %H:%M:%S} ({age(datetime.now(UTC) - detail.started)} ago)")
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
    if detail.build is not None and detail.closed is None:  # which build it waits for, and what moves it
        header.add_row("build", ("" if detail.build.polling else "[yellow]") + escape(detail.build.line())
                       + ("" if detail.build.polling else "[/]"))
    elif detail.served is False and detail.closed is None:
        state = "state as the run published it" if detail.source == "published" else "state replayed from its history"
        header.add_row("worker", f"[yellow]none serves it[/] (queue {escape(detail.task_queue or '?')}; {state}): "
                       "start `rein worker --agent MODULE:ATTR` for its agent")
    console.print(header)
    if steps:
        console.print()
        render_steps(console, detail)
    if detail.interrupt is not None:
        console.print()
        render_interrupt(console, detail.id, detail)


def render_steps(console: Console, detail: RunDetail) -> None:
    """`rein show`'s steps: one row per step, or why there are none."""
    from rich.table import Table

    if detail.steps is None:
        console.print("[dim]steps: no worker answered the steps query (start `rein worker` for this agent)[/]")
        return
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


def render_decisions(console: Console, rows: list[Any]) -> None:
    """`rein show`'s decisions: each call decided by a person, a rule or a timeout, and when (rein.durable.policy)."""
    from rich.table import Table

    table = Table(title="decisions", title_justify="left")
    for name in ("call", "tool", "decision", "by", "at", "reason"):
        table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(escape(r.call_id), escape(r.tool), r.decision, escape(r.by), r.at[:19].replace("T", " "),
                      escape(r.reason))
    console.print(table)


def lineage_line(lineage: dict[str, Any]) -> str:
    """`rein show`'s line for a fork: where it came from, what changed, who asked."""
    edits = "; ".join(lineage.get("edits") or []) or "no edits"
    return f"{lineage.get('of')} at step {lineage.get('at_step')} ({edits}) by {lineage.get('by') or 'unknown'}"


def call_line(call: Any) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())
    return f"{call.name}({args})"


def print_step(console: Console, step: Any) -> None:
    extra = []
    if step.duration_s is not None:
        extra.append(f"{step.duration_s:.2f}s")
    if step.usage is not None and step.usage.total_tokens:
        extra.append(f"{step.usage.total_tokens} tokens")
    mark = "[red]✗[/]" if step.is_error else "[green]✓[/]"
    console.print(f"{mark} [dim]{step.kind:5}[/] {escape(step.summary)} [dim]{' · '.join(extra)}[/]")



class StreamPrinter:
    """A run's stream as `rein watch` shows it: text as the model writes it, every other line on a line of its
    own (streamed text that did not end its line is ended first, so `✓ model` never runs into it)."""

    def __init__(self, out: Console, err: Console):
        self.out, self.err = out, err
        self.open = False
        """The last text printed left its line open."""

    def __call__(self, chunk: Any) -> None:
        kind = getattr(chunk, "type", None)
        if kind == "text":
            if chunk.text:
                self.out.print(escape(chunk.text), end="")
                self.open = not chunk.text.endswith("\n")
            return
        if _shows(chunk):
            self.end_line()
        render_chunk(self.out, self.err, chunk)

    def end_line(self) -> None:
        if self.open:
            self.out.print()
            self.open = False


def _shows(chunk: Any) -> bool:
    """Whether `render_chunk` prints a line for this (non-text) chunk."""
    kind = getattr(chunk, "type", None)
    if kind == "event":
        return chunk.name in ("turn", "turn_end", "cut") and chunk.data is not None
    return kind == "tool_calls" and bool(chunk.tool_calls) or kind in ("step", "interrupt") and bool(chunk.data)


def render_chunk(out: Console, err: Console, chunk: Any) -> None:
    kind = getattr(chunk, "type", None)
    if kind == "text":
        out.print(escape(chunk.text), end="")
    elif kind == "tool_calls":
        for call in chunk.tool_calls or []:
            err.print(f"\n[cyan]→ {escape(call_line(call))}[/]")
    elif kind == "step" and chunk.data:
        from rein.core.result import Step

        print_step(err, Step.model_validate(chunk.data))
    elif kind == "event" and chunk.name in ("turn", "turn_end", "cut") and chunk.data is not None:
        turn = chunk.data.get("turn")
        said = {"turn": f"turn {turn}", "turn_end": f"turn {turn} ended ({chunk.finish_reason})",
                "cut": "the model call was cut: a new message interrupted it"}[chunk.name]
        err.print(f"\n[dim]── {escape(said)} ──[/]")
    elif kind == "interrupt" and chunk.data:
        err.print(f"\n[yellow]paused ({escape(str(chunk.data.get('type')))}): {escape(chunk.data.get('message') or '')}[/]")


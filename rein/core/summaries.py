"""How a run reads in the Temporal UI: activity summaries and the current-details text."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rein.core.contract import RunStatusView
from rein.core.ir import ToolCall
from rein.core.result import Interrupt


def model_summary(model: str, iteration: int) -> str:
    return f"model {model} · iteration {iteration}"


def first_call_summary(agent: str, model: str = "") -> str:
    """A lean start's first model call, scheduled before the run knows its agent's model (unless the input names one)."""
    return model_summary(model or f"of agent {agent}", 1)


def tool_summary(call: ToolCall, limit: int = 120) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())
    text = f"tool {call.name}({args})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_summary(agent: str, prompt: str | None, limit: int = 80) -> str:
    """The one line a run list shows: which agent, asked what."""
    if not prompt:
        return f"rein agent {agent}"
    prompt = " ".join(prompt.split())
    return f"{agent}: {prompt if len(prompt) <= limit else prompt[: limit - 1] + '…'}"


def waiting_summary(interrupt: Interrupt, pending: list[ToolCall], run_id: str, since: datetime,
                    limit: int = 400) -> str:
    """One line for the timer a waiting run shows first in the UI's timeline: waiting for what,
    since when, and the commands that answer it."""
    when = since.strftime("%Y-%m-%d %H:%M UTC")
    if interrupt.type == "need_approval":
        calls = ", ".join(tool_summary(c, 80)[5:] for c in pending) or "tool calls"
        text = f"Waiting for approval since {when}: {calls} · rein approve {run_id} · rein deny {run_id}"
    elif interrupt.type == "need_input":
        text = f"Waiting for input since {when}: {interrupt.message} · rein answer {run_id} \"...\""
    else:
        text = f"Waiting after an error since {when}: {interrupt.message} · rein retry {run_id} · rein cancel {run_id}"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fork_details(lineage: dict[str, Any]) -> str:
    """A fork's lineage as Markdown: the original, the step, who asked, and each edit."""
    lines = [f"**Fork** of `{lineage.get('of')}` (run `{lineage.get('run')}`) at step {lineage.get('at_step')}, "
             f"by {lineage.get('by') or 'unknown'}"]
    lines += [f"- {edit}" for edit in lineage.get("edits") or []] or ["- no edits"]
    return "\n".join(lines)


def _sh(command: str) -> str:
    return f"```sh\n{command}\n```"


def details_for(
    view: RunStatusView,
    *,
    workflow_id: str,
    namespace: str,
    prompt: str = "",
    output: str | None = None,
    last_ignored: str = "",
    fork: dict[str, Any] | None = None,
    model: str = "",
) -> str:
    """Markdown for the UI's 'current details': what the run is doing or waits for, and how to answer.
    `fork`: a fork's lineage (rein.durable.fork); `model`: the run's model when its client switched it."""
    iterations = f"{view.iteration} iteration{'s' if view.iteration != 1 else ''}"
    lines = [f"**{view.status}** · {iterations} · {view.usage.total_tokens} tokens"]
    if view.turn:  # a thread: its turn first, and how to send it the next message
        lines[0] = f"**{view.status}** · thread, turn {view.turn} · {iterations} · {view.usage.total_tokens} tokens"
    if fork:
        lines.append(fork_details(fork))
    if model:
        lines.append(f"Model: `{model}` (switched for this run)")
    if prompt:
        lines.append(f"> {run_summary('', prompt, 200)[2:]}")
    if view.status in ("done", "cancelled", "idle"):
        lines.append(f"Stop reason: `{view.stop_reason}`" if view.status != "idle" else f"Turn {view.turn} ended: `{view.stop_reason}`")
        if output:
            lines.append(f"Output: {output[:200]}{'…' if len(output) > 200 else ''}")
    if view.stuck:
        lines.append(f"Stuck on a bug in rein ({view.stuck}): retried until a fixed build's workers take it")
    if last_ignored:
        lines.append(f"Last ignored signal: {last_ignored}")
    if view.turn:
        lines.append("Send the next message:\n\n" + _sh(
            f"temporal workflow update execute --namespace {namespace} --workflow-id {workflow_id} "
            f"--name rein.send --input '{{\"text\": \"...\"}}'"))
    signal = f"temporal workflow signal --namespace {namespace} --workflow-id {workflow_id}"
    itr = view.interrupt
    if itr is not None and itr.type == "need_approval":
        lines.append("Waiting for approval:\n\n" + "\n".join(
            f"- `{tool_summary(c)}` (id `{c.id}`)" for c in view.pending_tool_calls
        ))
        lines.append("Approve all:\n\n" + _sh(f"{signal} --name approve --input '{{\"approver\": \"you\"}}'"))
        lines.append("Deny all:\n\n" + _sh(f"{signal} --name deny --input '{{\"approver\": \"you\", \"reason\": \"...\"}}'"))
        if len(view.pending_tool_calls) > 1:
            lines.append("One call at a time:\n\n" + _sh("\n".join(
                f"{signal} --name approve --input '{{\"tool_call_id\": \"{c.id}\", \"approver\": \"you\"}}'"
                for c in view.pending_tool_calls
            )))
    elif itr is not None and itr.type == "need_input":
        lines.append(f"Waiting for input: {itr.message}")
        lines.append("Answer:\n\n" + _sh(f"{signal} --name answer --input '{{\"text\": \"...\", \"approver\": \"you\"}}'"))
    elif itr is not None:
        lines.append(f"Waiting after an error: {itr.message}")
        lines.append("Retry:\n\n" + _sh(f"{signal} --name retry"))
        lines.append("Give up:\n\n" + _sh(f"{signal} --name cancel --input '{{\"reason\": \"...\"}}'"))
    return "\n\n".join(lines)

"""How a run reads in the Temporal UI: activity summaries and the current-details text."""

from __future__ import annotations

import json

from rein.contract import RunStatusView
from rein.ir import ToolCall


def model_summary(model: str, iteration: int) -> str:
    return f"model {model} · iteration {iteration}"


def tool_summary(call: ToolCall, limit: int = 120) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())
    text = f"tool {call.name}({args})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def details_for(view: RunStatusView, workflow_id: str) -> str:
    """Markdown for the UI's 'current details': what the run waits for and how to answer."""
    head = f"**{view.status}** · iteration {view.iteration} · {view.usage.total_tokens} tokens"
    itr = view.interrupt
    if itr is None:
        return head
    signal = f"temporal workflow signal --workflow-id {workflow_id}"
    if itr.type == "need_approval":
        calls = "\n".join(f"- `{tool_summary(c)}` (id `{c.id}`)" for c in view.pending_tool_calls)
        how = (
            f"Approve all: `{signal} --name approve --input '{{\"approver\": \"you\"}}'`\n\n"
            f"Deny all: `{signal} --name deny --input '{{\"approver\": \"you\", \"reason\": \"...\"}}'`\n\n"
            "One call: add `\"tool_call_id\": \"<id>\"` to the input."
        )
        return f"{head}\n\nWaiting for approval:\n{calls}\n\n{how}"
    if itr.type == "need_input":
        return (
            f"{head}\n\nWaiting for input: {itr.message}\n\n"
            f"Answer: `{signal} --name answer --input '{{\"text\": \"...\", \"approver\": \"you\"}}'`"
        )
    return (
        f"{head}\n\nWaiting after an error: {itr.message}\n\n"
        f"Retry: `{signal} --name retry`  ·  Give up: `{signal} --name cancel --input '{{\"reason\": \"...\"}}'`"
    )

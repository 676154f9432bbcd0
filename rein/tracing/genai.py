"""Span names and attributes after OpenTelemetry's GenAI semantic conventions (plus the
OpenInference names Arize Phoenix reads), shared by live spans and `rein trace` backfill."""

from __future__ import annotations

import json
import os
from typing import Any

from rein.blueprint.secrets import scrub
from rein.core.ir import Completion, ToolCall, ToolResult

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Set to `true` to record tool arguments and results on spans (scrubbed like history)."""


def capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


def provider_of(model: str) -> str:
    """`openai` for `openai/gpt-4o`; LiteLLM's own guess for a bare model name."""
    if "/" in model:
        return model.split("/", 1)[0]
    try:
        from rein.core.prices import load_litellm  # quiet and offline: its shipped price map, no "Provider List" banner

        return load_litellm().get_llm_provider(model)[1]
    except Exception:
        return "unknown"


def cost_usd(model: str, completion: Completion) -> float | None:
    """The call's cost: the provider's figure, else LiteLLM's cost table (None when unknown)."""
    if completion.usage.cost_usd is not None:
        return completion.usage.cost_usd
    try:
        from rein.core.prices import load_litellm

        prompt, answer = load_litellm().cost_per_token(
            model=completion.model or model,
            prompt_tokens=completion.usage.input_tokens,
            completion_tokens=completion.usage.output_tokens,
        )
        return float(prompt + answer)
    except Exception:
        return None


def chat_name(model: str) -> str:
    return f"chat {model}"


def chat_request(model: str, agent: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_of(model),
        "gen_ai.system": provider_of(model),
        "gen_ai.request.model": model,
        "gen_ai.agent.name": agent,
        "openinference.span.kind": "LLM",
        "llm.model_name": model,
    }


def chat_response(model: str, completion: Completion) -> dict[str, Any]:
    usage = completion.usage
    attributes: dict[str, Any] = {
        "gen_ai.response.model": completion.model or model,
        "gen_ai.response.finish_reasons": [completion.finish_reason],
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "llm.token_count.prompt": usage.input_tokens,
        "llm.token_count.completion": usage.output_tokens,
        "llm.token_count.total": usage.total_tokens,
    }
    cost = cost_usd(model, completion)
    if cost is not None:
        attributes["gen_ai.usage.cost"] = cost
        attributes["llm.cost.total"] = cost
    return attributes


def tool_name(name: str) -> str:
    return f"execute_tool {name}"


def tool_request(call: ToolCall) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
        "openinference.span.kind": "TOOL",
        "tool.name": call.name,
    }
    if capture_content():
        arguments = scrub(json.dumps(call.arguments, default=str))
        attributes["gen_ai.tool.call.arguments"] = arguments
        attributes["input.value"] = arguments
    return attributes


def tool_response(result: ToolResult) -> dict[str, Any]:
    attributes: dict[str, Any] = {"rein.tool.is_error": result.is_error}
    if capture_content():
        attributes["gen_ai.tool.call.result"] = scrub(result.content)
        attributes["output.value"] = scrub(result.content)
    return attributes


def run_name(agent: str) -> str:
    return f"invoke_agent {agent}"


def run_request(agent: str, workflow_id: str, run_id: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.conversation.id": workflow_id,
        "openinference.span.kind": "AGENT",
        "rein.workflow_id": workflow_id,
        "rein.run_id": run_id,
    }


def run_outcome(outcome: Any) -> dict[str, Any]:
    """The run's end as attributes (a RunOutcome or its JSON)."""
    get = outcome.get if isinstance(outcome, dict) else lambda key: getattr(outcome, key, None)
    attributes: dict[str, Any] = {}
    for key in ("status", "stop_reason"):
        if isinstance(get(key), str):
            attributes[f"rein.{key}"] = get(key)
    usage = get("usage")
    usage_get = usage.get if isinstance(usage, dict) else lambda key: getattr(usage, key, None)
    if usage is not None:
        for key, name in (("input_tokens", "gen_ai.usage.input_tokens"), ("output_tokens", "gen_ai.usage.output_tokens")):
            if isinstance(usage_get(key), int):
                attributes[name] = usage_get(key)
        cost = usage_get("cost_usd")
        if isinstance(cost, (int, float)):
            attributes["gen_ai.usage.cost"] = float(cost)
    return attributes


DECISIONS = {
    "approve": ("approval", "approved"),
    "rein.approve": ("approval", "approved"),
    "deny": ("approval", "denied"),
    "rein.deny": ("approval", "denied"),
    "answer": ("human_input", "answered"),
    "rein.answer": ("human_input", "answered"),
    "retry": ("retry", "retried"),
    "rein.retry": ("retry", "retried"),
    "cancel": ("cancel", "cancelled"),
    "rein.cancel": ("cancel", "cancelled"),
}
"""Signals and updates that are a person's decision: span name and `rein.decision`."""


def decision(name: str, payload: Any, decided_at: str) -> tuple[str, dict[str, Any]] | None:
    """The span for a decision signal or update (None for any other name)."""
    if name not in DECISIONS:
        return None
    span_name, verdict = DECISIONS[name]
    payload = payload if isinstance(payload, dict) else {}
    attributes: dict[str, Any] = {"rein.decision": verdict, "rein.decided_at": decided_at, "rein.signal": name}
    for key in ("approver", "reason", "tool_call_id"):
        if isinstance(payload.get(key), str):
            attributes[f"rein.{key}"] = scrub(payload[key])
    return span_name, attributes

"""`export_run`: a RunResult you hold, as OpenTelemetry spans after the fact (rein-agent 0.2.0's `rein.otel`).

Durable runs are traced live, once (docs/tracing.md); `rein trace` backfills one from its history. This is for a
result nothing traced: an in-process run's (`engine="local"`), or any result, to a tracer of your choice. One
`rein.run` span, with a `rein.step.{kind}` span inside it per Step, in order.
"""

from __future__ import annotations

from typing import Any

from rein.core.result import RunResult
from rein.tracing.setup import INSTRUMENTATION


def export_run(result: RunResult, tracer: Any = None) -> None:
    """Emit `result` as spans through `tracer` (default: the global provider's tracer named `rein`)."""
    try:
        from opentelemetry import trace
    except ImportError as e:
        raise ImportError("export_run needs OpenTelemetry: pip install 'rein[otel]'") from e
    tracer = tracer or trace.get_tracer(INSTRUMENTATION)
    usage = result.usage
    with tracer.start_as_current_span("rein.run") as run:
        run.set_attributes(_present({
            "rein.status": result.status, "rein.stop_reason": result.stop_reason, "rein.run_id": result.run_id,
            "rein.usage.input_tokens": usage.input_tokens, "rein.usage.output_tokens": usage.output_tokens,
            "rein.usage.cost_usd": usage.cost_usd, "rein.elapsed_s": result.elapsed_s, "rein.steps": len(result.steps),
        }))
        for step in result.steps:
            with tracer.start_as_current_span(f"rein.step.{step.kind}") as span:
                span.set_attributes(_present({
                    "rein.step.index": step.index, "rein.step.kind": step.kind, "rein.step.summary": step.summary,
                    "rein.step.duration_s": step.duration_s, "rein.step.is_error": step.is_error,
                    "rein.step.input_tokens": step.usage.input_tokens if step.usage else None,
                    "rein.step.output_tokens": step.usage.output_tokens if step.usage else None,
                }))


def _present(attributes: dict[str, Any]) -> dict[str, Any]:
    """OpenTelemetry takes no None values: an attribute the result lacks is left off."""
    return {name: value for name, value in attributes.items() if value is not None}

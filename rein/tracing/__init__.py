"""OpenTelemetry traces of agent runs: one trace per run, exactly once (`pip install 'rein[otel]'`).

Tracing is on when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; the other `OTEL_*` variables (service name,
headers, sampler, batch delays) apply as the OpenTelemetry SDK reads them. Nothing is
configured in code: ReinPlugin adds what is needed to clients and workers.

Where spans come from, and why each is emitted once:
- the run span `invoke_agent {agent}` and the decision spans (approval, human input) come from
  the workflow through temporalio's replay-safe tracer provider: ids from the workflow's
  deterministic randomness, nothing ended while history replays;
- `chat {model}` and `execute_tool {name}` spans come from the activities, which run once per
  attempt; temporalio's OpenTelemetry interceptor carries the run span's context to them, to
  child agents (nested under the calling tool's span) and across continue-as-new.
"""

from rein.tracing.setup import enabled, flush, tracer

__all__ = ["enabled", "flush", "tracer"]

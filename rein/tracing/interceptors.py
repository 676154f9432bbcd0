"""The interceptors that trace a Client or a Worker: temporalio's OpenTelemetry interceptor (trace
context through headers) and, on a worker, rein's run spans inside it."""

from __future__ import annotations

from typing import Any

from rein.tracing.setup import _global_is_replay_safe, log, provider


def with_tracing(interceptors: Any, *, worker: bool, present: Any = ()) -> list[Any]:
    """`interceptors` plus temporalio's OpenTelemetry interceptor (it carries the trace context
    through headers) and, on a worker, rein's run spans inside it; each added once."""
    from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor

    from rein.tracing.workflow_spans import ReinTracingInterceptor

    provider()  # the replay-safe provider is in place before the first span
    if worker and not _global_is_replay_safe():
        log.warning("tracing is off on this worker: the application set a global tracer provider that "
                    "is not replay-safe; make it with temporalio.contrib.opentelemetry.create_tracer_provider")
        return list(interceptors)
    have = [*present, *interceptors]
    wanted_types = [OpenTelemetryInterceptor, ReinTracingInterceptor] if worker else [OpenTelemetryInterceptor]
    added = [kind() for kind in wanted_types if not any(isinstance(i, kind) for i in have)]
    return [*interceptors, *added]

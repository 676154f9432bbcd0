"""Turning tracing on from the standard OTEL_* environment variables, once per process."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from typing import Any

log = logging.getLogger("rein.tracing")

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
INSTRUMENTATION = "rein"


def wanted() -> bool:
    """Whether the environment asks for traces (an OTLP endpoint, the SDK not disabled)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(os.environ.get(name) for name in ENDPOINT_VARIABLES)


@functools.cache
def _installed() -> bool:
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
        import temporalio.contrib.opentelemetry  # noqa: F401
    except ImportError:
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but rein's tracing needs `pip install 'rein[otel]'`")
        return False
    return True


def enabled() -> bool:
    """Tracing is wanted and the `otel` extra is installed."""
    return wanted() and _installed()


@functools.cache
def provider() -> Any:
    """This process's replay-safe tracer provider exporting over OTLP/HTTP; also the global one
    unless the application already set its own (then workers do not trace: see with_tracing)."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from temporalio.contrib.opentelemetry import create_tracer_provider

    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "rein"})
    made = create_tracer_provider(resource=resource)
    made.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider":
        trace.set_tracer_provider(made)
    return made


def tracer() -> Any:
    """rein's tracer (replay-safe inside workflows)."""
    return provider().get_tracer(INSTRUMENTATION)


async def flush() -> None:
    """Export what ended so far before an activity reports back: a worker killed after that loses
    no span of a finished step (and nothing a workflow task ended before it)."""
    if enabled():
        await asyncio.to_thread(provider().force_flush)




def _global_is_replay_safe() -> bool:
    """temporalio's OpenTelemetry interceptor refuses a worker whose global provider is not replay-safe."""
    from opentelemetry import trace
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider

    return isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider)


def shutdown() -> None:
    """Export what is still queued and stop the exporter: for processes that leave with os._exit
    (the `rein` CLI), where the SDK's atexit hook never runs."""
    if provider.cache_info().currsize:
        provider().shutdown()

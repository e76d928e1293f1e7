"""Observability for every service: structlog JSON logs and OpenTelemetry traces.

Owns the process-wide logging and tracing configuration and the trace context in NATS headers
(``inject``/``extract`` of W3C ``traceparent``). Invariants: log lines are one JSON object each,
with ``service``, ``level``, ``timestamp``, ``event`` and, inside a span, ``trace_id``; spans are
exported only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; trace context travels in headers,
never in payloads. ``setup(service)`` is what a service's ``__main__`` calls.
"""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from .logs import add_trace_context, setup_logging
from .tracing import TRACEPARENT, build_tracer_provider, current_trace_id, extract, inject, setup_tracing

__all__ = [
    "TRACEPARENT",
    "add_trace_context",
    "build_tracer_provider",
    "current_trace_id",
    "extract",
    "inject",
    "setup",
    "setup_logging",
    "setup_tracing",
]


def setup(service: str, level: str | int = "INFO", *, sample_ratio: float | None = None) -> TracerProvider:
    """``setup_logging`` + ``setup_tracing`` for ``service``; returns the provider to ``shutdown()`` at exit."""
    setup_logging(service, level)
    return setup_tracing(service, sample_ratio=sample_ratio)

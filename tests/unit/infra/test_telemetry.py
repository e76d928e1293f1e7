"""Log lines are single JSON objects with service, level and the current trace id; trace context
round-trips through headers; exporters exist only when an endpoint is configured."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import msgspec
import pytest
import structlog
from opentelemetry import context, trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hyperjob.telemetry import build_tracer_provider, current_trace_id, extract, inject, setup_logging

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    handlers, level = list(logging.getLogger().handlers), logging.getLogger().level
    yield
    structlog.reset_defaults()
    logging.getLogger().handlers[:] = handlers
    logging.getLogger().setLevel(level)


def _lines(buf: io.BytesIO) -> list[dict]:
    return [msgspec.json.decode(line) for line in buf.getvalue().splitlines()]


def test_log_lines_are_json_with_service_level_and_context() -> None:
    buf = io.BytesIO()
    setup_logging("splitter", "INFO", file=buf)
    log = structlog.get_logger("x")
    with structlog.contextvars.bound_contextvars(event_id="e1"):
        log.info("hyperjob_accepted", replicas=3, raw=b"\x00", thing=object())
    log.debug("hidden")
    (line,) = _lines(buf)
    assert line["event"] == "hyperjob_accepted" and line["service"] == "splitter" and line["level"] == "info"
    assert line["event_id"] == "e1" and line["replicas"] == 3 and "timestamp" in line
    assert "trace_id" not in line and line["thing"].startswith("<object")


def test_log_lines_inside_a_span_carry_its_trace_id() -> None:
    buf = io.BytesIO()
    setup_logging("splitter", "DEBUG", file=buf)
    token = context.attach(extract({"traceparent": TRACEPARENT}))
    try:
        structlog.get_logger().debug("in_span")
        assert current_trace_id() == "0af7651916cd43dd8448eb211c80319c"
    finally:
        context.detach(token)
    assert _lines(buf)[0]["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert current_trace_id() is None


def test_exception_is_rendered_into_the_line() -> None:
    buf = io.BytesIO()
    setup_logging("s", "INFO", file=buf)
    try:
        raise ValueError("boom")
    except ValueError:
        structlog.get_logger().exception("failed")
    assert "ValueError: boom" in _lines(buf)[0]["exception"]


def test_inject_extract_round_trip() -> None:
    assert inject({}) == {}
    token = context.attach(extract({"traceparent": TRACEPARENT}))
    try:
        headers = inject({"Nats-Msg-Id": "m"})
    finally:
        context.detach(token)
    assert headers["traceparent"] == TRACEPARENT and headers["Nats-Msg-Id"] == "m"
    assert not trace.get_current_span(extract({"traceparent": "garbage"})).get_span_context().is_valid
    assert not trace.get_current_span(extract(None)).get_span_context().is_valid


def test_provider_exports_only_with_an_endpoint() -> None:
    quiet = build_tracer_provider("svc")
    assert quiet._active_span_processor._span_processors == ()  # noqa: SLF001 - no exporter configured
    loud = build_tracer_provider("svc", endpoint="http://127.0.0.1:4318")
    assert len(loud._active_span_processor._span_processors) == 1  # noqa: SLF001
    loud.shutdown()
    quiet.shutdown()


def test_consumer_span_is_a_child_of_the_remote_parent() -> None:
    exporter = InMemorySpanExporter()
    provider = build_tracer_provider("svc")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("consume x", context=extract({"traceparent": TRACEPARENT})):
        pass
    (span,) = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert span.parent is not None and span.parent.span_id == 0xB7AD6B7169203331
    assert span.resource.attributes["service.name"] == "svc"
    provider.shutdown()


def test_stdlib_records_become_json_lines_too() -> None:
    buf = io.BytesIO()
    setup_logging("node-agent", "INFO", file=buf)
    logging.getLogger("nats.aio.client").warning("reconnecting to %s", "nats://x")
    logging.getLogger("quiet").debug("dropped")
    (line,) = _lines(buf)
    assert line["event"] == "reconnecting to nats://x" and line["level"] == "warning"
    assert line["logger"] == "nats.aio.client" and line["service"] == "node-agent"

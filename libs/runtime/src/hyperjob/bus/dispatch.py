"""What happens to one delivery: run the handler in its span, turn the outcome into a verdict.

Shared by ``NatsBus`` and ``InMemoryBus`` so both buses settle messages identically:

=====================================  ==========================================================
handler outcome                         verdict
=====================================  ==========================================================
returns                                 ack
``RetryableError`` / other exception    nak with ``policy.delay(num_delivered)`` (or the error's
                                        ``delay``); on the ``max_deliver``-th delivery: dead-letter
``DependencyDown`` (Redis/NATS down)    hold: the bus keeps the message (``in_progress``) and calls
                                        the handler again after ``hold_delay``, so the outage does
                                        not count toward ``max_deliver``
``TerminalError``                       dead-letter at once
delivered more than ``max_deliver``     dead-letter without calling the handler (the server
times (handler hung past ack_wait)      allows one extra delivery for exactly this)
=====================================  ==========================================================

Dead-letter = publish the original payload and headers to ``dlq.<durable>`` (with the
``Hyperjob-*`` error headers below and a deterministic ``Nats-Msg-Id``), then ``term()``. A
message too large to copy with those headers (it would exceed the server's ``max_payload``) is
dead-lettered **by reference**: no payload, ``Hyperjob-Dlq-By-Reference: 1``, and the original's
stream and sequence, from which ``hyperjob dlq replay`` reads it back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import msgspec
import structlog
from opentelemetry import trace

from hyperjob.telemetry import extract

from .errors import RetryableError, TerminalError, is_dependency_down
from .model import MSG_ID, BatchHandler, ConsumerPolicy, Delivery, Handler, Outgoing

__all__ = [
    "DEAD_LETTER_HEADERS",
    "MAX_PAYLOAD",
    "Run",
    "H_BY_REFERENCE",
    "H_DLQ_REASON",
    "H_ERROR",
    "H_ERROR_TYPE",
    "H_NUM_DELIVERED",
    "H_ORIGINAL_MSG_ID",
    "H_ORIGINAL_SEQ",
    "H_ORIGINAL_STREAM",
    "H_ORIGINAL_SUBJECT",
    "H_WATCH",
    "Verdict",
    "dead_letter",
    "hold_delay",
    "wire_size",
    "run_batch_handler",
    "run_handler",
    "runs_batches",
    "runs_each",
    "verdict_for",
]

H_DLQ_REASON = "Hyperjob-Dlq-Reason"
H_ERROR = "Hyperjob-Error"
H_ERROR_TYPE = "Hyperjob-Error-Type"
H_ORIGINAL_SUBJECT = "Hyperjob-Original-Subject"
H_ORIGINAL_STREAM = "Hyperjob-Original-Stream"
H_ORIGINAL_SEQ = "Hyperjob-Original-Seq"
H_NUM_DELIVERED = "Hyperjob-Num-Delivered"
H_ORIGINAL_MSG_ID = "Hyperjob-Original-Msg-Id"
H_BY_REFERENCE = "Hyperjob-Dlq-By-Reference"
H_WATCH = "Hyperjob-Watch"  # set when the letter comes from a watch (a latest value), not a consumer
# Every header dead-lettering adds: what a replay strips to give back the original message.
DEAD_LETTER_HEADERS = frozenset(
    {
        H_DLQ_REASON,
        H_ERROR,
        H_ERROR_TYPE,
        H_ORIGINAL_SUBJECT,
        H_ORIGINAL_STREAM,
        H_ORIGINAL_SEQ,
        H_NUM_DELIVERED,
        H_ORIGINAL_MSG_ID,
        H_BY_REFERENCE,
        H_WATCH,
    }
)
# NATS's default max_payload (the server's setting is read at connect): payload + headers.
MAX_PAYLOAD = 1024 * 1024
HOLD_DELAYS: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0)

_log = structlog.get_logger("bus")
_tracer = trace.get_tracer("hyperjob.bus")


class Verdict(msgspec.Struct, frozen=True):
    """``ack``; ``nak`` after ``delay`` seconds; ``hold`` (a dependency is down: keep the message
    and call the handler again after ``delay``, not counting a delivery); or ``dlq`` for
    ``reason`` (terminal/max_deliver)."""

    action: Literal["ack", "nak", "hold", "dlq"]
    delay: float = 0.0
    reason: str = ""
    error_type: str = ""
    error: str = ""


ACK = Verdict("ack")


def _exhausted(delivery: Delivery, policy: ConsumerPolicy) -> Verdict | None:
    if delivery.num_delivered > policy.max_deliver:
        return Verdict(
            "dlq",
            reason="max_deliver",
            error_type="MaxDeliverExceeded",
            error=f"not settled after {policy.max_deliver} deliveries",
        )
    return None


async def run_handler(handler: Handler, delivery: Delivery, durable: str, policy: ConsumerPolicy) -> Verdict:
    """Call ``handler`` once inside one CONSUMER span (child of the producer's ``traceparent``) and
    return the verdict. Never raises except ``CancelledError``."""
    exhausted = _exhausted(delivery, policy)
    if exhausted is not None:
        return exhausted
    attributes = {
        "messaging.system": "nats",
        "messaging.destination.name": delivery.subject,
        "messaging.consumer.group.name": durable,
        "messaging.message.id": delivery.msg_id or "",
    }
    with _tracer.start_as_current_span(
        f"consume {delivery.subject}",
        context=extract(delivery.headers),
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            await handler(delivery)
            return ACK
        except Exception as exc:  # noqa: BLE001 - classified: terminal, retryable, or a bug (retried)
            span.set_status(trace.StatusCode.ERROR, str(exc))
            return verdict_for(exc, delivery, durable, policy)


async def run_batch_handler(
    handler: BatchHandler, deliveries: Sequence[Delivery], durable: str, policy: ConsumerPolicy
) -> list[Verdict]:
    """Call ``handler`` once with every delivery not yet past ``max_deliver``, inside ONE span for
    the batch (linked to each message's producer context, at most 128 links), and return one
    verdict per delivery: ``None`` from the handler acks all; a mapping ``index -> exception``
    settles those by their exception and acks the rest; an exception settles all by it."""
    verdicts: list[Verdict | None] = [_exhausted(d, policy) for d in deliveries]
    live = [i for i, v in enumerate(verdicts) if v is None]
    if live:
        links = [
            trace.Link(ctx)
            for i in live[:128]
            if (ctx := trace.get_current_span(extract(deliveries[i].headers)).get_span_context()).is_valid
        ]
        with _tracer.start_as_current_span(
            f"consume batch {durable}",
            kind=trace.SpanKind.CONSUMER,
            links=links,
            attributes={"messaging.batch.message_count": len(live), "messaging.consumer.group.name": durable},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                failures = await handler([deliveries[i] for i in live]) or {}
            except Exception as exc:  # noqa: BLE001 - the whole batch shares the outcome
                span.set_status(trace.StatusCode.ERROR, str(exc))
                failures = dict.fromkeys(range(len(live)), exc)
            for pos, i in enumerate(live):
                error = failures.get(pos)
                verdicts[i] = ACK if error is None else verdict_for(error, deliveries[i], durable, policy)
    return [v if v is not None else ACK for v in verdicts]


# What a consumer does with the deliveries it took: one verdict each. The buses take either kind
# of handler (``consume``'s one at a time, ``consume_batch``'s whole batches) through this one shape.
Run = Callable[[Sequence[Delivery], str, ConsumerPolicy], Awaitable[list[Verdict]]]


def runs_each(handler: Handler) -> Run:
    """``handler`` called once per delivery, each in its own span (``consume``)."""

    async def run(deliveries: Sequence[Delivery], durable: str, policy: ConsumerPolicy) -> list[Verdict]:
        return [await run_handler(handler, delivery, durable, policy) for delivery in deliveries]

    return run


def runs_batches(handler: BatchHandler) -> Run:
    """``handler`` called once with all the deliveries, in one span (``consume_batch``)."""

    async def run(deliveries: Sequence[Delivery], durable: str, policy: ConsumerPolicy) -> list[Verdict]:
        return await run_batch_handler(handler, deliveries, durable, policy)

    return run


def verdict_for(exc: BaseException, delivery: Delivery, durable: str, policy: ConsumerPolicy) -> Verdict:
    """The verdict for a handler that raised ``exc`` on ``delivery`` (see the module table)."""
    if isinstance(exc, TerminalError):
        _log.warning(
            "message_terminal", durable=durable, subject=delivery.subject, msg_id=delivery.msg_id, error=str(exc)
        )
        reason = getattr(exc, "reason", "") or "terminal"  # e.g. servicekit's undecodable / unknown-type
        return Verdict("dlq", reason=reason, error_type=type(exc).__name__, error=str(exc))
    return _retry_verdict(exc, delivery, durable, policy)


def hold_delay(holds: int) -> float:
    """Seconds before trying again a message held ``holds`` times already (a dependency down)."""
    return HOLD_DELAYS[min(holds, len(HOLD_DELAYS) - 1)]


def _retry_verdict(exc: BaseException, delivery: Delivery, durable: str, policy: ConsumerPolicy) -> Verdict:
    if is_dependency_down(exc):
        _log.info(
            "message_held",
            durable=durable,
            subject=delivery.subject,
            msg_id=delivery.msg_id,
            error=str(exc),
            error_type=type(exc).__name__,
        )
        return Verdict("hold", error_type=type(exc).__name__, error=str(exc))
    # Expected transient failures (ours, or any exception marked ``transient = True`` such as
    # ``store.StoreUnavailableError``) are logged without a traceback; anything else is a bug.
    known = isinstance(exc, RetryableError) or getattr(exc, "transient", False) is True
    fields = {
        "durable": durable,
        "subject": delivery.subject,
        "msg_id": delivery.msg_id,
        "num_delivered": delivery.num_delivered,
        "error": str(exc),
        "error_type": type(exc).__name__,
    }
    if known:
        _log.debug("message_retry", **fields)  # resolves itself, or ends in the DLQ (logged there)
    else:
        _log.error("handler_failed", exc_info=exc, **fields)
    if delivery.num_delivered >= policy.max_deliver:
        return Verdict("dlq", reason="max_deliver", error_type=type(exc).__name__, error=str(exc))
    own = exc.delay if isinstance(exc, RetryableError) else None
    return Verdict("nak", delay=own if own is not None else policy.delay(delivery.num_delivered))


def _header_value(text: str, limit: int = 1024) -> str:
    # NATS headers are single lines.
    return " ".join(text.split())[:limit]


def wire_size(subject: str, payload: bytes, headers: dict[str, str] | None) -> int:
    """Bytes a message counts against ``max_payload``: payload plus the NATS header block."""
    if not headers:
        return len(payload)
    block = len("NATS/1.0\r\n\r\n") + sum(len(k) + len(v) + 4 for k, v in headers.items())
    return len(payload) + block


def dead_letter(
    durable: str, delivery: Delivery, verdict: Verdict, *, max_payload: int = MAX_PAYLOAD, watch: str = ""
) -> Outgoing:
    """The message to publish on ``dlq.<durable>``: the original payload and headers plus the error,
    or only a reference to the original (its stream and sequence) when the copy would not fit in
    ``max_payload``. Its ``Nats-Msg-Id`` is derived from the original stream position, so a retried
    dead-lettering is dropped as a duplicate. ``watch`` names the subject filter of a watch the
    value was read by (a latest value has no consumer to term)."""
    ours = {
        H_DLQ_REASON: verdict.reason,
        H_ERROR_TYPE: verdict.error_type,
        H_ERROR: _header_value(verdict.error),
        H_ORIGINAL_SUBJECT: delivery.subject,
        H_ORIGINAL_STREAM: delivery.stream,
        H_ORIGINAL_SEQ: str(delivery.seq),
        H_NUM_DELIVERED: str(delivery.num_delivered),
    }
    if delivery.msg_id:
        ours[H_ORIGINAL_MSG_ID] = _header_value(delivery.msg_id)
    if watch:
        ours[H_WATCH] = watch
    msg_id = f"dlq.{durable}.{delivery.stream}.{delivery.seq}"
    headers = {k: v for k, v in delivery.headers.items() if k != MSG_ID}
    headers.update(ours)
    payload = delivery.data
    # Some room for the msg id and trace headers the bus adds when publishing.
    if wire_size("", payload, headers) + len(msg_id) + 256 > max_payload:
        headers = {**ours, H_BY_REFERENCE: "1"}
        payload = b""
    return Outgoing(subject=f"dlq.{durable}", msg_id=msg_id, payload=payload, headers=headers)

"""The verdict for each handler outcome, the dead-letter message, and the consume span."""

from __future__ import annotations

import pytest
from opentelemetry import trace

from hyperjob.bus import (
    H_BY_REFERENCE,
    H_DLQ_REASON,
    H_ERROR,
    H_NUM_DELIVERED,
    H_ORIGINAL_SEQ,
    H_ORIGINAL_STREAM,
    H_ORIGINAL_SUBJECT,
    MAX_PAYLOAD,
    MSG_ID,
    ConsumerPolicy,
    Delivery,
    DependencyDown,
    PublishError,
    RetryableError,
    TerminalError,
)
from hyperjob.bus.dispatch import Verdict, dead_letter, run_handler, wire_size

POLICY = ConsumerPolicy(max_deliver=3, backoff=(1.0, 4.0))
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def delivery(n: int = 1, **headers: str) -> Delivery:
    return Delivery(
        subject="sched.child.place",
        data=b"{}",
        headers={MSG_ID: "m1", **headers},
        num_delivered=n,
        msg_id="m1",
        stream="SCHED",
        seq=42,
    )


def raising(exc: BaseException):  # noqa: ANN201
    async def handler(_: Delivery) -> None:
        raise exc

    return handler


async def ok(_: Delivery) -> None:
    return None


@pytest.mark.parametrize(
    ("handler", "n", "expected"),
    [
        (ok, 1, Verdict("ack")),
        (raising(RetryableError("later")), 1, Verdict("nak", delay=1.0)),
        (raising(RetryableError("later")), 2, Verdict("nak", delay=4.0)),
        (raising(RetryableError("soon", delay=0.25)), 1, Verdict("nak", delay=0.25)),
        (raising(ValueError("bug")), 1, Verdict("nak", delay=1.0)),
        (
            raising(PublishError("s", "m", "no ack")),
            2,
            Verdict("hold", error_type="PublishError", error="publish s (m): no ack"),
        ),
        (raising(DependencyDown("redis down")), 3, Verdict("hold", error_type="DependencyDown", error="redis down")),
        (
            raising(RetryableError("later")),
            3,
            Verdict("dlq", reason="max_deliver", error_type="RetryableError", error="later"),
        ),
        (
            raising(TerminalError("bad input")),
            1,
            Verdict("dlq", reason="terminal", error_type="TerminalError", error="bad input"),
        ),
        (
            ok,
            4,
            Verdict(
                "dlq", reason="max_deliver", error_type="MaxDeliverExceeded", error="not settled after 3 deliveries"
            ),
        ),
    ],
    ids=[
        "returns",
        "retryable-1",
        "retryable-2",
        "own-delay",
        "unknown",
        "transient",
        "dependency-down-never-exhausts",
        "exhausted",
        "terminal",
        "past-max-deliver",
    ],
)
async def test_verdicts(handler, n: int, expected: Verdict) -> None:
    assert await run_handler(handler, delivery(n), "svc", POLICY) == expected


async def test_handler_runs_in_a_span_child_of_the_producer() -> None:
    seen = []

    async def handler(_: Delivery) -> None:
        seen.append(trace.get_current_span().get_span_context())

    await run_handler(handler, delivery(traceparent=TRACEPARENT), "svc", POLICY)
    assert format(seen[0].trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"


def test_dead_letter_keeps_payload_and_headers_and_adds_the_error() -> None:
    d = delivery(3, traceparent=TRACEPARENT)
    out = dead_letter(
        "svc", d, Verdict("dlq", reason="terminal", error_type="TerminalError", error="line one\r\nline two")
    )
    assert out.subject == "dlq.svc" and out.payload == b"{}" and out.msg_id == "dlq.svc.SCHED.42"
    assert out.headers["traceparent"] == TRACEPARENT
    assert out.headers[H_ERROR] == "line one line two"
    assert out.headers[H_DLQ_REASON] == "terminal" and out.headers[H_ORIGINAL_SUBJECT] == "sched.child.place"
    assert out.headers[H_ORIGINAL_SEQ] == "42" and out.headers[H_NUM_DELIVERED] == "3"
    assert MSG_ID not in out.headers


def test_a_dead_letter_too_large_to_copy_is_a_reference_to_the_original() -> None:
    big = Delivery(subject="node.fault.c1", data=b"x" * (MAX_PAYLOAD - 100), headers={}, stream="NODE", seq=7)
    out = dead_letter("agent", big, Verdict("dlq", reason="undecodable", error_type="Unreadable", error="not JSON"))
    assert out.payload == b"" and out.headers[H_BY_REFERENCE] == "1"
    assert out.headers[H_ORIGINAL_STREAM] == "NODE" and out.headers[H_ORIGINAL_SEQ] == "7"
    assert wire_size(out.subject, out.payload, out.headers) < 2048
    small = Delivery(subject="node.fault.c1", data=b"x" * 1000, headers={}, stream="NODE", seq=8)
    assert dead_letter("agent", small, Verdict("dlq")).payload == small.data


async def test_batch_verdicts_by_index_and_past_max_deliver_skips_the_handler() -> None:
    from hyperjob.bus.dispatch import run_batch_handler  # noqa: PLC0415

    got: list[int] = []

    async def handler(ds) -> dict[int, BaseException]:  # noqa: ANN001
        got.extend(d.num_delivered for d in ds)
        return {1: TerminalError("bad")}

    batch = [delivery(1), delivery(2), delivery(9), delivery(3)]
    verdicts = await run_batch_handler(handler, batch, "svc", POLICY)
    assert got == [1, 2, 3]
    assert [v.action for v in verdicts] == ["ack", "dlq", "dlq", "ack"]
    assert verdicts[1].reason == "terminal" and verdicts[2].reason == "max_deliver"


async def test_batch_that_raises_settles_every_delivery_by_the_error() -> None:
    from hyperjob.bus.dispatch import run_batch_handler  # noqa: PLC0415

    verdicts = await run_batch_handler(raising(RetryableError("x")), [delivery(1), delivery(3)], "svc", POLICY)
    assert [v.action for v in verdicts] == ["nak", "dlq"]

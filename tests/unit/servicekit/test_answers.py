"""The answer to a request, as every service that takes requests gives it: on the request's own
result subject, its id derived from the request's (a redelivered request is answered once, under
the same id), in the request's trace, and written to the decision log."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import structlog

from hyperjob import events
from hyperjob.bus import InMemoryBus
from hyperjob.events.subjects import STREAMS
from hyperjob.servicekit import AsyncioTimers, Runtime, WallClock, answers
from hyperjob.store import InMemoryStore

REQUEST = events.DeleteObject(event_id="req-1", correlation_id="flow-7", kind="Queue", name="q")


def runtime() -> Runtime:
    clock = WallClock()
    return Runtime(
        "splitter", "splitter", InMemoryBus(STREAMS), InMemoryStore(), clock=clock, timers=AsyncioTimers(clock)
    )


def test_an_acceptance_goes_to_the_requests_result_subject_under_an_id_derived_from_it() -> None:
    rt = runtime()
    [(subject, answer)] = answers.accepted(rt, REQUEST, kind="Queue", name="q", outcome="deleted").outputs
    assert subject == "hj.result.req-1"
    assert isinstance(answer, events.RequestAccepted)
    assert (answer.kind, answer.name, answer.outcome) == ("Queue", "q", "deleted")
    assert answer.event_id == events.derive_id("req-1", "answer") and answer.causation_id == "req-1"
    assert answer.correlation_id == "flow-7" and answer.producer == "splitter"


def test_a_redelivered_request_is_answered_under_the_same_id_whether_accepted_or_refused() -> None:
    rt = runtime()
    first = answers.accepted(rt, REQUEST, kind="Queue", name="q", outcome="deleted").outputs[0][1]
    again = answers.rejected(rt, REQUEST, kind="Queue", name="q", reason="Queue 'q' not found").outputs[0][1]
    assert first.event_id == again.event_id


def test_a_refusal_says_why() -> None:
    [(subject, answer)] = answers.rejected(runtime(), REQUEST, kind="Queue", name="q", reason="$.name: empty").outputs
    assert subject == "hj.result.req-1"
    assert isinstance(answer, events.RequestRejected) and answer.reason == "$.name: empty"


@contextlib.contextmanager
def every_log() -> Iterator[list[dict[str, Any]]]:
    """``capture_logs`` with every level let through: a test that ran before may have configured
    structlog to drop info logs (``telemetry.setup`` at WARNING), which ``capture_logs`` keeps."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET))
    try:
        with structlog.testing.capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(**saved)


def test_each_answer_is_a_decision_in_the_log() -> None:
    rt = runtime()
    with every_log() as logs:
        answers.accepted(rt, REQUEST, kind="Queue", name="q", outcome="deleted")
        answers.rejected(rt, REQUEST, kind="Queue", name="q", reason="in use")
    assert [(log["event"], log["request"], log.get("outcome"), log.get("reason")) for log in logs] == [
        ("request_accepted", "req-1", "deleted", None),
        ("request_rejected", "req-1", None, "in use"),
    ]

"""Pure parts of the bus: subject matching, stream lookup, policy, payload and header helpers."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob.bus import DLQ_STREAM, ConsumerPolicy, Outgoing, as_stream_spec, subject_covers
from hyperjob.bus.model import as_outgoing, encode_payload, find_stream
from hyperjob.events.subjects import STREAMS
from hyperjob.store import Output


@pytest.mark.parametrize(
    ("pattern", "subject", "covered"),
    [
        ("sched.>", "sched.child.dispatch.c1", True),
        ("sched.>", "sched", False),
        ("sched.>", "sched.child.*", True),
        ("sched.>", "sched.>", True),
        ("sched.child.*", "sched.child.place", True),
        ("sched.child.*", "sched.child.dispatch.c1", False),
        ("sched.child.*", "sched.child.>", False),
        ("sched.*.place", "sched.child.place", True),
        ("sched.*.place", "sched.*.place", True),
        ("sched.child.place", "sched.child.*", False),
        ("a.b", "a.b", True),
        ("a.b", "a.c", False),
        ("a.b", "a.b.c", False),
        (">", "anything.at.all", True),
    ],
    ids=lambda v: str(v),
)
def test_subject_covers(pattern: str, subject: str, covered: bool) -> None:
    assert subject_covers(pattern, subject) is covered


def test_find_stream_picks_the_stream_covering_every_filter() -> None:
    specs = [as_stream_spec(s) for s in STREAMS]
    assert find_stream(specs, ["sched.child.dispatch.c1", "sched.pod.bound.*"]).name == "SCHED"
    assert find_stream(specs, ["sched.child.place", "job.phase.c1"]) is None
    assert find_stream(specs, ["dlq.splitter"]).name == "DLQ"


def test_catalogue_declarations_convert_to_stream_specs() -> None:
    by_name = {s.name: as_stream_spec(s) for s in STREAMS}
    assert by_name["HEARTBEAT"].max_msgs_per_subject == 1 and by_name["SCHED"].max_msgs_per_subject == -1
    assert by_name["SCHED"].storage == "file" and by_name["SCHED"].duplicate_window == 120.0
    assert as_stream_spec(DLQ_STREAM) is DLQ_STREAM


@pytest.mark.parametrize(
    ("backoff", "delays"),
    [
        ((1.0, 5.0, 30.0), [1.0, 5.0, 30.0, 30.0]),
        ((), [0.0, 0.0, 0.0, 0.0]),
        ((2.0,), [2.0, 2.0, 2.0, 2.0]),
    ],
    ids=["three-steps", "none", "constant"],
)
def test_backoff_by_delivery_number(backoff: tuple[float, ...], delays: list[float]) -> None:
    policy = ConsumerPolicy(backoff=backoff)
    assert [policy.delay(n) for n in range(1, 5)] == delays


def test_policy_defaults_and_validation() -> None:
    assert ConsumerPolicy(batch=100).ack_pending == 1000
    assert ConsumerPolicy(batch=500).ack_pending == 2000
    assert ConsumerPolicy(max_ack_pending=7).ack_pending == 7
    for bad in ({"batch": 0}, {"max_deliver": 0}, {"concurrency": 0}, {"ack_wait": 0}, {"backoff": (-1.0,)}):
        with pytest.raises(ValueError):
            ConsumerPolicy(**bad)


class Evt(msgspec.Struct, frozen=True, tag="e.v1"):
    x: int


def test_payloads_and_outgoing_shapes() -> None:
    assert encode_payload(b"raw") == b"raw"
    assert encode_payload(bytearray(b"ab")) == b"ab"
    assert encode_payload(Evt(1)) == b'{"type":"e.v1","x":1}'
    expected = Outgoing(subject="s", msg_id="m", payload=b"p")
    assert as_outgoing(("s", "m", b"p")) == expected
    assert as_outgoing(Output(subject="s", msg_id="m", payload=b"p")) == expected
    assert as_outgoing(expected) is expected

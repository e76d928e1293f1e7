"""The bus contract, run against the real ``NatsBus`` (JetStream) and ``InMemoryBus`` alike:
publishing with ``Nats-Msg-Id`` dedup, durable consumers (one at a time and in batches) with
redelivery and dead-lettering, latest values (``last``, ``last_per_subject``, ``watch``) and
``purge``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from hyperjob.bus import (
    H_DLQ_REASON,
    H_ERROR,
    H_ERROR_TYPE,
    H_ORIGINAL_SUBJECT,
    Delivery,
    InMemoryBus,
    NoStreamError,
    PublishError,
    RetryableError,
    StreamSpec,
    TerminalError,
)
from hyperjob.bus.natsbus import NatsBus
from hyperjob.store import Output
from hyperjob.testkit import eventually, until
from hyperjob.testkit.isolation import new_namespace, open_nats_bus

pytestmark = pytest.mark.service

STREAMS = [
    StreamSpec(name="WORK", subjects=["work.>"]),
    StreamSpec(name="LATEST", subjects=["latest.>"], max_msgs_per_subject=1),
]


@pytest.fixture(params=["memory", "nats"])
async def any_bus(request: pytest.FixtureRequest) -> AsyncIterator[InMemoryBus | NatsBus]:
    if request.param == "memory":
        mem = InMemoryBus(STREAMS)
        yield mem
        await mem.close()
    else:
        url: str = request.getfixturevalue("nats_url")
        async with open_nats_bus(url, new_namespace(), STREAMS) as nats_bus:
            yield nats_bus


class Recorder:
    """A handler that records deliveries and fails as told."""

    def __init__(self, fail: dict[bytes, Exception] | None = None, fail_times: int = 10**9) -> None:
        self.seen: list[Delivery] = []
        self.fail = fail or {}
        self.fail_times = fail_times

    async def __call__(self, d: Delivery) -> None:
        self.seen.append(d)
        exc = self.fail.get(d.data)
        if exc is not None and d.num_delivered <= self.fail_times:
            raise exc

    def datas(self) -> list[bytes]:
        return [d.data for d in self.seen]


async def test_published_message_is_delivered_with_subject_data_headers_and_msg_id(any_bus) -> None:
    rec = Recorder()
    await any_bus.consume("c", "work.>", rec)
    ack = await any_bus.publish("work.a.b", b"hello", msg_id="m-1", headers={"x-k": "v"})
    assert ack.stream == "WORK" and not ack.duplicate
    await eventually(lambda: len(rec.seen) == 1)
    d = rec.seen[0]
    assert (d.subject, d.data, d.msg_id, d.num_delivered, d.stream) == ("work.a.b", b"hello", "m-1", 1, "WORK")
    assert d.headers["x-k"] == "v" and d.seq == ack.seq


async def test_republish_with_same_msg_id_is_dropped(any_bus) -> None:
    rec = Recorder()
    await any_bus.consume("c", "work.>", rec)
    first = await any_bus.publish("work.x", b"one", msg_id="same")
    again = await any_bus.publish("work.x", b"one", msg_id="same")
    await any_bus.publish("work.x", b"two", msg_id="other")
    assert again.duplicate and again.seq == first.seq
    await eventually(lambda: len(rec.seen) == 2)
    assert rec.datas() == [b"one", b"two"]


async def test_retryable_error_redelivers_with_growing_num_delivered(any_bus) -> None:
    rec = Recorder(fail={b"flaky": RetryableError("not yet")}, fail_times=2)
    await any_bus.consume("c", "work.>", rec, backoff=[0.05, 0.1], max_deliver=5)
    await any_bus.publish("work.x", b"flaky", msg_id="f")
    await eventually(lambda: len(rec.seen) == 3)
    assert [d.num_delivered for d in rec.seen] == [1, 2, 3]


async def test_terminal_error_dead_letters_once_with_error_headers(any_bus) -> None:
    rec = Recorder(fail={b"poison": TerminalError("cannot decode")})
    dlq = Recorder()
    await any_bus.consume("handler", "work.>", rec, backoff=[0.05])
    await any_bus.consume("dlq-reader", "dlq.>", dlq)
    traceparent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    await any_bus.publish("work.x", b"poison", msg_id="p", headers={"traceparent": traceparent})
    await eventually(lambda: len(dlq.seen) == 1)
    d = dlq.seen[0]
    assert d.subject == "dlq.handler" and d.data == b"poison"
    assert d.headers[H_DLQ_REASON] == "terminal" and d.headers[H_ERROR_TYPE] == "TerminalError"
    assert d.headers[H_ERROR] == "cannot decode" and d.headers[H_ORIGINAL_SUBJECT] == "work.x"
    assert d.headers["traceparent"].startswith("00-" + "1" * 32)
    assert len(rec.seen) == 1


async def test_exhausting_max_deliver_dead_letters_unknown_errors(any_bus) -> None:
    rec = Recorder(fail={b"bug": KeyError("boom")})
    dlq = Recorder()
    await any_bus.consume("h", "work.>", rec, backoff=[0.02], max_deliver=3)
    await any_bus.consume("dlq-reader", "dlq.h", dlq)
    await any_bus.publish("work.x", b"bug", msg_id="b")
    await eventually(lambda: len(dlq.seen) == 1)
    assert [d.num_delivered for d in rec.seen] == [1, 2, 3]
    assert dlq.seen[0].headers[H_DLQ_REASON] == "max_deliver"
    assert dlq.seen[0].headers[H_ERROR_TYPE] == "KeyError"


async def test_consumers_sharing_a_durable_split_the_messages(any_bus) -> None:
    a, b = Recorder(), Recorder()
    await any_bus.consume("group", "work.>", a, batch=5)
    await any_bus.consume("group", "work.>", b, batch=5)
    await any_bus.publish_many([(f"work.{i}", f"id-{i}", str(i).encode()) for i in range(200)])
    await eventually(lambda: len(a.seen) + len(b.seen) >= 200)
    assert sorted(a.datas() + b.datas(), key=int) == [str(i).encode() for i in range(200)]


async def test_filters_select_subjects(any_bus) -> None:
    only_a, both = Recorder(), Recorder()
    await any_bus.consume("only-a", "work.a.*", only_a)
    await any_bus.consume("both", ["work.a.*", "work.b.*"], both)
    for subject in ["work.a.1", "work.b.1", "work.c.1"]:
        await any_bus.publish(subject, subject.encode(), msg_id=subject)
    await eventually(lambda: len(both.seen) == 2 and len(only_a.seen) == 1)
    assert only_a.datas() == [b"work.a.1"] and both.datas() == [b"work.a.1", b"work.b.1"]


async def test_durable_resumes_after_the_last_ack(any_bus) -> None:
    first = Recorder()
    sub = await any_bus.consume("resume", "work.>", first)
    await any_bus.publish("work.x", b"1", msg_id="1")
    await eventually(lambda: len(first.seen) == 1)
    await sub.stop()
    assert not sub.running
    await any_bus.publish("work.x", b"2", msg_id="2")
    second = Recorder()
    await any_bus.consume("resume", "work.>", second)
    await eventually(lambda: len(second.seen) == 1)
    assert second.datas() == [b"2"]


async def test_trace_context_travels_from_publisher_to_handler(any_bus) -> None:
    trace_id, span_id = 0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7
    parent = NonRecordingSpan(SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1)))
    seen: list[int] = []

    async def handler(_: Delivery) -> None:
        seen.append(trace.get_current_span().get_span_context().trace_id)

    await any_bus.consume("traced", "work.>", handler)
    token = context.attach(trace.set_span_in_context(parent))
    try:
        await any_bus.publish("work.t", b"x", msg_id="t")
    finally:
        context.detach(token)
    await eventually(lambda: len(seen) == 1)
    assert seen == [trace_id]


async def test_publish_many_accepts_store_outputs_and_keeps_order(any_bus) -> None:
    outs = [Output(subject="work.o", msg_id=f"o{i}", payload=str(i).encode()) for i in range(50)]
    acks = await any_bus.publish_many(outs)
    assert [a.seq for a in acks] == sorted(a.seq for a in acks) and len({a.seq for a in acks}) == 50
    again = await any_bus.publish_many(outs)
    assert all(a.duplicate for a in again)


async def test_latest_value_stream_keeps_one_message_per_subject(any_bus) -> None:
    for i in range(3):
        await any_bus.publish("latest.node.c1.n1", f"n1-{i}".encode(), msg_id=f"n1-{i}")
    await any_bus.publish("latest.node.c1.n2", b"n2-0", msg_id="n2-0")
    await any_bus.publish("latest.node.c2.n9", b"n9-0", msg_id="n9-0")
    last = await any_bus.last("latest.node.c1.n1")
    assert last is not None and last.data == b"n1-2"
    assert await any_bus.last("latest.node.c1.nx") is None
    per = await any_bus.last_per_subject("latest.node.c1.*")
    assert {s: d.data for s, d in per.items()} == {"latest.node.c1.n1": b"n1-2", "latest.node.c1.n2": b"n2-0"}
    assert await any_bus.last_per_subject("latest.node.c3.*") == {}


async def test_undeclared_subjects_are_rejected(any_bus) -> None:
    with pytest.raises(PublishError):
        await any_bus.publish("nowhere.x", b"", msg_id="n")
    with pytest.raises(NoStreamError):
        await any_bus.consume("c", "nowhere.>", Recorder())


async def test_batch_handler_settles_each_delivery_by_its_own_outcome(any_bus) -> None:
    calls: list[list[bytes]] = []
    dlq = Recorder()

    async def handler(ds) -> dict[int, Exception] | None:  # noqa: ANN001
        calls.append([d.data for d in ds])
        failures: dict[int, Exception] = {}
        for i, d in enumerate(ds):
            if d.data == b"poison":
                failures[i] = TerminalError("bad")
            elif d.data == b"flaky" and d.num_delivered == 1:
                failures[i] = RetryableError("later")
        return failures or None

    await any_bus.consume_batch("batcher", "work.>", handler, batch=50, backoff=[0.05])
    await any_bus.consume("dlq-reader", "dlq.batcher", dlq)
    await any_bus.publish_many(
        [("work.x", f"m{i}", f"ok{i}".encode()) for i in range(20)]
        + [("work.x", "p", b"poison"), ("work.x", "f", b"flaky")]
    )
    await eventually(lambda: sum(len(c) for c in calls) == 23 and len(dlq.seen) == 1)
    handled = [x for c in calls for x in c]
    assert sorted(handled[:22]) == sorted([f"ok{i}".encode() for i in range(20)] + [b"poison", b"flaky"])
    assert handled[22:] == [b"flaky"] and dlq.seen[0].data == b"poison"


async def test_batch_handler_that_raises_retries_the_whole_batch(any_bus) -> None:
    sizes: list[tuple[int, ...]] = []

    async def handler(ds) -> None:  # noqa: ANN001
        sizes.append(tuple(d.num_delivered for d in ds))
        if ds[0].num_delivered == 1:
            raise RetryableError("store down")

    await any_bus.publish_many([("work.x", f"m{i}", b"x") for i in range(5)])
    await any_bus.consume_batch("batcher", "work.>", handler, batch=10, backoff=[0.05])
    await eventually(lambda: sum(len(s) for s in sizes) >= 10)
    assert sorted(n for s in sizes for n in s) == [1] * 5 + [2] * 5


async def test_durable_names_must_be_one_subject_token(any_bus) -> None:
    from hyperjob.bus import ConsumerError  # noqa: PLC0415

    for bad in ["a.b", "a b", "x>", ""]:
        with pytest.raises(ConsumerError):
            await any_bus.consume(bad, "work.>", Recorder())


async def test_publish_many_names_the_first_failure_and_a_retry_stores_each_message_once(any_bus) -> None:
    rec = Recorder()
    await any_bus.consume("reader", "work.>", rec)
    with pytest.raises(PublishError) as err:
        await any_bus.publish_many([("work.a", "1", b"a"), ("nowhere.b", "2", b"b"), ("work.c", "3", b"c")])
    assert err.value.subject == "nowhere.b" and err.value.msg_id == "2"
    assert (await any_bus.last("work.a")).data == b"a"  # what came before the failure is stored
    await any_bus.publish_many([("work.a", "1", b"a"), ("work.c", "3", b"c")])  # the retry, without the bad one
    await eventually(lambda: len(rec.seen) >= 2)
    await any_bus.publish("work.z", b"z", msg_id="z")
    await eventually(lambda: rec.datas()[-1:] == [b"z"])
    assert rec.datas() == [b"a", b"c", b"z"]  # each once, in order


async def test_lag_reports_pending_and_unacked_and_reset_replays_from_the_start(any_bus) -> None:
    from hyperjob.bus import ConsumerError  # noqa: PLC0415

    rec = Recorder()
    await any_bus.publish_many([("work.x", f"m{i}", str(i).encode()) for i in range(3)])
    with pytest.raises(ConsumerError):
        await any_bus.lag("replayer", "work.>")
    sub = await any_bus.consume("replayer", "work.>", rec)
    await eventually(lambda: len(rec.seen) == 3)
    await until(lambda: any_bus.lag("replayer", "work.>"), lambda lag: lag.settled)
    await sub.stop()
    await any_bus.publish("work.x", b"3", msg_id="m3")
    lag = await any_bus.lag("replayer", "work.>")
    assert (lag.pending, lag.unacked) == (1, 0) and not lag.settled
    assert await any_bus.reset_consumer("replayer", "work.>") is True
    assert await any_bus.reset_consumer("replayer", "work.>") is False
    again = Recorder()
    await any_bus.consume("replayer", "work.>", again)
    await eventually(lambda: len(again.seen) == 4)
    assert again.datas() == [b"0", b"1", b"2", b"3"] and all(d.num_delivered == 1 for d in again.seen)


# -- batches -----------------------------------------------------------------------------------


async def test_batches_come_in_stream_order_and_at_most_batch_at_a_time(any_bus) -> None:
    calls: list[list[int]] = []

    async def handler(ds) -> None:  # noqa: ANN001
        calls.append([int(d.data) for d in ds])

    await any_bus.publish_many([("work.x", f"m{i}", str(i).encode()) for i in range(25)])
    await any_bus.consume_batch("batcher", "work.>", handler, batch=10)
    await eventually(lambda: sum(len(c) for c in calls) == 25)
    assert [i for c in calls for i in c] == list(range(25))
    assert all(1 <= len(c) <= 10 for c in calls)


async def test_batch_members_sharing_a_durable_split_the_messages(any_bus) -> None:
    a: list[bytes] = []
    b: list[bytes] = []

    def into(target: list[bytes]):  # noqa: ANN202
        async def handler(ds) -> None:  # noqa: ANN001
            target.extend(d.data for d in ds)

        return handler

    await any_bus.consume_batch("group", "work.>", into(a), batch=5)
    await any_bus.consume_batch("group", "work.>", into(b), batch=5)
    await any_bus.publish_many([(f"work.{i}", f"id-{i}", str(i).encode()) for i in range(100)])
    await eventually(lambda: len(a) + len(b) >= 100)
    assert sorted(a + b, key=int) == [str(i).encode() for i in range(100)]


async def test_a_batch_member_that_stops_mid_batch_leaves_it_to_be_redelivered(any_bus) -> None:
    started = asyncio.Event()
    first: list[Delivery] = []
    second: list[Delivery] = []

    async def stuck(ds) -> None:  # noqa: ANN001
        first.extend(ds)
        started.set()
        await asyncio.Event().wait()

    async def fine(ds) -> None:  # noqa: ANN001
        second.extend(ds)

    await any_bus.publish_many([("work.x", f"m{i}", str(i).encode()) for i in range(3)])
    member = await any_bus.consume_batch("crashy", "work.>", stuck, batch=10, ack_wait=0.5)
    await asyncio.wait_for(started.wait(), 5)
    await member.stop(grace=0.05)  # the process died with the batch in hand: nothing was acked
    await any_bus.consume_batch("crashy", "work.>", fine, batch=10, ack_wait=0.5)
    await eventually(lambda: len(second) >= 3)
    assert sorted(d.data for d in second) == [b"0", b"1", b"2"] and all(d.num_delivered >= 2 for d in second)


# -- watches -----------------------------------------------------------------------------------


class Watcher:
    def __init__(self, fail_on: bytes | None = None) -> None:
        self.seen: list[tuple[str, bytes]] = []
        self.fail_on = fail_on

    async def __call__(self, d: Delivery) -> None:
        self.seen.append((d.subject, d.data))
        if d.data == self.fail_on:
            raise KeyError("a bug in the handler")


async def test_a_watch_returns_once_the_last_value_of_every_subject_is_in_then_follows_new_ones(any_bus) -> None:
    for i in range(3):
        await any_bus.publish("latest.node.c1.n1", f"n1-{i}".encode(), msg_id=f"n1-{i}")
    await any_bus.publish("latest.node.c1.n2", b"n2-0", msg_id="n2-0")
    await any_bus.publish("latest.node.c2.n9", b"n9-0", msg_id="n9-0")
    watcher = Watcher()
    member = await any_bus.watch("latest.node.c1.*", watcher)
    # No waiting: what existed when the watch started is in when it returns.
    assert sorted(watcher.seen) == [("latest.node.c1.n1", b"n1-2"), ("latest.node.c1.n2", b"n2-0")]
    await any_bus.publish("latest.node.c1.n2", b"n2-1", msg_id="n2-1")
    await any_bus.publish("latest.node.c2.n9", b"n9-1", msg_id="n9-1")
    await any_bus.publish("latest.node.c1.n3", b"n3-0", msg_id="n3-0")
    await eventually(lambda: len(watcher.seen) == 4)
    assert watcher.seen[2:] == [("latest.node.c1.n2", b"n2-1"), ("latest.node.c1.n3", b"n3-0")]
    assert member.running
    await member.stop()
    await any_bus.publish("latest.node.c1.n1", b"n1-after", msg_id="n1-after")
    await any_bus.publish("work.flush", b"", msg_id="flush")  # gives a late delivery time to show up
    await asyncio.sleep(0.2)
    assert len(watcher.seen) == 4 and not member.running


async def test_a_watch_of_nothing_returns_at_once_and_still_follows(any_bus) -> None:
    watcher = Watcher()
    await asyncio.wait_for(any_bus.watch("latest.empty.*", watcher), 5)
    assert watcher.seen == []
    await any_bus.publish("latest.empty.a", b"first", msg_id="first")
    await eventually(lambda: watcher.seen == [("latest.empty.a", b"first")])


async def test_a_watch_of_a_log_stream_gives_the_last_message_of_each_subject(any_bus) -> None:
    await any_bus.publish_many([("work.a", "a1", b"a1"), ("work.b", "b1", b"b1"), ("work.a", "a2", b"a2")])
    watcher = Watcher()
    await any_bus.watch("work.*", watcher)
    assert sorted(watcher.seen) == [("work.a", b"a2"), ("work.b", b"b1")]


async def test_a_watch_handler_that_fails_does_not_end_the_watch(any_bus) -> None:
    await any_bus.publish("latest.x.a", b"bad", msg_id="bad")
    await any_bus.publish("latest.x.b", b"good", msg_id="good")
    watcher = Watcher(fail_on=b"bad")
    await any_bus.watch("latest.x.*", watcher)
    assert sorted(watcher.seen) == [("latest.x.a", b"bad"), ("latest.x.b", b"good")]
    await any_bus.publish("latest.x.a", b"bad", msg_id="bad-again")
    await any_bus.publish("latest.x.c", b"later", msg_id="later")
    await eventually(lambda: ("latest.x.c", b"later") in watcher.seen)


async def test_an_empty_payload_is_a_value_like_any_other(any_bus) -> None:
    # Changelog tombstones are empty messages with a header: a watch and last() hand them over.
    await any_bus.publish("latest.state.a", b"", msg_id="t", headers={"Hyperjob-Deleted": "1"})
    watcher = Watcher()
    await any_bus.watch("latest.state.*", watcher)
    assert watcher.seen == [("latest.state.a", b"")]
    last = await any_bus.last("latest.state.a")
    assert last is not None and last.data == b"" and last.headers["Hyperjob-Deleted"] == "1"


# -- purge ---------------------------------------------------------------------------------------


async def test_purge_removes_every_message_of_exactly_one_subject(any_bus) -> None:
    await any_bus.publish_many(
        [("work.a", "a1", b"a1"), ("work.a", "a2", b"a2"), ("work.b", "b1", b"b1"), ("work.a.deeper", "d1", b"d1")]
    )
    assert await any_bus.purge("work.a") == 2
    assert await any_bus.last("work.a") is None
    assert {s: d.data for s, d in (await any_bus.last_per_subject("work.>")).items()} == {
        "work.b": b"b1",
        "work.a.deeper": b"d1",
    }
    watcher = Watcher()
    await any_bus.watch("work.*", watcher)
    assert watcher.seen == [("work.b", b"b1")]
    assert await any_bus.purge("work.a") == 0
    await any_bus.publish("work.a", b"a3", msg_id="a3")  # the subject lives on after a purge
    assert (await any_bus.last("work.a")).data == b"a3"


async def test_a_durable_consumer_never_gets_what_was_purged_before_it_read_it(any_bus) -> None:
    rec = Recorder()
    await any_bus.publish_many([("work.a", "a1", b"a1"), ("work.b", "b1", b"b1")])
    await any_bus.purge("work.a")
    await any_bus.consume("late", "work.>", rec)
    await eventually(lambda: len(rec.seen) == 1)
    assert rec.datas() == [b"b1"]

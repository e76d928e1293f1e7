"""What only the real JetStream bus can show: server-side config, crashes, restarts, isolation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest
import structlog
import structlog.testing

from hyperjob.bus import H_DLQ_REASON, BusClosedError, Delivery, PublishError, StreamSpec
from hyperjob.bus.natsbus import NatsBus
from hyperjob.events.subjects import STREAMS
from hyperjob.testkit import eventually
from hyperjob.testkit.isolation import new_namespace, open_nats_bus
from hyperjob.testkit.servers import NatsServer

pytestmark = pytest.mark.service

WORK = [StreamSpec(name="WORK", subjects=["work.>"])]


async def _js_info(url: str, stream: str, consumer: str | None = None):  # noqa: ANN202 - nats-py types
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        if consumer is None:
            return await js.stream_info(stream)
        return await js.consumer_info(stream, consumer)
    finally:
        await nc.close()


async def test_consumer_is_created_with_explicit_ack_pending_and_one_spare_delivery(nats_url, namespace) -> None:
    async with open_nats_bus(nats_url, namespace, WORK) as bus:

        async def noop(_: Delivery) -> None: ...

        await bus.consume("svc", "work.>", noop, batch=250, max_deliver=4, max_ack_pending=3000, ack_wait=12)
        info = await _js_info(nats_url, f"{namespace}_WORK", "svc")
    assert info.config.max_ack_pending == 3000 and info.config.max_deliver == 5
    assert info.config.ack_wait == 12 and info.config.filter_subject == f"{namespace}.work.>"


async def test_catalogue_streams_are_declared_with_latest_value_limits(bus: NatsBus, nats_url, namespace) -> None:
    by_name = {s.name: s for s in STREAMS}
    for name in ("HEARTBEAT", "SCHED", "DLQ"):
        info = await _js_info(nats_url, f"{namespace}_{name}")
        assert info.config.max_msgs_per_subject == (1 if by_name[name].latest_only else -1)
        assert info.config.subjects == [f"{namespace}.{s}" for s in by_name[name].subjects]


async def test_redeclaring_a_stream_updates_its_config(nats_url, namespace) -> None:
    async with open_nats_bus(nats_url, namespace, WORK) as bus:
        await bus.publish("work.a", b"kept", msg_id="1")
        await bus.declare([StreamSpec(name="WORK", subjects=["work.>"], max_age=3600.0)])
        info = await _js_info(nats_url, f"{namespace}_WORK")
    assert info.config.max_age == 3600.0 and info.state.messages == 1


async def test_message_of_a_crashed_consumer_is_dead_lettered_after_max_deliver(nats_url, namespace) -> None:
    async with open_nats_bus(nats_url, namespace, WORK) as bus:
        hung = asyncio.Event()
        calls: list[int] = []
        dlq: list[Delivery] = []

        async def hang(d: Delivery) -> None:
            calls.append(d.num_delivered)
            hung.set()
            await asyncio.Event().wait()

        async def collect(d: Delivery) -> None:
            dlq.append(d)

        crashed = await bus.consume("svc", "work.>", hang, max_deliver=1, ack_wait=0.5)
        await bus.consume("reader", "dlq.svc", collect)
        await bus.publish("work.a", b"stuck", msg_id="s")
        await asyncio.wait_for(hung.wait(), 5)
        await crashed.stop(grace=0.05)
        assert not crashed.running

        async def never(_: Delivery) -> None:
            raise AssertionError("a message past max_deliver must not reach the handler")

        await bus.consume("svc", "work.>", never, max_deliver=1, ack_wait=0.5)
        await eventually(lambda: len(dlq) == 1)
    assert calls == [1] and dlq[0].data == b"stuck" and dlq[0].headers[H_DLQ_REASON] == "max_deliver"


async def test_namespaces_isolate_buses_on_one_server(nats_url) -> None:
    got_a: list[bytes] = []
    got_b: list[bytes] = []

    async def into(target: list[bytes]):  # noqa: ANN202
        async def handler(d: Delivery) -> None:
            target.append(d.data)

        return handler

    async with open_nats_bus(nats_url, new_namespace(), WORK) as a, open_nats_bus(nats_url, new_namespace(), WORK) as b:
        await a.consume("c", "work.>", await into(got_a))
        await b.consume("c", "work.>", await into(got_b))
        await a.publish("work.x", b"for-a", msg_id="1")
        await b.publish("work.x", b"for-b", msg_id="1")
        await eventually(lambda: got_a and got_b)
    assert got_a == [b"for-a"] and got_b == [b"for-b"]


async def test_stream_and_durable_position_survive_a_server_restart(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats")
    server.start()
    port = server.port
    try:
        seen: list[bytes] = []

        async def handler(d: Delivery) -> None:
            seen.append(d.data)

        bus = await NatsBus.connect(server.url, WORK)
        sub = await bus.consume("svc", "work.>", handler)
        await bus.publish("work.a", b"before", msg_id="1")
        await eventually(lambda: seen == [b"before"])
        await sub.stop()
        await bus.publish("work.a", b"while-away", msg_id="2")
        await bus.close()
        server.stop()

        server = NatsServer(tmp_path / "nats", port=port)
        server.start()
        bus = await NatsBus.connect(server.url, WORK)
        await bus.consume("svc", "work.>", handler)
        await eventually(lambda: len(seen) == 2)
        dup = await bus.publish("work.a", b"before", msg_id="1")
        await bus.close()
    finally:
        server.stop()
    assert seen == [b"before", b"while-away"] and dup.duplicate


async def test_publish_fails_with_publish_error_when_the_server_is_gone(tmp_path: Path) -> None:
    with NatsServer(tmp_path / "nats") as server:
        bus = await NatsBus.connect(server.url, WORK, timeout=0.5)
    try:
        with pytest.raises(PublishError) as err:
            await bus.publish("work.a", b"x", msg_id="lost")
        assert err.value.msg_id == "lost"
    finally:
        await bus.close()


async def test_connect_to_nothing_raises_bus_closed_error(tmp_path: Path) -> None:
    with NatsServer(tmp_path / "nats") as server:
        url = server.url
    with pytest.raises(BusClosedError):
        await NatsBus.connect(url, WORK, connect_timeout=1.0)


async def test_queued_messages_of_a_slow_batch_are_not_redelivered(nats_url, namespace) -> None:
    async with open_nats_bus(nats_url, namespace, WORK) as bus:
        seen: list[Delivery] = []

        async def slow(d: Delivery) -> None:
            seen.append(d)
            await asyncio.sleep(0.3)

        await bus.publish_many([("work.a", str(i), str(i).encode()) for i in range(6)])
        await bus.consume("svc", "work.>", slow, batch=6, ack_wait=1.0)  # the batch takes 1.8 s
        await eventually(lambda: len(seen) >= 6)
        await asyncio.sleep(1.1)
    assert [d.data for d in seen] == [str(i).encode() for i in range(6)]
    assert all(d.num_delivered == 1 for d in seen)


async def test_consumer_carries_on_after_the_server_restarts(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats")
    server.start()
    port = server.port
    seen: list[bytes] = []

    async def handler(d: Delivery) -> None:
        seen.append(d.data)

    try:
        bus = await NatsBus.connect(server.url, WORK)
        try:
            await bus.consume("svc", "work.>", handler)
            await bus.publish("work.a", b"before", msg_id="1")
            await eventually(lambda: seen == [b"before"])
            await asyncio.to_thread(server.stop)
            server = NatsServer(tmp_path / "nats", port=port)
            await asyncio.to_thread(server.start)
            await eventually(lambda: bus._nc.stats["reconnects"] >= 1, timeout=10)  # noqa: SLF001
            await bus.publish("work.a", b"after", msg_id="2")
            await eventually(lambda: seen == [b"before", b"after"], timeout=3)
        finally:
            await bus.close()
    finally:
        server.stop()


async def test_stopping_hands_unstarted_messages_to_the_group_at_once(nats_url, namespace) -> None:
    async with open_nats_bus(nats_url, namespace, WORK) as bus:
        first: list[bytes] = []
        second: list[Delivery] = []
        started = asyncio.Event()

        async def slow(d: Delivery) -> None:
            first.append(d.data)
            started.set()
            await asyncio.sleep(0.3)

        async def fast(d: Delivery) -> None:
            second.append(d)

        await bus.publish_many([("work.a", str(i), str(i).encode()) for i in range(20)])
        member = await bus.consume("svc", "work.>", slow, batch=20, ack_wait=30)
        await asyncio.wait_for(started.wait(), 5)
        await member.stop()
        await bus.consume("svc", "work.>", fast)
        await eventually(lambda: len(first) + len(second) >= 20, timeout=5)
    assert sorted(first + [d.data for d in second], key=int) == [str(i).encode() for i in range(20)]
    assert len(first) == 1 and all(d.num_delivered == 2 for d in second)


async def test_deleted_consumer_is_reported_without_spinning(nats_url, namespace) -> None:
    async with open_nats_bus(nats_url, namespace, WORK) as bus:

        async def noop(_: Delivery) -> None: ...

        sub = await bus.consume("svc", "work.>", noop)
        with structlog.testing.capture_logs() as logs:
            nc = await nats.connect(nats_url)
            try:
                await nc.jetstream().delete_consumer(f"{namespace}_WORK", "svc")
            finally:
                await nc.close()
            await asyncio.sleep(1.5)
        assert sub.running
    refusals = [e for e in logs if e["event"] == "pull_refused"]
    assert 1 <= len(refusals) <= 4 and refusals[0]["status"] == "409"


async def test_a_deleted_consumer_is_created_again_from_where_it_left_off(nats_url, namespace) -> None:
    """The durable deleted under a running member: its pulls are refused (said in ``refused``), it
    is created again, and the messages published since are delivered, the earlier ones not again."""
    async with open_nats_bus(nats_url, namespace, WORK) as bus:
        seen: list[bytes] = []

        async def handler(d: Delivery) -> None:
            seen.append(d.data)

        await bus.publish_many([("work.a", f"old-{i}", f"old-{i}".encode()) for i in range(3)])
        sub = await bus.consume("svc", "work.>", handler)
        await eventually(lambda: len(seen) == 3, timeout=5)
        assert await bus.reset_consumer("svc", "work.>")  # deleted by hand, the member still running
        await eventually(lambda: bool(sub.refused), timeout=5)
        await bus.publish_many([("work.a", f"new-{i}", f"new-{i}".encode()) for i in range(3)])
        await eventually(lambda: len(seen) == 6, timeout=10)
        assert seen == [f"old-{i}".encode() for i in range(3)] + [f"new-{i}".encode() for i in range(3)]
        assert sub.running and sub.refused == ""
        assert (await bus.lag("svc", "work.>")).pending == 0


async def test_a_watch_catches_up_on_thousands_of_subjects_before_it_returns(nats_url, namespace) -> None:
    latest = [StreamSpec(name="LATEST", subjects=["latest.>"], max_msgs_per_subject=1)]
    async with open_nats_bus(nats_url, namespace, latest) as bus:
        for start in range(0, 3000, 1000):
            await bus.publish_many([(f"latest.n.{i}", f"{i}-old", b"old") for i in range(start, start + 1000)])
        await bus.publish_many([(f"latest.n.{i}", f"{i}-new", b"new") for i in range(0, 3000, 3)])
        seen: dict[str, bytes] = {}

        async def handler(d: Delivery) -> None:
            seen[d.subject] = d.data

        await bus.watch("latest.n.*", handler)
        assert len(seen) == 3000  # every subject, before watch returned
        assert sum(1 for v in seen.values() if v == b"new") == 1000


async def test_a_watch_of_a_filter_nothing_matches_in_a_busy_stream_is_caught_up_at_once(nats_url, namespace) -> None:
    kept = [StreamSpec(name="EVENTS", subjects=["latest.>"])]  # every message, not the latest per subject
    async with open_nats_bus(nats_url, namespace, kept) as bus:
        await bus.publish_many([(f"latest.other.{i}", f"{i}", b"x") for i in range(20)])

        async def handler(d: Delivery) -> None:
            raise AssertionError(f"nothing matches, yet {d.subject} was handed over")

        # Before the fix it waited out its catch-up timeout and returned not caught up: a service
        # watching such a filter started a minute late.
        watch = await bus.watch("latest.n.*", handler, catch_up_timeout=5.0)
        assert watch.caught_up.is_set()


async def test_a_watch_follows_new_values_after_the_server_restarts(tmp_path: Path) -> None:
    latest = [StreamSpec(name="LATEST", subjects=["latest.>"], max_msgs_per_subject=1)]
    server = NatsServer(tmp_path / "nats")
    server.start()
    port = server.port
    seen: list[bytes] = []

    async def handler(d: Delivery) -> None:
        seen.append(d.data)

    try:
        bus = await NatsBus.connect(server.url, latest)
        try:
            await bus.publish("latest.a", b"before", msg_id="1")
            await bus.watch("latest.*", handler)
            assert seen == [b"before"]
            await asyncio.to_thread(server.stop)
            server = NatsServer(tmp_path / "nats", port=port)
            await asyncio.to_thread(server.start)
            await eventually(lambda: bus._nc.stats["reconnects"] >= 1, timeout=10)  # noqa: SLF001
            await bus.publish("latest.a", b"after", msg_id="2")
            await eventually(lambda: seen[-1:] == [b"after"], timeout=15)
        finally:
            await bus.close()
    finally:
        server.stop()

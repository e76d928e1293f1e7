"""The runtime on the in-memory bus and store, as every service runs on them: fault injection,
redelivery with one effect, reload after a refused commit, and the outbox after a failed publish."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob import events
from hyperjob.bus import InMemoryBus, PublishError, StreamSpec
from hyperjob.events.subjects import STREAMS
from hyperjob.servicekit import AsyncioTimers, Reaction, Runtime, WallClock
from hyperjob.store import Commit, InMemoryStore, StoreUnavailableError, Write
from hyperjob.testkit import eventually

TEST_STREAMS = [StreamSpec(name="IN", subjects=["in.>"]), StreamSpec(name="OUT", subjects=["out.>"])]


class Count(msgspec.Struct, frozen=True):
    n: int


class Counter:
    """A service of one table: each ``QueueChanged`` on ``in.tick`` adds one and says so."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.counts = runtime.table("count", Count)
        runtime.subscribe("counter", "in.tick", {events.QueueChanged: self.on_tick}, backoff=[0.01])

    def on_tick(self, msg: events.QueueChanged) -> Reaction:
        count = Count((self.counts.get("c") or Count(0)).n + 1)
        self.counts.put("c", count)
        return Reaction().publish(
            "out.counted", events.QueueChanged(**self.rt.envelope(msg, "counted"), name=str(count.n))
        )


def tick(event_id: str) -> bytes:
    return events.encode(events.QueueChanged(event_id=event_id, name="tick"))


async def running(bus: InMemoryBus, store: InMemoryStore) -> tuple[Runtime, Counter]:
    clock = WallClock()
    runtime = Runtime("counter", "counter", bus, store, clock=clock, timers=AsyncioTimers(clock))
    service = Counter(runtime)
    await runtime.start()
    return runtime, service


async def test_store_faults_fail_the_named_operation_then_recover() -> None:
    store = InMemoryStore()
    store.fail("commit", times=2)
    for _ in range(2):
        with pytest.raises(StoreUnavailableError):
            await store.commit(Commit(writes=[Write.put("k", "n", {})]))
    assert await store.get("k", "n") is None
    assert (await store.commit(Commit(writes=[Write.put("k", "n", {})]))).ok
    store.fail()
    with pytest.raises(StoreUnavailableError):
        await store.get("k", "n")


async def test_bus_faults_fail_publishes_then_recover() -> None:
    bus = InMemoryBus(TEST_STREAMS)
    bus.fail("publish")
    with pytest.raises(PublishError):
        await bus.publish("in.x", b"", msg_id="1")
    assert (await bus.publish("in.x", b"", msg_id="1")).seq == 1
    await bus.close()


async def test_a_subject_goes_to_the_stream_declared_for_it_last() -> None:
    # The bus keeps each subject's stream (the simulator publishes the same subjects over and over):
    # declaring streams again must not leave a subject on the stream that no longer takes it.
    bus = InMemoryBus(TEST_STREAMS)
    assert (await bus.publish("in.x", b"", msg_id="1")).stream == "IN"
    bus.declare([StreamSpec(name="IN", subjects=["in.y"]), StreamSpec(name="WIDE", subjects=["in.>"])])
    assert (await bus.publish("in.x", b"", msg_id="2")).stream == "WIDE"
    await bus.close()


async def test_redelivered_event_has_one_effect_even_when_the_first_publish_failed() -> None:
    bus, store = InMemoryBus([*STREAMS, *TEST_STREAMS]), InMemoryStore()
    runtime, counter = await running(bus, store)
    await bus.publish("in.tick", tick("tick-1"), msg_id="m1")
    await bus.publish("in.tick", tick("tick-1"), msg_id="m1-copy")  # the same event stored twice
    await bus.publish("in.tick", tick("tick-2"), msg_id="m2")
    bus.fail("publish")  # the first commit lands, its publish fails: the batch is redelivered
    await eventually(lambda: len([m for m in bus.messages("OUT")]) == 2)
    counted = [events.decoder(events.QueueChanged).decode(m.data).name for m in bus.messages("OUT")]
    assert counted == ["1", "2"]
    assert (await store.get("count", "c")).decode(Count) == Count(2)  # type: ignore[union-attr]
    await runtime.stop()
    await bus.close()


async def test_a_refused_commit_reloads_the_state_the_store_holds() -> None:
    bus, store = InMemoryBus([*STREAMS, *TEST_STREAMS]), InMemoryStore()
    runtime, counter = await running(bus, store)
    # Another replica counted meanwhile: our memory is behind, our commit is refused, we reload.
    await store.put_if_version("count", "c", Count(10), 0)
    await bus.publish("in.tick", tick("tick-1"), msg_id="m1")
    await eventually(lambda: counter.counts.get("c") == Count(11))
    assert (await store.get("count", "c")).decode(Count) == Count(11)  # type: ignore[union-attr]
    await runtime.stop()
    await bus.close()

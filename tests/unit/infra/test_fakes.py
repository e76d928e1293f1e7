"""The in-memory bus and store as handler tests use them: fault injection and the redelivery
pattern (decode → apply with the dedup marker → publish recorded outputs → ack) end to end."""

from __future__ import annotations

import pytest

from bus import Delivery, InMemoryBus, PublishError, StreamSpec
from store import InMemoryStore, Output, StoreUnavailableError, Write
from testkit import eventually

STREAMS = [StreamSpec(name="IN", subjects=["in.>"]), StreamSpec(name="OUT", subjects=["out.>"])]


async def test_store_faults_fail_the_named_operation_then_recover() -> None:
    store = InMemoryStore()
    store.fail("apply", times=2)
    for _ in range(2):
        with pytest.raises(StoreUnavailableError):
            await store.apply("c", "e", [Write.put("k", "n", {})])
    assert await store.get("k", "n") is None
    assert (await store.apply("c", "e", [Write.put("k", "n", {})])).ok
    store.fail()
    with pytest.raises(StoreUnavailableError):
        await store.get("k", "n")


async def test_bus_faults_fail_publishes_then_recover() -> None:
    bus = InMemoryBus(STREAMS)
    bus.fail("publish")
    with pytest.raises(PublishError):
        await bus.publish("in.x", b"", msg_id="1")
    assert (await bus.publish("in.x", b"", msg_id="1")).seq == 1
    await bus.close()


async def test_redelivered_event_has_one_effect_even_when_the_first_publish_failed() -> None:
    bus, store = InMemoryBus(STREAMS), InMemoryStore()
    outputs: list[Delivery] = []

    async def handler(d: Delivery) -> None:
        event_id = d.data.decode()  # in a service: the decoded message's event_id
        doc = await store.get("counter", "c")
        count = (doc.decode(dict)["n"] if doc else 0) + 1
        out = Output(subject="out.counted", msg_id=f"{event_id}/counted", payload=str(count).encode())
        result = await store.apply("counter-svc", event_id,
                                   [Write.put("counter", "c", {"n": count}, doc.version if doc else 0)], [out])
        if d.num_delivered == 1 and event_id == "tick-1":
            bus.fail("publish")  # the write landed, the publish fails: the bus redelivers
        await bus.publish_many(result.outputs)

    async def collect(d: Delivery) -> None:
        outputs.append(d)

    await bus.consume("counter-svc", "in.>", handler, backoff=[0.01])
    await bus.consume("reader", "out.>", collect)
    await bus.publish("in.tick", b"tick-1", msg_id="m1")
    await bus.publish("in.tick", b"tick-1", msg_id="m1-copy")  # the same event stored twice
    await bus.publish("in.tick", b"tick-2", msg_id="m2")
    await eventually(lambda: len(outputs) == 2)
    assert (await store.get("counter", "c")).decode(dict) == {"n": 2}
    assert sorted(d.data for d in outputs) == [b"1", b"2"]  # tick-2 may overtake the retried tick-1
    await bus.close()

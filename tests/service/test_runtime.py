"""``servicekit.Runtime`` on real JetStream and Redis, with a service of one table standing in for the
real ones: ``DeleteObject(kind="Counter", name=n)`` adds one to document ``count/n`` and says so
(the answer on ``hj.result.<id>`` and a ``HyperJobDeleted``).

What every service relies on: a batch is handled in order and committed once; a redelivered
message has one effect and its recorded outputs go out again under their first ids; what cannot
be decoded goes to the dead-letter queue, what is another consumer's is skipped; a failing handler
leaves nothing of its change in memory; a replica that decided on stale memory is refused, reloads
and decides again; outputs committed but never published go out when the instance restarts, in
order; a wiped store is seen at the next commit and rebuilt from the changelog, which always ends
at each document's latest version; watched values are in before anything is handled; replicas of
one instance take turns, one holding its lease while the other waits, and hand over without loss.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any
from unittest.mock import ANY

import msgspec
import pytest

from hyperjob import events
from hyperjob.bus import PublishError
from hyperjob.events import subjects
from hyperjob.servicekit import AsyncioTimers, Reaction, Runtime, WallClock
from hyperjob.servicekit.health import readiness
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

DURABLE = "counter"
INSTANCE = "counter-1"


class Count(msgspec.Struct, frozen=True):
    n: int
    last: str = ""


class Counter:
    """Counts ``DeleteObject``s of kind ``Counter`` per name; fails on a name ``fail`` when told."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        backoff: list[float] | None = None,
        max_deliver: int = 5,
        concerns: Callable[[events.Message], bool] | None = None,
    ) -> None:
        self.rt = runtime
        self.counts = runtime.table("count", Count)
        self.calls: list[str] = []
        self.failing: set[str] = set()
        self.queues: dict[str, str] = {}
        self.seen_queues_at_first_call: dict[str, str] | None = None
        runtime.watch(
            subjects.CONFIG_ALL, {events.QueueChanged: self.on_queue, events.PriorityClassChanged: lambda _m: None}
        )
        runtime.subscribe(
            DURABLE,
            subjects.DELETE,
            {events.DeleteObject: self.on_delete},
            backoff=backoff or [0.05],
            max_deliver=max_deliver,
            concerns=concerns or (lambda msg: getattr(msg, "name", "") != "elsewhere"),
        )

    def on_queue(self, msg: events.QueueChanged) -> None:
        self.queues[msg.name] = msg.state

    def on_delete(self, msg: events.DeleteObject) -> Reaction:
        self.calls.append(msg.name)
        if self.seen_queues_at_first_call is None:
            self.seen_queues_at_first_call = dict(self.queues)
        current = self.counts.get(msg.name) or Count(0)
        self.counts.put(msg.name, Count(current.n + 1, msg.event_id))
        if msg.name in self.failing:
            raise RuntimeError(f"injected: handler of {msg.name} fails")
        reaction = Reaction().publish(
            subjects.result(msg.event_id),
            events.RequestAccepted(**self.rt.envelope(msg, "answer"), kind=msg.kind, name=msg.name, outcome="deleted"),
        )
        return reaction.publish(
            subjects.HYPERJOB_DELETED, events.HyperJobDeleted(**self.rt.envelope(msg, "deleted"), name=msg.name)
        )


def runtime_on(
    bus: Any,
    store: Any,
    *,
    instance: str = INSTANCE,
    fault: Callable[[str], None] | None = None,
    lease_ttl: float = 0.0,
) -> Runtime:
    clock = WallClock()
    timers = AsyncioTimers(clock)
    return Runtime("counter", instance, bus, store, clock=clock, timers=timers, fault=fault, lease_ttl=lease_ttl)


class Running:
    def __init__(self, bus: Any, store: Any, **kw: Any) -> None:
        own = ("instance", "fault", "lease_ttl")
        self.runtime = runtime_on(bus, store, **{k: v for k, v in kw.items() if k in own})
        self.counter = Counter(
            self.runtime, **{k: v for k, v in kw.items() if k in ("backoff", "max_deliver", "concerns")}
        )

    async def __aenter__(self) -> Counter:
        await self.runtime.start()
        return self.counter

    async def __aexit__(self, *exc: Any) -> None:
        await self.runtime.stop()


@pytest.fixture
async def counter(bus, store) -> AsyncIterator[Counter]:
    async with Running(bus, store) as running:
        yield running


def tick(name: str = "c") -> events.DeleteObject:
    return sh.message(events.DeleteObject, kind="Counter", name=name)


async def count(store: Any, name: str = "c") -> tuple[int, int]:
    """(count, version) of ``count/name`` in the store."""
    doc = await store.get("count", name)
    return (0, 0) if doc is None else (doc.decode(Count).n, doc.version)


async def changelog_of(probe: sh.Probe, name: str = "c", instance: str = INSTANCE) -> tuple[int, int] | None:
    entry = (await probe.changelog(instance)).get(f"count/{name}")
    if entry is None or entry.headers.get("Hyperjob-Deleted"):
        return None
    return msgspec.json.decode(entry.data, type=Count).n, int(entry.headers["Hyperjob-Version"])


# -- batches, redeliveries, dead letters --------------------------------------------------------------


async def test_a_batch_is_handled_in_order_and_each_message_counted_once(counter, bus, store, probe) -> None:
    ticks = [tick("c") for _ in range(30)] + [tick("d") for _ in range(5)]
    await bus.publish_many([(subjects.DELETE, t.event_id, events.encode(t)) for t in ticks])
    await bus.publish(subjects.DELETE, events.encode(ticks[0]), msg_id="copy-in-a-later-batch")
    await probe.settled(DURABLE, subjects.DELETE)
    assert (await count(store, "c"))[0] == 30 and (await count(store, "d"))[0] == 5
    assert len(await probe.messages(subjects.HYPERJOB_DELETED)) == 35
    assert (await store.get("count", "c")).decode(Count).last == ticks[29].event_id  # the last one last
    assert await changelog_of(probe, "c") == await count(store, "c")


async def test_a_redelivered_message_has_one_effect_and_its_outputs_go_out_under_their_first_ids(
    counter, bus, store, probe
) -> None:
    msg = tick()
    await sh.send(bus, subjects.DELETE, msg)
    await probe.settled(DURABLE, subjects.DELETE)
    await sh.send(bus, subjects.DELETE, msg, copy=1)
    await probe.settled(DURABLE, subjects.DELETE)
    assert counter.calls == ["c", "c"]  # handled twice, counted once
    assert await count(store) == (1, 1)
    [answer] = await probe.messages(subjects.result(msg.event_id))
    assert answer.msg_id == events.derive_id(msg.event_id, "answer")
    assert len(await probe.messages(subjects.HYPERJOB_DELETED)) == 1


async def test_messages_the_service_is_not_concerned_with_are_acknowledged_unhandled(
    counter, bus, store, probe
) -> None:
    ticks = [tick("elsewhere"), tick("c"), tick("elsewhere")]
    await bus.publish_many([(subjects.DELETE, t.event_id, events.encode(t)) for t in ticks])
    await probe.settled(DURABLE, subjects.DELETE)  # all three acknowledged
    assert counter.calls == ["c"] and await count(store, "elsewhere") == (0, 0)
    assert await store.seen(DURABLE, [t.event_id for t in ticks], INSTANCE) == {
        ticks[1].event_id: ANY
    }  # no marker either
    assert not await probe.messages(subjects.dlq(DURABLE))


async def test_a_redelivery_is_handled_even_when_its_own_commit_left_the_service_unconcerned(bus, store, probe) -> None:
    # Counted once, a name no longer concerns the service; its first handling committed, then the
    # instance crashed before publishing: the redelivery must still publish what was recorded.
    crash = sh.Crash("after-commit")
    running = Running(bus, store, fault=crash, concerns=lambda msg: msg.name not in counted)
    counted = running.counter.counts
    async with running as counter:
        msg = tick()
        await sh.send(bus, subjects.DELETE, msg)
        await probe.settled(DURABLE, subjects.DELETE)
    assert crash.fired == 1 and counter.calls == ["c", "c"]  # handled again, refused as a duplicate
    assert await count(store) == (1, 1)
    assert len(await probe.messages(subjects.result(msg.event_id))) == 1  # the answer went out


async def test_undecodable_messages_and_requests_on_another_requests_subject_are_dead_lettered(
    counter, bus, store, probe
) -> None:
    await bus.publish(subjects.DELETE, b"not json", msg_id="garbage")
    await bus.publish(subjects.DELETE, b'{"type": "hj.object.delete.v1", "event_id": "x"}', msg_id="incomplete")
    other = sh.message(events.ApplyManifest, manifest={})  # a request of another subject's type
    await bus.publish(subjects.DELETE, events.encode(other), msg_id="other")
    await bus.publish(subjects.DELETE, b'{"type": "hj.object.delete.v9", "event_id": "x"}', msg_id="unknown")
    await bus.publish(subjects.DELETE, b'{"type": "hj.object.delete.v1", "kind": "\xff"}', msg_id="not-utf8")
    await sh.send(bus, subjects.DELETE, tick())
    await probe.settled(DURABLE, subjects.DELETE)
    dead = await probe.messages(subjects.dlq(DURABLE))
    reasons = {d.headers["Hyperjob-Original-Msg-Id"]: d.headers["Hyperjob-Dlq-Reason"] for d in dead}
    assert reasons == {
        "garbage": "undecodable",
        "incomplete": "malformed",
        "unknown": "unknown-type",
        "not-utf8": "undecodable",
        "other": "wrong-subject",
    }
    assert await count(store) == (1, 1)


async def test_a_failing_handler_leaves_nothing_in_memory_and_ends_in_the_dead_letter_queue(bus, store, probe) -> None:
    async with Running(bus, store, max_deliver=3) as counter:
        counter.failing.add("bad")
        await bus.publish_many([(subjects.DELETE, t.event_id, events.encode(t)) for t in (tick(), tick("bad"), tick())])
        await probe.settled(DURABLE, subjects.DELETE)
        assert counter.counts.get("bad") is None  # its change never reached the store: memory forgot it
        assert counter.counts.get("c") == (await store.get("count", "c")).decode(Count)
    assert await count(store) == (2, counter.counts.versions["c"])
    assert await count(store, "bad") == (0, 0)
    [dead] = await probe.messages(subjects.dlq(DURABLE))
    assert dead.headers["Hyperjob-Dlq-Reason"] == "max_deliver" and counter.calls.count("bad") == 3


async def test_replicas_sharing_a_consumer_refuse_each_others_stale_decisions_and_lose_no_count(
    bus, store, probe
) -> None:
    async with Running(bus, store, instance="counter-a") as a, Running(bus, store, instance="counter-b") as b:
        for _ in range(4):
            ticks = [tick() for _ in range(10)]
            await bus.publish_many([(subjects.DELETE, t.event_id, events.encode(t)) for t in ticks])
            await probe.settled(DURABLE, subjects.DELETE)
    assert a.calls and b.calls  # both took part
    assert (await count(store))[0] == 40  # each counted on the latest value: refused when stale, then again
    assert len(await probe.messages(subjects.HYPERJOB_DELETED)) == 40


async def tick_all(bus: Any, probe: sh.Probe, n: int) -> None:
    ticks = [tick() for _ in range(n)]
    await bus.publish_many([(subjects.DELETE, t.event_id, events.encode(t)) for t in ticks])
    await probe.settled(DURABLE, subjects.DELETE)


async def test_replicas_of_one_instance_take_turns_and_hand_over_without_loss(bus, store, probe) -> None:
    lease = 0.4
    first = Running(bus, store, lease_ttl=lease)
    a = await first.__aenter__()
    async with Running(bus, store, lease_ttl=lease) as b:
        try:
            assert a.rt.active and not b.rt.active  # b waits: one replica runs the instance
            await tick_all(bus, probe, 10)
            assert len(a.calls) == 10 and b.calls == []  # and no refused commit to retry
        finally:
            await first.__aexit__(None, None, None)  # a stops and gives the lease back
        await sh.until(lambda: b.rt.active, what="the standby running the instance")
        await tick_all(bus, probe, 10)
        assert len(b.calls) == 10
        assert (await count(store))[0] == 20

        # Another holder took the lease (b's renewals did not reach the store in time): b stops.
        await store.release_lease(INSTANCE, b.rt.lease.holder)
        assert await store.take_lease(INSTANCE, "elsewhere", 30.0)
        await sh.until(lambda: not b.rt.active and not b.rt.members, what="b stepping down")
        await store.release_lease(INSTANCE, "elsewhere")
        await sh.until(lambda: b.rt.active, what="b running the instance again")
        await tick_all(bus, probe, 5)
    assert (await count(store))[0] == 25
    assert len(await probe.messages(subjects.HYPERJOB_DELETED)) == 25


async def test_a_timer_already_due_when_a_replica_takes_over_runs_once_it_is_active(bus, store, probe) -> None:
    """The holder was killed (``kill -9``: its lease lapses, nothing handed over) and its timers are
    due by the time a replica takes over: re-armed from the loaded state, they run once the replica
    is active (before, they fired during its activation and were dropped: a node-agent's pods whose
    end fell in the gap never finished)."""
    lease = 0.4
    assert await store.take_lease(INSTANCE, "killed", 1.0)  # left to lapse
    runtime = runtime_on(bus, store, lease_ttl=lease)
    ran: list[bool] = []

    async def due() -> None:
        ran.append(runtime.active)

    runtime.on_load(lambda: runtime.at(runtime.now() - 1.0, "due", due))
    await runtime.start()
    try:
        assert not runtime.active  # a standby until the killed holder's lease lapses
        await sh.until(lambda: ran, what="the timer due at activation running")
        assert ran == [True]
    finally:
        await runtime.stop()


async def test_a_deleted_durable_is_reported_not_ready_then_created_again_and_consumed(
    counter, bus, store, probe
) -> None:
    """The service's durable deleted while it runs: ``/readyz``'s reasons name it while pulls are
    refused; it is created again and what is published since is handled, once."""
    await tick_all(bus, probe, 3)
    assert await bus.reset_consumer(DURABLE, subjects.DELETE)
    problems = await sh.until(readiness_problems(counter.rt), what="the refused consumer in /readyz")
    assert any(p.startswith(f"consumer {DURABLE}: pull refused") for p in problems), problems
    await tick_all(bus, probe, 4)
    assert (await count(store))[0] == 7 and len(counter.calls) == 7
    await sh.until(lambda: _ready(counter.rt), what="ready again")


def readiness_problems(runtime: Runtime) -> Callable[[], Any]:
    async def problems() -> list[str]:
        return await readiness(runtime)

    return problems


async def _ready(runtime: Runtime) -> bool:
    return await readiness(runtime) == []


# -- after a commit -------------------------------------------------------------------------------------


class PublishFailsOnce:
    """The real bus, except that the first ``publish_many`` after ``arm()`` fails (JetStream did not
    answer in time): the commit is in, its outputs are not out."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.armed = False
        self.failed = 0

    def arm(self) -> None:
        self.armed = True

    async def publish_many(self, messages: Any, **kw: Any) -> Any:
        if self.armed:
            self.armed = False
            self.failed += 1
            first = list(messages)[0]
            raise PublishError(first.subject, first.msg_id, "injected: no answer in time")
        return await self.inner.publish_many(messages, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_outputs_whose_publish_failed_go_out_before_anything_committed_later(bus, store, probe) -> None:
    flaky = PublishFailsOnce(bus)
    async with Running(flaky, store, backoff=[1.0]) as counter:
        flaky.arm()
        first = tick()
        await sh.send(bus, subjects.DELETE, first)
        await sh.until(lambda: flaky.failed == 1, what="the failed publish")
        second = tick()  # handled before the first comes back (its redelivery waits 1 s)
        await sh.send(bus, subjects.DELETE, second)
        await probe.settled(DURABLE, subjects.DELETE, timeout=15)
        assert await count(store) == (2, 2) and counter.counts.get("c") == Count(2, second.event_id)
        assert counter.calls == ["c", "c", "c"]  # the first, the second, the first's redelivery
    order = [sh.ALL_TYPES.decode(m.data).causation_id for m in await probe.messages(subjects.HYPERJOB_DELETED)]
    assert order == [first.event_id, second.event_id]  # in commit order, each once
    # The changelog ends at the latest version: a rebuild gives back what the store held.
    assert await changelog_of(probe) == (2, 2)


async def test_outputs_committed_by_an_instance_that_died_go_out_when_it_restarts(bus, store, probe) -> None:
    flaky = PublishFailsOnce(bus)
    async with Running(flaky, store, backoff=[30.0]) as counter:
        flaky.arm()
        msg = tick()
        await sh.send(bus, subjects.DELETE, msg)
        await sh.until(lambda: flaky.failed == 1, what="the failed publish")
        counter.rt.outbox._unpublished.clear()  # noqa: SLF001 - the process dies: what it held in memory is gone
        assert await probe.messages(subjects.HYPERJOB_DELETED) == []
    async with Running(bus, store, backoff=[30.0]):
        [announced] = await probe.wait(subjects.HYPERJOB_DELETED, events.HyperJobDeleted)
        assert announced.causation_id == msg.event_id
        assert len(await probe.messages(subjects.result(msg.event_id))) == 1
        assert await changelog_of(probe) == (1, 1)
    assert await count(store) == (1, 1)


# -- a wiped store --------------------------------------------------------------------------------------


async def test_a_wiped_store_is_seen_at_the_next_commit_and_rebuilt_from_the_changelog(
    counter, bus, store, probe
) -> None:
    for name in ("c", "c", "c", "d", "gone"):
        await sh.send(bus, subjects.DELETE, tick(name))
        await probe.settled(DURABLE, subjects.DELETE)  # one commit each
    await counter.rt.commit("forget-gone", _forget(counter, "gone"))
    assert (await count(store, "c"), await count(store, "d"), await count(store, "gone")) == ((3, 3), (1, 1), (0, 0))
    assert await store.clear() > 0  # Redis lost everything
    await sh.send(bus, subjects.DELETE, tick("d"))
    await probe.settled(DURABLE, subjects.DELETE)
    assert await store.alive(INSTANCE)
    assert await count(store, "c") == (3, 3)  # back at its version, from the changelog
    assert await count(store, "d") == (2, 2)  # back, then counted on top of what it was
    assert await count(store, "gone") == (0, 0)  # deleted stays deleted
    assert counter.counts.versions == {"c": 3, "d": 2}


async def test_an_instance_starting_on_a_wiped_store_restores_before_it_consumes(bus, store, probe) -> None:
    async with Running(bus, store):
        await sh.send(bus, subjects.DELETE, tick())
        await probe.settled(DURABLE, subjects.DELETE)
    await store.clear()
    async with Running(bus, store) as counter:
        assert counter.counts.get("c") is not None and counter.counts.versions["c"] == 1
        await sh.send(bus, subjects.DELETE, tick())
        await probe.settled(DURABLE, subjects.DELETE)
    assert await count(store) == (2, 2)


async def test_the_changelog_keeps_tombstones_and_restores_nothing_of_another_instance(bus, store, probe) -> None:
    async with Running(bus, store, instance="counter-a"):
        await sh.send(bus, subjects.DELETE, tick("mine"))
        await probe.settled(DURABLE, subjects.DELETE)
    await store.clear()
    other = runtime_on(bus, store, instance="counter-b")
    assert await other.restore_from_changelog() == 0
    assert await count(store, "mine") == (0, 0)
    first = runtime_on(bus, store, instance="counter-a")
    assert await first.restore_from_changelog() == 1
    assert await count(store, "mine") == (1, 1)


# -- watches ----------------------------------------------------------------------------------------------


async def test_watched_values_are_in_before_anything_is_handled(bus, store, probe) -> None:
    for name in ("q1", "q2", "q3"):
        await sh.send(bus, subjects.queue_config(name), sh.message(events.QueueChanged, name=name, state="Open"))
    await sh.send(bus, subjects.DELETE, tick())  # waiting in the stream before the service starts
    async with Running(bus, store) as counter:
        await probe.settled(DURABLE, subjects.DELETE)
        assert counter.seen_queues_at_first_call == {"q1": "Open", "q2": "Open", "q3": "Open"}
        await sh.send(bus, subjects.queue_config("q2"), sh.message(events.QueueChanged, name="q2", state="Closed"))
        await sh.until(lambda: counter.queues.get("q2") == "Closed", what="the new value")


def _forget(counter: Counter, name: str) -> Reaction:
    counter.counts.delete(name)
    return Reaction()


async def test_a_replayed_dead_letter_has_one_effect_and_leaves_the_queue(bus, store, probe) -> None:
    from hyperjob.bus import deadletters  # noqa: PLC0415

    async with Running(bus, store, max_deliver=2) as counter:
        counter.failing.add("late")
        await sh.send(bus, subjects.DELETE, tick("late"))
        await probe.settled(DURABLE, subjects.DELETE)
        [letter] = await deadletters.dead_letters(bus, consumer=DURABLE)
        assert (letter.reason, letter.subject, letter.deliveries) == ("max_deliver", subjects.DELETE, 2)
        counter.failing.clear()  # the cause is fixed
        await deadletters.replay(bus, letter)
        await deadletters.replay(bus, letter)  # again (a retried replay): the letter is gone, nothing happens
        await bus.publish(
            subjects.DELETE, (await probe.messages(subjects.DELETE))[-1].data, msg_id=f"replay.{letter.seq}"
        )
        await probe.settled(DURABLE, subjects.DELETE)
        assert await count(store, "late") == (1, 1)
        assert await deadletters.dead_letters(bus) == []
        assert len(await probe.messages(subjects.HYPERJOB_DELETED)) == 1


async def test_a_running_instance_reports_liveness_and_stops_when_a_consumer_stops(bus, store, tmp_path) -> None:
    import asyncio  # noqa: PLC0415

    from hyperjob.servicekit import liveness  # noqa: PLC0415

    path = tmp_path / "counter.alive"
    async with Running(bus, store) as counter:
        reporter = asyncio.create_task(liveness.run(counter.rt, path, period=0.05))
        try:
            await sh.until(lambda: liveness.fresh(path, max_age=1.0), what="a fresh liveness record")
            assert liveness.main([str(path), "--max-age", "5"]) == 0
            record = liveness.report(counter.rt)
            assert record is not None and record["bus"] == "connected" and record["members"] >= 3
            await counter.rt.members[-1].stop()  # a consumer loop ended: no longer well
            assert liveness.report(counter.rt) is None
            await asyncio.sleep(0.3)
            assert not liveness.fresh(path, max_age=0.2) and liveness.main([str(path), "--max-age", "0.2"]) == 1
        finally:
            reporter.cancel()

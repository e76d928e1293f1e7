"""The store on a Redis Cluster (one node serving every slot, so the cluster's rules apply: the
keys a command or script declares must share a slot). Each instance's keys carry its hash tag, so
a commit's keys are one slot, and different instances land on different slots."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hyperjob.store import Binding, Commit, Output, Unbind, Write
from hyperjob.store.redis_store import RedisStore
from hyperjob.testkit.servers import RedisServer

pytestmark = pytest.mark.service

BOOKER = "cluster-scheduler-a"  # the instance that owns cluster a's kinds and node bookings


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "cluster", cluster=True)
    server.start()
    try:
        server.claim_all_slots()
        yield server
    finally:
        server.stop()


def _slots(url: str, prefix: str) -> dict[str, int]:
    with redis.Redis.from_url(url) as client:
        return {k.decode(): int(client.cluster("KEYSLOT", k)) for k in client.scan_iter(match=f"{prefix}:*")}


def _slot_of(url: str, tag: str) -> int:
    with redis.Redis.from_url(url) as client:
        return int(client.cluster("KEYSLOT", f"{{{tag}}}"))


async def _book_and_release(store: RedisStore) -> None:
    """What the cluster-scheduler of cluster a commits: its kinds, markers, bookings, outbox."""
    await store.mark_alive(BOOKER)
    await store.set_nodes_allocatable("a", {"n1": {"cpu": 4.0}, "n2": {"cpu": 4.0}})
    booked = await store.commit(
        Commit(
            consumer=f"{BOOKER}-admin",
            event_ids=["e1", "e2"],
            writes=[Write.put("pgphase@a", "g", {"phase": "bound"}), Write.put("reservation@a", "g", {})],
            binds=[Binding("a", "p0", "n1", {"cpu": 3.0}), Binding("a", "p1", "n2", {"cpu": 1.0})],
            outputs=[Output(subject="s", msg_id="m1", payload=b"")],
            sentinel=BOOKER,
            outbox=BOOKER,
            outbox_key=f"o:{BOOKER}:1",
        )
    )
    assert booked.ok, booked
    released = await store.commit(
        Commit(
            consumer=BOOKER,
            event_ids=["e3"],
            writes=[Write.delete("reservation@a", "g")],
            unbinds=[Unbind("a", "p0")],
            binds=[Binding("a", "p2", "n1", {"cpu": 2.0})],
            sentinel=BOOKER,
            outbox=BOOKER,
            published=[f"o:{BOOKER}:1"],
        )
    )
    assert released.ok, released


async def test_one_instances_commits_run_on_a_redis_cluster_within_its_slot(cluster: RedisServer) -> None:
    store = RedisStore(cluster.url, "rc")
    try:
        await _book_and_release(store)
        usage = await store.nodes("a")
        seen = await store.seen(f"{BOOKER}-admin", ["e1", "e2"], BOOKER)
        assert (await store.commit(Commit(consumer=BOOKER, event_ids=["e3"], sentinel=BOOKER))).refusal == "duplicate"
        assert await store.take_lease(BOOKER, "me", 5.0)
    finally:
        await store.close()
    assert {n: u.used for n, u in usage.items()} == {"n1": {"cpu": 2.0}, "n2": {"cpu": 1.0}}
    assert seen == {"e1": [], "e2": []}  # handled; their outputs went out (published) and are forgotten
    slots = _slots(cluster.url, "rc")
    assert len(slots) >= 9  # documents, versions, markers, bookings, usage, nodes, sentinel, lease
    assert set(slots.values()) == {_slot_of(cluster.url, BOOKER)}, slots


async def test_instances_spread_over_slots(cluster: RedisServer) -> None:
    store = RedisStore(cluster.url, "sp")
    try:
        for instance, kind in (("splitter", "hyperjob"), ("job-controller-a", "job@a")):
            await store.mark_alive(instance)
            commit = Commit(consumer=instance, event_ids=["e"], writes=[Write.put(kind, "x", {})], sentinel=instance)
            assert (await store.commit(commit)).ok
        assert set(await store.list("job@a")) == {"x"}
    finally:
        await store.close()
    slots = set(_slots(cluster.url, "sp").values())
    assert slots == {_slot_of(cluster.url, "splitter"), _slot_of(cluster.url, "job-controller-a")}
    assert len(slots) == 2


@pytest.fixture(autouse=True, scope="module")
def _collect_what_a_failover_left() -> Iterator[None]:
    """Connections a killed server left half-open are collected here, not in a later test (whose
    warnings-as-errors would fail it on their ResourceWarning)."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()

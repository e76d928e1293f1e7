"""What only the real Redis store can show: key layout and TTLs, separate clients racing, a FLUSHALL
from outside seen through the sentinel, AOF durability across a restart, and error translation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from hyperjob.store import Binding, Commit, Output, StoreUnavailableError, Unbind, Write
from hyperjob.store.redis_store import MARKER_TTL, RedisStore
from hyperjob.testkit.isolation import open_redis_store
from hyperjob.testkit.servers import RedisServer

pytestmark = pytest.mark.service


async def _keys_and_ttls(url: str, prefix: str) -> dict[str, int]:
    client = aioredis.Redis.from_url(url)
    try:
        keys = sorted([k.decode() async for k in client.scan_iter(match=f"{prefix}:*")])
        return {k: await client.ttl(k) for k in keys}
    finally:
        await client.aclose()


async def test_markers_and_recorded_outputs_expire_and_everything_lives_under_the_prefix(
    store: RedisStore, redis_url, key_prefix
) -> None:
    await store.mark_alive("splitter")
    result = await store.commit(
        Commit(
            consumer="splitter",
            event_ids=["evt-9"],
            writes=[Write.put("hyperjob", "h", {})],
            outputs=[Output(subject="s", msg_id="m", payload=b"")],
            sentinel="splitter",
            outbox="splitter",
            outbox_key="o:splitter:evt-9",
        )
    )
    assert result.ok
    ttls = await _keys_and_ttls(redis_url, key_prefix)
    p = key_prefix
    # every key of the instance carries its hash tag (one Redis Cluster slot per instance)
    i = f"{p}:{{splitter}}"
    assert sorted(ttls) == [
        f"{i}:alive",
        f"{i}:d:hyperjob",
        f"{i}:m:splitter:evt-9",
        f"{i}:o:splitter:evt-9",
        f"{i}:outbox",
        f"{i}:v:hyperjob",
    ]
    for expiring in (f"{i}:m:splitter:evt-9", f"{i}:o:splitter:evt-9"):
        assert MARKER_TTL - 5 <= ttls[expiring] <= MARKER_TTL
    for lasting in (f"{i}:alive", f"{i}:d:hyperjob", f"{i}:outbox"):
        assert ttls[lasting] == -1  # documents, sentinels and the outbox never expire


async def test_two_scheduler_replicas_on_separate_connections_never_oversubscribe(redis_url, key_prefix) -> None:
    async with open_redis_store(redis_url, key_prefix) as a, open_redis_store(redis_url, key_prefix) as b:
        await a.set_node_allocatable("c1", "n1", {"nvidia.com/gpu": 8.0, "cpu": 96.0})

        async def gang(store: RedisStore, i: int) -> bool:
            pods = [
                Binding("c1", f"j{i}-{k}", "n1", {"nvidia.com/gpu": 1.0, "cpu": 4.0, "pods": 1.0}) for k in range(3)
            ]
            return (await store.commit(Commit(consumer=f"cycle-{i}", binds=pods))).ok

        results = await asyncio.gather(*(gang(a if i % 2 else b, i) for i in range(30)))
        usage = (await a.nodes("c1"))["n1"]
        assert sum(results) == 2  # 8 GPUs hold two gangs of three, never a third
        assert usage.used["nvidia.com/gpu"] == 6.0 and len(await b.allocations("c1")) == 6


async def test_a_flushall_from_outside_is_seen_at_the_next_commit() -> None:
    with RedisServer() as server:  # its own server: FLUSHALL wipes every prefix
        async with open_redis_store(server.url, "p", cleanup=False) as store:
            await store.mark_alive("job-controller-c1")
            assert (await store.commit(Commit(writes=[Write.put("job@c1", "j", {})], sentinel="job-controller-c1"))).ok
            client = aioredis.Redis.from_url(server.url)
            try:
                await client.flushall()
            finally:
                await client.aclose()
            result = await store.commit(Commit(writes=[Write.put("job@c1", "j", {}, 1)], sentinel="job-controller-c1"))
    assert result.refusal == "wiped"  # not a version conflict: the instance must restore, not retry


async def test_state_survives_a_restart_with_append_only_file(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=True)
    server.start()
    port = server.port
    try:
        async with open_redis_store(server.url, "p", cleanup=False) as s:
            await s.mark_alive("i")
            await s.set_node_allocatable("c1", "n1", {"cpu": 2.0})
            assert (
                await s.commit(
                    Commit(
                        consumer="c",
                        event_ids=["e"],
                        writes=[Write.put("job", "a", {"x": 1})],
                        binds=[Binding("c1", "p0", "n1", {"cpu": 1.5})],
                        sentinel="i",
                        outputs=[Output(subject="s", msg_id="m", payload=b"")],
                        outbox="i",
                        outbox_key="o:i:e",
                    )
                )
            ).ok
        server.stop()
        server = RedisServer(tmp_path / "redis", port=port, appendonly=True)
        server.start()
        async with open_redis_store(server.url, "p", cleanup=False) as s:
            assert await s.alive("i")
            assert (await s.get("job", "a")).version == 1
            assert (await s.commit(Commit(consumer="c", event_ids=["e"], sentinel="i"))).refusal == "duplicate"
            assert await s.seen("c", ["e"], "i") == {"e": [Output(subject="s", msg_id="m", payload=b"")]}
            assert [k for k, _ in await s.outbox("i")] == ["o:i:e"]
            assert (await s.nodes("c1"))["n1"].used == {"cpu": 1.5}
    finally:
        server.stop()


async def test_unreachable_redis_raises_store_unavailable() -> None:
    with RedisServer() as server:
        url = server.url
    s = RedisStore(url, "p")
    try:
        with pytest.raises(StoreUnavailableError):
            await s.get("job", "a")
        with pytest.raises(StoreUnavailableError):
            await s.commit(Commit(writes=[Write.put("job", "a", {})]))
        with pytest.raises(StoreUnavailableError):
            await s.alive("i")
        with pytest.raises(StoreUnavailableError):
            await RedisStore.connect(url, "p")
    finally:
        await s.close()


async def test_one_store_instance_carries_on_after_redis_restarts(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=True)
    server.start()
    port = server.port
    s = RedisStore(server.url, "p")
    try:
        await s.set_node_allocatable("c1", "n1", {"cpu": 4.0})
        assert (await s.commit(Commit(consumer="c", event_ids=["e1"], writes=[Write.put("job", "a", {})]))).ok
        await asyncio.to_thread(server.stop)
        server = RedisServer(tmp_path / "redis", port=port, appendonly=True)
        await asyncio.to_thread(server.start)
        # The script cache is empty after a restart: EVALSHA falls back to loading the script.
        result = None
        for _ in range(20):
            try:
                result = await s.commit(
                    Commit(consumer="c", event_ids=["e2"], writes=[Write.put("job", "a", {"n": 2}, 1)])
                )
                break
            except StoreUnavailableError:
                await asyncio.sleep(0.1)
        assert result is not None and result.ok and result.versions == [2]
        assert (await s.commit(Commit(consumer="c", event_ids=["e1"]))).refusal == "duplicate"
        assert (await s.commit(Commit(binds=[Binding("c1", "p", "n1", {"cpu": 4.0})]))).ok
        assert (await s.commit(Commit(unbinds=[Unbind("c1", "p")]))).ok
    finally:
        await s.close()
        server.stop()


async def test_a_connection_the_server_closed_is_opened_again_without_failing_the_caller(redis_url, key_prefix) -> None:
    """``hyperjob user add`` reloads Redis' ACL, which closes the connections of the users it
    redefines: the dashboard's next read then failed (its /metrics answered 500)."""
    async with open_redis_store(redis_url, key_prefix) as store:
        await store.commit(Commit(consumer="c", event_ids=["e1"], writes=[Write(kind="k", name="n", data=b"1")]))
        own = await store._r.client_id()  # this store's connection only: the server is shared
        admin = aioredis.Redis.from_url(redis_url)
        try:
            assert await admin.client_kill_filter(_id=own) == 1
        finally:
            await admin.aclose()
        assert (await store.list("k")).keys() == {"n"}

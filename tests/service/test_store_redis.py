"""What only the real Redis store can show: key layout and TTLs, separate clients racing, AOF
durability across a restart, and error translation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from store import MARKER_TTL, RedisStore, StoreUnavailableError, Write
from testkit.isolation import open_redis_store
from testkit.servers import RedisServer

pytestmark = pytest.mark.service


async def test_apply_marker_has_the_ttl_and_lives_under_the_prefix(store: RedisStore, redis_url, key_prefix) -> None:
    await store.apply("splitter", "evt-9", [Write.put("hyperjob", "h", {})], [("s", "m", b"")])
    client = aioredis.Redis.from_url(redis_url)
    try:
        ttl = await client.ttl(f"{key_prefix}:processed:splitter:evt-9")
        keys = sorted([k.decode() async for k in client.scan_iter(match=f"{key_prefix}:*")])
    finally:
        await client.aclose()
    assert MARKER_TTL - 5 <= ttl <= MARKER_TTL
    assert keys == [f"{key_prefix}:d:hyperjob", f"{key_prefix}:processed:splitter:evt-9", f"{key_prefix}:v:hyperjob"]


async def test_two_scheduler_replicas_racing_on_one_node_never_oversubscribe(redis_url, key_prefix) -> None:
    async with open_redis_store(redis_url, key_prefix) as a, open_redis_store(redis_url, key_prefix) as b:
        await a.set_node_allocatable("c1", "n1", {"nvidia.com/gpu": 8.0, "cpu": 96.0})

        async def gang(store: RedisStore, i: int) -> bool:
            pods = [(f"j{i}-{k}", "n1", {"nvidia.com/gpu": 1.0, "cpu": 4.0, "pods": 1.0}) for k in range(3)]
            return (await store.bind_gang("c1", pods)).ok

        results = await asyncio.gather(*(gang(a if i % 2 else b, i) for i in range(30)))
        usage = await a.node_usage("c1", "n1")
        assert sum(results) == 2  # 8 GPUs hold two gangs of three, never a third
        assert usage.used["nvidia.com/gpu"] == 6.0 and len(await b.allocations("c1")) == 6


async def test_state_survives_a_restart_with_append_only_file(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=True)
    server.start()
    port = server.port
    try:
        async with open_redis_store(server.url, "p", cleanup=False) as s:
            await s.apply("c", "e", [Write.put("job", "a", {"x": 1})], [("s", "m", b"")])
            await s.set_node_allocatable("c1", "n1", {"cpu": 2.0})
            assert (await s.bind_gang("c1", [("p0", "n1", {"cpu": 1.5})])).ok
        server.stop()
        server = RedisServer(tmp_path / "redis", port=port, appendonly=True)
        server.start()
        async with open_redis_store(server.url, "p", cleanup=False) as s:
            assert (await s.get("job", "a")).version == 1
            assert (await s.apply("c", "e", [])).duplicate
            assert (await s.node_usage("c1", "n1")).used == {"cpu": 1.5}
    finally:
        server.stop()


async def test_unreachable_redis_raises_store_unavailable(tmp_path: Path) -> None:
    with RedisServer() as server:
        url = server.url
    s = RedisStore(url, "p")
    try:
        with pytest.raises(StoreUnavailableError):
            await s.get("job", "a")
        with pytest.raises(StoreUnavailableError):
            await s.apply("c", "e", [Write.put("job", "a", {})])
    finally:
        await s.close()


async def test_one_store_instance_carries_on_after_redis_restarts(tmp_path: Path) -> None:
    from store import ApplyItem  # noqa: PLC0415

    server = RedisServer(tmp_path / "redis", appendonly=True)
    server.start()
    port = server.port
    s = RedisStore(server.url, "p")
    try:
        await s.set_node_allocatable("c1", "n1", {"cpu": 4.0})
        assert (await s.apply("c", "e1", [Write.put("job", "a", {})])).ok
        await asyncio.to_thread(server.stop)
        server = RedisServer(tmp_path / "redis", port=port, appendonly=True)
        await asyncio.to_thread(server.start)
        # The script cache is empty after a restart: EVALSHA falls back to loading the script.
        result = None
        for _ in range(20):
            try:
                result = await s.apply("c", "e2", [Write.put("job", "a", {"n": 2}, 1)])
                break
            except StoreUnavailableError:
                await asyncio.sleep(0.1)
        assert result is not None and result.ok and result.versions == [2]
        assert (await s.apply_many("c", [ApplyItem(event_id="e1"), ApplyItem(event_id="e3")]))[0].duplicate
        assert (await s.bind_gang("c1", [("p", "n1", {"cpu": 4.0})])).ok
    finally:
        await s.close()
        server.stop()

"""A primary, two replicas and Sentinel (the pip-installed ``redis-server``, run ``--sentinel``): the
primary is killed while writers commit, Sentinel promotes a replica, the store follows it, and
every acknowledged commit is there exactly once. Each commit waits for one replica (the store's
default with Sentinel), so after the failover the other replica keeps commits confirmable."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import redis.asyncio as aioredis

from hyperjob.store import Commit, StoreUnavailableError, Write
from hyperjob.store.redis_store import RedisStore, parse_sentinel_url, sentinel_url
from hyperjob.testkit.servers import RedisSentinel, RedisServer
from hyperjob.testkit.waiting import until

pytestmark = pytest.mark.service

_WRITERS = 2
_EVENTS_PER_WRITER = 150
_KILL_AFTER = 60  # acknowledged commits before the primary dies


class Tally(msgspec.Struct):
    count: int = 0


class Trio(msgspec.Struct, frozen=True):
    primary: RedisServer
    replicas: tuple[RedisServer, RedisServer]
    sentinel: RedisSentinel


@pytest.fixture
def trio(tmp_path: Path) -> Iterator[Trio]:
    primary = RedisServer(tmp_path / "primary")
    primary.start()
    assert primary.port is not None
    replicas = (
        RedisServer(tmp_path / "replica-1", replica_of=primary.port),
        RedisServer(tmp_path / "replica-2", replica_of=primary.port),
    )
    sentinel = RedisSentinel(tmp_path / "sentinel", primary.port)
    try:
        for server in (*replicas, sentinel):
            server.start()
        yield Trio(primary=primary, replicas=replicas, sentinel=sentinel)
    finally:
        for server in (sentinel, *replicas, primary):
            server.stop()


async def _info(url: str, section: str) -> dict[str, object]:
    client = aioredis.Redis.from_url(url)
    try:
        return dict(await client.info(section))
    finally:
        await client.aclose()


async def _sentinel_sees_replica(trio: Trio) -> None:
    await until(lambda: _info(trio.primary.url, "replication"), lambda i: i.get("connected_slaves") == 2)
    client = aioredis.Redis.from_url(trio.sentinel.url)
    try:
        await until(lambda: client.sentinel_slaves(trio.sentinel.master), lambda r: len(r) == 2, timeout=20)
    finally:
        await client.aclose()


async def _commit_one(store: RedisStore, writer: str, n: int) -> None:
    """What a handler does for event ``writer-n``: read, decide, commit with its marker; a store
    that does not answer (the failover) or a version conflict is retried, as a redelivery would be."""
    event = f"{writer}-{n}"
    while True:
        try:
            tally = await store.get("tally", writer)
            count = tally.decode(Tally).count if tally is not None else 0
            result = await store.commit(
                Commit(
                    consumer=writer,
                    event_ids=[event],
                    writes=[
                        Write.put("item", event, {"writer": writer}, 0),
                        Write.put("tally", writer, Tally(count + 1), tally.version if tally else 0),
                    ],
                )
            )
        except StoreUnavailableError:
            await asyncio.sleep(0.05)
            continue
        if result.ok or result.refusal == "duplicate":
            return
        assert result.refusal == "conflict", result


async def _writer(store: RedisStore, writer: str, acknowledged: list[str]) -> None:
    for n in range(_EVENTS_PER_WRITER):
        await _commit_one(store, writer, n)
        acknowledged.append(f"{writer}-{n}")


def test_a_sentinel_url_names_the_sentinels_the_primary_and_the_replicas_to_wait_for() -> None:
    target = parse_sentinel_url("redis+sentinel://svc:pw@10.0.0.1:26379,10.0.0.2:26380/hyperjob?replicas=2")
    assert target.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26380))
    assert (target.master, target.username, target.password, target.replicas) == ("hyperjob", "svc", "pw", 2)
    assert parse_sentinel_url(sentinel_url([("h", 1)], "m")).replicas == 1


async def test_the_primary_killed_under_load_loses_and_doubles_nothing_acknowledged(trio: Trio) -> None:
    await _sentinel_sees_replica(trio)
    assert trio.sentinel.port is not None
    store = RedisStore(sentinel_url([(trio.sentinel.host, trio.sentinel.port)], trio.sentinel.master), "fo")
    acknowledged: list[str] = []
    try:
        writers = [asyncio.create_task(_writer(store, f"w{i}", acknowledged)) for i in range(_WRITERS)]
        # a writer that failed ends the wait at once (gather below raises its error)
        await until(
            lambda: asyncio.sleep(0, len(acknowledged)),
            lambda n: n >= _KILL_AFTER or any(w.done() for w in writers),
        )
        killed_at = len(acknowledged)
        trio.primary.kill()
        await asyncio.wait_for(asyncio.gather(*writers), timeout=60)
    finally:
        await store.close()

    roles = [(await _info(r.url, "replication"))["role"] for r in trio.replicas]
    assert sorted(roles) == ["master", "slave"]  # the store reached the end through the promoted replica
    assert killed_at < _WRITERS * _EVENTS_PER_WRITER
    survivor = RedisStore(trio.replicas[roles.index("master")].url, "fo")
    try:
        items = await survivor.list("item")
        tallies = {w: (await survivor.get("tally", w)) for w in (f"w{i}" for i in range(_WRITERS))}
        seen = await survivor.seen("w0", [e for e in acknowledged if e.startswith("w0-")])
    finally:
        await survivor.close()
    assert sorted(items) == sorted(acknowledged)  # nothing acknowledged lost
    for writer, tally in tallies.items():
        assert tally is not None
        # one effect per event: the count and the version say each commit applied once
        assert tally.decode(Tally).count == tally.version == _EVENTS_PER_WRITER, writer
    assert len(seen) == _EVENTS_PER_WRITER


async def test_a_commit_no_replica_holds_is_not_acknowledged(trio: Trio) -> None:
    """Replication is asynchronous: without the replica's confirmation (``WAIT``) the primary's
    "ok" could die with it. Replicas that cannot answer leave the commit unconfirmed: it raises,
    so its handler does not ack and the redelivery's markers decide (one effect either way)."""
    await _sentinel_sees_replica(trio)
    assert trio.sentinel.port is not None
    store = RedisStore(sentinel_url([(trio.sentinel.host, trio.sentinel.port)], trio.sentinel.master), "nw")
    frozen = [r.pid for r in trio.replicas]
    try:
        assert (await store.commit(Commit(consumer="c", event_ids=["e0"], writes=[Write.put("item", "a", {})]))).ok
        for pid in frozen:
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
        with pytest.raises(StoreUnavailableError, match="replicas"):
            await store.commit(Commit(consumer="c", event_ids=["e1"], writes=[Write.put("item", "b", {})]))
    finally:
        for pid in frozen:
            if pid is not None:
                os.kill(pid, signal.SIGCONT)
        await store.close()


@pytest.fixture(autouse=True, scope="module")
def _collect_what_a_failover_left() -> Iterator[None]:
    """Connections a killed server left half-open are collected here, not in a later test (whose
    warnings-as-errors would fail it on their ResourceWarning)."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()

"""A bus and a store that leave nothing behind: used by the service-test fixtures and by any test
that needs its own (e.g. two "replicas" of a service against one server).

``open_nats_bus`` deletes the namespace's streams on exit; ``open_redis_store`` deletes every key
under its prefix. Both close their connections.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable

import nats
import redis.asyncio as aioredis

from hyperjob.bus import StreamSpec
from hyperjob.bus.natsbus import NatsBus
from hyperjob.events.subjects import StreamDecl
from hyperjob.store.redis_store import RedisStore

__all__ = ["delete_keys", "delete_streams", "new_namespace", "open_nats_bus", "open_redis_store"]


def new_namespace() -> str:
    """A fresh name usable as a subject token, stream-name prefix and key prefix."""
    return f"t{uuid.uuid4().hex[:12]}"


async def delete_streams(url: str, namespace: str) -> None:
    """Delete every stream named ``<namespace>_*``."""
    nc = await nats.connect(url)
    try:
        jsm = nc.jetstream()
        for info in await jsm.streams_info():
            if info.config.name and info.config.name.startswith(f"{namespace}_"):
                await jsm.delete_stream(info.config.name)
    finally:
        await nc.close()


async def delete_keys(url: str, prefix: str) -> None:
    """Delete every Redis key ``<prefix>:*``."""
    client = aioredis.Redis.from_url(url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
        for i in range(0, len(keys), 1000):
            await client.delete(*keys[i : i + 1000])
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def open_nats_bus(
    url: str, namespace: str, streams: Iterable[StreamSpec | StreamDecl] = (), *, cleanup: bool = True
) -> AsyncIterator[NatsBus]:
    """A ``NatsBus`` in ``namespace`` with ``streams`` declared; its streams are deleted on exit."""
    bus = await NatsBus.connect(url, streams, namespace=namespace, name=f"test-{namespace}")
    try:
        yield bus
    finally:
        await bus.close()
        if cleanup:
            await delete_streams(url, namespace)


@contextlib.asynccontextmanager
async def open_redis_store(url: str, prefix: str, *, cleanup: bool = True) -> AsyncIterator[RedisStore]:
    """A ``RedisStore`` under ``prefix``; its keys are deleted on exit."""
    store = RedisStore(url, prefix)
    try:
        yield store
    finally:
        await store.close()
        if cleanup:
            await delete_keys(url, prefix)

"""Redis ACL users from ``store.acl`` on a real redis-server: each service's store user commits its
own documents and markers, and Redis itself refuses a write to another service's documents or
to node bookings that are not its own — also from inside the commit script — while the CLI's
user reads and cannot write."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from hyperjob.store import Binding, Commit, Write
from hyperjob.store.acl import redis_acl
from hyperjob.store.redis_store import RedisStore
from hyperjob.testkit.isolation import delete_keys, new_namespace

pytestmark = pytest.mark.service

NODE = {"cpu": 8.0, "pods": 10.0}


@pytest.fixture
async def users(redis_url: str) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """A key prefix and the store URL of each user: job-controller-a, cluster-scheduler-a, the CLI's."""
    prefix = new_namespace()
    admin = aioredis.Redis.from_url(redis_url)
    urls: dict[str, str] = {}
    for name, role, cluster in (
        ("job-controller-a", "job-controller", "a"),
        ("cluster-scheduler-a", "cluster-scheduler", "a"),
        (f"user-{prefix}", "user", ""),
    ):
        password = secrets.token_hex(16)
        await admin.execute_command("ACL", "SETUSER", name, *redis_acl(role, password, prefix=prefix, cluster=cluster))
        urls[name] = redis_url.replace("redis://", f"redis://{name}:{password}@", 1)
    yield prefix, urls
    for name in urls:
        await admin.execute_command("ACL", "DELUSER", name)
    await admin.aclose()
    await delete_keys(redis_url, prefix)


async def refused(store: RedisStore, commit: Commit) -> bool:
    """Redis refused the commit for want of permission (not a conflict or a full node)."""
    try:
        await store.commit(commit)
    except Exception as exc:  # noqa: BLE001 - the store wraps Redis's answer; its text says why
        return "NOPERM" in str(exc) or "can't access" in str(exc) or "no permissions" in str(exc)
    return False


async def test_a_service_writes_its_own_documents_and_nothing_else(users: Any) -> None:
    prefix, urls = users
    store = RedisStore(urls["job-controller-a"], prefix)
    try:
        own = Commit(consumer="job-controller-a", event_ids=["e1"], writes=[Write.put("job@a", "j1", {"n": 1})])
        assert (await store.commit(own)).ok
        assert await refused(store, Commit(consumer="job-controller-a", writes=[Write.put("hyperjob", "x", {})]))
        assert await refused(store, Commit(consumer="job-controller-a", writes=[Write.put("job@b", "x", {})]))
        assert await refused(store, Commit(consumer="splitter", event_ids=["e2"]))  # another's markers
        assert await refused(store, Commit(binds=[Binding("a", "p", "n1", dict(NODE))]))  # not a booker
    finally:
        await store.close()
    reader = RedisStore(urls[next(u for u in urls if u.startswith("user-"))], prefix)
    try:
        assert (await reader.get("job@a", "j1")) is not None  # the CLI reads
        assert await reader.get("hyperjob", "x") is None  # nothing of the refused writes landed
        assert await refused(reader, Commit(writes=[Write.put("job@a", "j2", {})]))
    finally:
        await reader.close()


async def test_the_cluster_scheduler_books_its_own_cluster_only(users: Any) -> None:
    prefix, urls = users
    store = RedisStore(urls["cluster-scheduler-a"], prefix)
    try:
        await store.set_node_allocatable("a", "n1", NODE)
        assert (await store.commit(Commit(binds=[Binding("a", "p", "n1", {"cpu": 1.0})]))).ok
        assert await refused(store, Commit(binds=[Binding("b", "p", "n1", {"cpu": 1.0})]))
        with pytest.raises(Exception, match="(?i)noperm|permission"):
            await store.set_node_allocatable("b", "n1", NODE)
    finally:
        await store.close()

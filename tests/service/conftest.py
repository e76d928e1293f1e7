"""Service-test fixtures: one real ``nats-server -js`` and one real ``redis-server`` per session,
and per test a fresh bus namespace (stream names and subjects) and Redis key prefix.

- ``nats_url`` / ``redis_url`` (session): ``NATS_URL`` / ``REDIS_URL`` from the environment if set,
  else servers started from the pip wheels under pytest's tmp dir and stopped at session end.
- ``namespace`` / ``key_prefix`` (function): unique per test; ``bus`` prefixes every subject with
  ``<namespace>.`` and every stream name with ``<namespace>_`` on the wire, so tests use the real
  subject names (``events.subjects``) without seeing each other.
- ``bus``: a connected ``NatsBus`` with every stream of ``events.subjects.STREAMS`` declared;
  ``store``: a ``RedisStore`` under ``key_prefix``. Both are closed and their streams/keys deleted
  after the test.
- ``probe``: a ``service_helpers.Probe`` over the test's namespace (what was published, settled).

Every test collected under ``tests/service`` gets the ``service`` marker.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hyperjob.bus.natsbus import NatsBus
from hyperjob.store.redis_store import RedisStore
from hyperjob.testkit.isolation import new_namespace, open_nats_bus, open_redis_store
from hyperjob.testkit.servers import NatsServer, RedisServer

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.service)


@pytest.fixture(scope="session")
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a JetStream-enabled NATS server for the whole session."""
    if os.environ.get("NATS_URL"):
        yield os.environ["NATS_URL"]
        return
    with NatsServer(tmp_path_factory.mktemp("nats")) as server:
        yield server.url


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a Redis server for the whole session (nothing persisted)."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


@pytest.fixture
def namespace() -> str:
    """A fresh subject/stream-name prefix (letters and digits only)."""
    return new_namespace()


@pytest.fixture
def key_prefix() -> str:
    """A fresh Redis key prefix."""
    return new_namespace()


@pytest.fixture
async def bus(nats_url: str, namespace: str) -> AsyncIterator[NatsBus]:
    """A ``NatsBus`` in ``namespace`` with the catalogue's streams declared."""
    from hyperjob.events.subjects import STREAMS  # noqa: PLC0415 - the catalogue is another package's

    async with open_nats_bus(nats_url, namespace, STREAMS) as instance:
        yield instance


@pytest.fixture
async def store(redis_url: str, key_prefix: str) -> AsyncIterator[RedisStore]:
    """A ``RedisStore`` under ``key_prefix``."""
    async with open_redis_store(redis_url, key_prefix) as instance:
        yield instance


@pytest.fixture
async def probe(nats_url: str, namespace: str) -> AsyncIterator[object]:
    """A ``service_helpers.Probe``: reads what JetStream stored in ``namespace``, over its own connection."""

    from tests.service import service_helpers

    instance = await service_helpers.probe_for(nats_url, namespace)
    yield instance
    await instance.close()

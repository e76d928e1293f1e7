"""Redis is a projection of the log (ADR 0004 §4), shown on real NATS and Redis: the whole system
runs a workload; mid-run Redis loses everything (``FLUSHALL``); each instance finds out at its next
commit (its sentinel is gone), puts its documents back from its changelog
(``state.<instance>.<kind>.<name>``), reloads, and carries on. The run finishes with nothing lost
or doubled: every job reaches the phase it reaches without the wipe, no pod is started twice, and
no node's bookings ever exceed its allocatable."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import structlog.testing

import events
import records
from events import subjects
from store.redis_store import RedisStore
from testkit.isolation import open_redis_store
from testkit.servers import RedisServer

sys.path.insert(0, str(Path(__file__).parent))
import service_helpers as sh  # noqa: E402

pytestmark = pytest.mark.service

CLUSTERS = ("c1", "c2")
HYPERJOBS = {f"hj{i}": {"c1": 2, "c2": 2} for i in range(3)}
JOBS = {f"job{i}": 2 for i in range(4)}  # 2 pods x 4 GPUs each


@pytest.fixture
async def own_redis(tmp_path: Path) -> AsyncIterator[tuple[str, RedisStore]]:
    """A Redis of the test's own: FLUSHALL wipes every prefix of a server."""
    with RedisServer(tmp_path / "redis") as server:
        async with open_redis_store(server.url, "hj", cleanup=False) as store:
            yield server.url, store


class Bookings:
    """Watches every node's bookings in the store while the run goes on."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self.samples = 0
        self.over: list[tuple[str, str, dict[str, float], dict[str, float]]] = []
        self.stopping = False

    async def run(self) -> None:
        # Stopped by a flag, not cancelled: a cancellation that lands inside a redis-py call can
        # be swallowed, and the task would never end.
        while not self.stopping:
            for c in CLUSTERS:
                for node, usage in (await self.store.nodes(c)).items():
                    if any(a > usage.allocatable.get(r, a) + 1e-9 for r, a in usage.used.items()):
                        self.over.append((c, node, usage.used, usage.allocatable))
            self.samples += 1
            await asyncio.sleep(0.02)


async def apply(bus: Any, probe: sh.Probe, manifest: dict[str, Any]) -> None:
    msg = sh.apply(manifest)
    await sh.send(bus, subjects.APPLY, msg)
    [answer] = await probe.wait(subjects.result(msg.event_id))
    assert isinstance(answer, events.RequestAccepted), answer


async def started_pods(probe: sh.Probe) -> list[events.PodStart]:
    return [p for c in CLUSTERS for m in await probe.decoded(subjects.start_pods(c), events.StartPods) for p in m.pods]


async def completed(probe: sh.Probe) -> set[str]:
    return {m.job for c in CLUSTERS for m in await probe.decoded(subjects.job_phase(c), events.JobPhaseChanged)
            if m.new == "Completed"}


async def test_a_wiped_redis_is_rebuilt_from_the_changelogs_and_the_run_finishes_with_nothing_lost_or_doubled(
        bus, probe, own_redis) -> None:
    url, store = own_redis
    bookings = Bookings(store)
    with structlog.testing.capture_logs() as logs:
        async with sh.Fleet(bus, store, CLUSTERS, nodes=2):
            watcher = asyncio.create_task(bookings.run())
            await apply(bus, probe, sh.queue_manifest("global-ai"))
            for name, split in HYPERJOBS.items():
                await apply(bus, probe, sh.hyperjob_manifest(name, split, queue="global-ai", duration="2s"))
            for name, replicas in JOBS.items():
                await apply(bus, probe, sh.job_manifest(name, replicas=replicas, gpu="4", duration="1.5s"))
            # Mid-run: some pods have started, nothing has finished yet.
            await sh.until(lambda: _count(started_pods(probe), 4), what="pods started", timeout=30)
            assert not await completed(probe)
            client = aioredis.Redis.from_url(url)
            try:
                await client.flushall()
            finally:
                await client.aclose()
            wiped_at = len(logs)
            expected = set(JOBS) | {f"{name}-job-{i}" for name in HYPERJOBS for i in range(2)}
            await sh.until(lambda: _superset(completed(probe), expected), what="every job Completed", timeout=60)
            for name in HYPERJOBS:
                await sh.doc(store, records.HYPERJOB_STATUS, name, records.HyperJobStatusDoc, timeout=30,
                             where=lambda d: d.phase == "Completed")
            for c in CLUSTERS:
                await sh.until(lambda c=c: _no_bindings(store, c), what=f"no bindings left in {c}", timeout=30)
            instances = sorted(fleet_instances())
            alive = {i: await store.alive(i) for i in instances}
            bookings.stopping = True
            await watcher

    # Each instance that had something to commit after the wipe found its sentinel gone and restored.
    restored = {e["instance"]: e["documents"] for e in logs[wiped_at:] if e["event"] == "state_restored_from_changelog"}
    assert {"splitter", "global-scheduler", "cluster-scheduler-c1", "job-controller-c1"} <= set(restored), restored
    assert all(alive[i] for i in restored), alive
    # Nothing doubled: each pod started once (one incarnation), reported Running and Succeeded once.
    pods = await started_pods(probe)
    assert len(pods) == 2 * len(JOBS) + 4 * len(HYPERJOBS)
    assert max(Counter(p.pod for p in pods).values()) == 1
    for c in CLUSTERS:
        reports = [r for m in await probe.decoded(subjects.pod_phases(c), events.PodPhasesReported) for r in m.reports]
        assert max(Counter((r.pod, r.phase) for r in reports).values()) == 1
        bound: dict[str, str] = {}
        for msg in await probe.decoded(subjects.pods_bound(c), events.PodsBound):
            for ref in msg.pods:
                assert bound.setdefault(ref.pod, ref.node) == ref.node  # never bound to two nodes
    # Nothing overbooked, at any moment the watcher looked.
    assert bookings.samples > 10 and bookings.over == []
    # Nothing lost: every job ended as it ends without the wipe, and nothing went to a dead-letter queue.
    assert await completed(probe) == expected
    assert await probe.messages("dlq.>") == []


def fleet_instances() -> list[str]:
    return [instance for _, _, _, instance in sh.Fleet(None, None, CLUSTERS).plans()]


async def _count(found: Any, at_least: int) -> bool:
    return len(await found) >= at_least


async def _superset(found: Any, expected: set[str]) -> bool:
    return expected <= await found


async def _no_bindings(store: RedisStore, cluster: str) -> bool:
    return await store.allocations(cluster) == {}


"""Redis is a projection of the log (ADR 0004 §4), shown on real NATS and Redis: the whole system
runs a workload; mid-run Redis loses everything (``FLUSHALL``); each instance finds out at its next
commit (its sentinel is gone) — or as it starts, when the wipe happened while it was down — puts
its documents back from its changelog (``state.<instance>.<kind>.<name>``), reloads, and carries
on. The run finishes with nothing lost or doubled: every job reaches the phase it reaches without
the wipe, no pod is started twice, and no node's bookings ever exceed its allocatable."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import structlog.testing

from hyperjob import events, records
from hyperjob.events import subjects
from hyperjob.store.redis_store import RedisStore
from hyperjob.testkit.isolation import open_redis_store
from hyperjob.testkit.servers import RedisServer
from tests.service import service_helpers as sh

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
    return {
        m.job
        for c in CLUSTERS
        for m in await probe.decoded(subjects.job_phase(c), events.JobPhaseChanged)
        if m.new == "Completed"
    }


async def test_a_wiped_redis_is_rebuilt_from_the_changelogs_and_the_run_finishes_with_nothing_lost_or_doubled(
    bus, probe, own_redis
) -> None:
    url, store = own_redis
    async with Run(bus, probe, store) as run:
        async with sh.Fleet(bus, store, CLUSTERS, nodes=2):
            await run.submit_and_wait_mid_run()
            await flushall(url)
            run.wiped()
            await run.wait_for_the_end()
        # Each instance that had something to commit after the wipe found its sentinel gone and restored.
        assert {"splitter", "global-scheduler", "cluster-scheduler-c1", "job-controller-c1"} <= set(run.restored)
    await run.check_nothing_lost_or_doubled()


async def test_instances_that_start_on_a_wiped_redis_restore_before_they_go_on(bus, probe, own_redis) -> None:
    url, store = own_redis
    async with Run(bus, probe, store) as run:
        async with sh.Fleet(bus, store, CLUSTERS, nodes=2):
            await run.submit_and_wait_mid_run()
        await flushall(url)  # while every instance is down: each finds out as it starts
        run.wiped()
        async with sh.Fleet(bus, store, CLUSTERS, nodes=2):
            await run.wait_for_the_end()
        assert set(run.restored) == set(fleet_instances())
    await run.check_nothing_lost_or_doubled()


class Run:
    """The workload, what happened to it, and the checks that nothing was lost or doubled."""

    def __init__(self, bus: Any, probe: sh.Probe, store: RedisStore) -> None:
        self.bus = bus
        self.probe = probe
        self.store = store
        self.bookings = Bookings(store)
        self.expected = set(JOBS) | {f"{name}-job-{i}" for name in HYPERJOBS for i in range(2)}
        self.restored: dict[str, int] = {}
        self._wiped_at = 0

    async def __aenter__(self) -> Run:
        self._capture = structlog.testing.capture_logs()
        self.logs = self._capture.__enter__()
        self._watcher = asyncio.create_task(self.bookings.run())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.bookings.stopping = True
        await self._watcher
        self._capture.__exit__(*exc)

    async def submit_and_wait_mid_run(self) -> None:
        """Every job submitted; returns once some pods have started and no job has finished."""
        await apply(self.bus, self.probe, sh.queue_manifest("global-ai"))
        for name, split in HYPERJOBS.items():
            await apply(self.bus, self.probe, sh.hyperjob_manifest(name, split, queue="global-ai", duration="5s"))
        for name, replicas in JOBS.items():
            await apply(self.bus, self.probe, sh.job_manifest(name, replicas=replicas, gpu="4", duration="4s"))
        await sh.until(lambda: _count(started_pods(self.probe), 4), what="pods started", timeout=30)
        assert not await completed(self.probe)

    def wiped(self) -> None:
        self._wiped_at = len(self.logs)

    async def wait_for_the_end(self) -> None:
        await sh.until(lambda: _superset(completed(self.probe), self.expected), what="every job Completed", timeout=60)
        for name in HYPERJOBS:
            await sh.doc(
                self.store,
                records.HYPERJOB_STATUS,
                name,
                records.HyperJobStatusDoc,
                timeout=30,
                where=lambda d: d.phase == "Completed",
            )
        for c in CLUSTERS:
            await sh.until(lambda c=c: _no_bindings(self.store, c), what=f"no bindings left in {c}", timeout=30)
        self.restored = {
            e["instance"]: e["documents"]
            for e in self.logs[self._wiped_at :]
            if e["event"] == "state_restored_from_changelog"
        }
        for instance in self.restored:
            assert await self.store.alive(instance), instance

    async def check_nothing_lost_or_doubled(self) -> None:
        probe = self.probe
        # Nothing doubled: each pod started once (one incarnation), reported Running and Succeeded once.
        pods = await started_pods(probe)
        assert len(pods) == 2 * len(JOBS) + 4 * len(HYPERJOBS)
        assert max(Counter(p.pod for p in pods).values()) == 1
        for c in CLUSTERS:
            reports = [
                r for m in await probe.decoded(subjects.pod_phases(c), events.PodPhasesReported) for r in m.reports
            ]
            assert max(Counter((r.pod, r.phase) for r in reports).values()) == 1
            bound: dict[str, str] = {}
            for msg in await probe.decoded(subjects.pods_bound(c), events.PodsBound):
                for ref in msg.pods:
                    assert bound.setdefault(ref.pod, ref.node) == ref.node  # never bound to two nodes
        # Nothing overbooked, at any moment the watcher looked.
        assert self.bookings.samples > 10 and self.bookings.over == []
        # Nothing lost: every job ended as it ends without the wipe, and nothing was dead-lettered.
        assert await completed(probe) == self.expected
        assert await probe.messages("dlq.>") == []


async def flushall(url: str) -> None:
    client = aioredis.Redis.from_url(url)
    try:
        await client.flushall()
    finally:
        await client.aclose()


def fleet_instances() -> list[str]:
    return [instance for _, _, _, instance in sh.Fleet(None, None, CLUSTERS).plans()]


async def _count(found: Any, at_least: int) -> bool:
    return len(await found) >= at_least


async def _superset(found: Any, expected: set[str]) -> bool:
    return expected <= await found


async def _no_bindings(store: RedisStore, cluster: str) -> bool:
    return await store.allocations(cluster) == {}

"""The gang stall of issue 13 at a size CI affords. Measured before ADR 0004, at 2 clusters x 2,000
nodes and 400 HyperJobs of 64 replicas split 32/32 published at once, 150 HyperJobs never ran: their
cross-cluster gangs went Reserving -> Released again and again with room free. Here many
cross-cluster gangs are published at once onto a small fleet that holds them all with little to
spare, on real JetStream and Redis with every service: every one comes to run, each pod is bound
once, and no node holds more than it has."""

from __future__ import annotations

from collections import Counter

import pytest

from hyperjob import events, records
from hyperjob.events import subjects
from hyperjob.services.status_aggregator.domain import AggregateDoc
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

CLUSTERS = ("c1", "c2")
NODES = 4  # per cluster, 8 GPUs each: 32 GPUs per cluster
HYPERJOBS = 7  # 4 one-GPU replicas on each cluster apiece: 28 of the 32 GPUs of each cluster
GPUS_PER_NODE = 8.0


async def test_cross_cluster_gangs_published_at_once_all_come_to_run_within_capacity(bus, store, probe) -> None:
    async with sh.Fleet(bus, store, CLUSTERS, nodes=NODES):
        queue = sh.apply(sh.queue_manifest("global-ai"))
        await sh.send(bus, subjects.APPLY, queue)
        await probe.wait(subjects.result(queue.event_id))
        names = [f"gang-{i}" for i in range(HYPERJOBS)]
        for name in names:  # at once: nothing waits for an answer
            manifest = sh.hyperjob_manifest(name, {c: 4 for c in CLUSTERS}, queue="global-ai", duration="1h")
            await sh.send(bus, subjects.APPLY, sh.apply(manifest))
        for name in names:
            running = await sh.doc(
                store,
                records.HYPERJOB_STATUS,
                name,
                AggregateDoc,
                timeout=120.0,
                where=lambda d: d.phase == "Running",
            )
            assert running.status["placement"] == {c: 4 for c in CLUSTERS}

        for c in CLUSTERS:
            bindings = await store.allocations(c)
            assert len(bindings) == 4 * HYPERJOBS
            gpus: Counter[str] = Counter()
            for binding in bindings.values():
                gpus[binding.node] += binding.request.get("nvidia.com/gpu", 0.0)
            assert max(gpus.values()) <= GPUS_PER_NODE
            starts = [p.pod for m in await probe.decoded(subjects.start_pods(c), events.StartPods) for p in m.pods]
            assert sorted(starts) == sorted(bindings)  # each bound pod started, once

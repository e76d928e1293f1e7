"""One cluster's scheduler in-process on real JetStream and Redis: nodes come from heartbeats, jobs
from the records the job-controller writes; one cycle binds a whole gang (``PodBound`` for each
pod, allocations in the store) and reports the cluster's capacity; two schedulers cycling at once
on the same cluster never oversubscribe a node and never split a gang."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import api
import events
import jobcore
import records
import schedcore
from cluster_scheduler.app import build
from cluster_scheduler.config import Settings
from cluster_scheduler.handlers import ClusterScheduler
from events import subjects
from jobcore import model as jm
from servicekit import Runtime
from store import Write
from testkit.isolation import open_redis_store

sys.path.insert(0, str(Path(__file__).parent))
import service_helpers as sh  # noqa: E402

pytestmark = pytest.mark.service

C = "cluster-a"
NODE = {"cpu": 96.0, "memory": float(1 << 40), "nvidia.com/gpu": 8.0, "pods": 110.0}


def settings(**fields: Any) -> Settings:
    return Settings(cluster=C, health_period=0.0, **fields)


async def heartbeats(bus: Any, count: int, allocatable: dict[str, float] = NODE) -> list[str]:
    """Each node's heartbeat as its node-agent publishes it."""
    names = [f"{C}-node-{i}" for i in range(count)]
    now = time.time()
    for node in names:
        beat = events.NodeHeartbeat(event_id=f"hb-{node}-{now}", occurred_at=now, producer="node-agent", cluster=C,
                                    node=node, allocatable=allocatable)
        await bus.publish(subjects.heartbeat(C, node), events.encode(beat), msg_id=beat.event_id)
    return names


def job_record(name: str, replicas: int, gpu: str = "1") -> tuple[jm.JobRecord, jm.PodGroupInfo]:
    """A job as the job-controller keeps it once its podgroup is Inqueue: record with Pending pods."""
    manifest = api.decode(sh.job_manifest(name, replicas=replicas, gpu=gpu))
    assert isinstance(manifest, api.Job)
    record = jobcore.admit(manifest, {"default": "Open"}, time.time(), {})
    podgroup = jobcore.derive_podgroup(record)
    record, _ = jobcore.decide(record, jm.PodGroupAdmitted(job_version=record.version), time.time())
    assert len(record.pods) == replicas
    return record, podgroup


async def write_job(store: Any, name: str, replicas: int, gpu: str = "1") -> jm.JobRecord:
    record, podgroup = job_record(name, replicas, gpu)
    await sh.write_docs(store, [Write.put(records.job_kind(C), name, record),
                                Write.put(records.podgroup_kind(C), name, podgroup),
                                Write.put(records.pgphase_kind(C), name, records.PodGroupPhaseDoc(phase="Inqueue"))])
    return record


class CountingStore:
    """The real store, counting the gang bindings it refused."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.refused = 0

    async def bind_gang(self, *args: Any, **kw: Any) -> Any:
        result = await self.inner.bind_gang(*args, **kw)
        self.refused += not result.ok
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def assert_never_oversubscribed(store: Any) -> dict[str, Any]:
    usage = await store.nodes(C)
    for node, u in usage.items():
        for resource, amount in u.used.items():
            assert amount <= u.allocatable.get(resource, 0.0) + 1e-9, (node, resource, amount, u.allocatable)
    return usage


async def test_one_cycle_binds_the_gang_and_reports_capacity(bus, store, probe) -> None:
    runtime = Runtime("cluster-scheduler", bus, store)
    scheduler = ClusterScheduler(runtime, settings())
    nodes = await heartbeats(bus, 3)
    record = await write_job(store, "j1", replicas=4)

    decision = await scheduler.cycle()
    assert sorted(b.task for b in decision.binds) == sorted(record.pods)
    bound = await probe.wait(subjects.pod_bound(C), events.PodBound, count=4)
    assert sorted(b.pod for b in bound) == sorted(record.pods)
    assert all(b.job == "j1" and b.node in nodes and b.pod_uid == record.pods[b.pod].uid
               and b.job_version == record.pods[b.pod].version for b in bound)
    allocations = await store.allocations(C)
    assert {pod: a.node for pod, a in allocations.items()} == {b.pod: b.node for b in bound}
    assert all(a.request["nvidia.com/gpu"] == 1.0 for a in allocations.values())

    cluster = (await store.get(records.CLUSTER, C)).decode(records.ClusterDoc)
    assert (cluster.nodes, cluster.ready_nodes) == (3, 3)
    assert cluster.allocatable["nvidia.com/gpu"] == 24.0 and cluster.free["nvidia.com/gpu"] == 20.0
    reported = await probe.wait(subjects.capacity(C), events.ClusterCapacityReported)
    assert reported[-1].free["nvidia.com/gpu"] == 20.0
    assert sorted((await store.list(records.node_kind(C)))) == nodes

    # The next cycle binds nothing new; bindings the job-controller has not heard yet are
    # announced again under the same ids, which JetStream drops.
    again = await scheduler.cycle()
    assert again.binds == []
    assert len(await probe.messages(subjects.pod_bound(C))) == 4
    assert len(await store.allocations(C)) == 4
    await runtime.stop()


async def test_gang_that_does_not_fit_is_not_bound_at_all(bus, store, probe) -> None:
    runtime = Runtime("cluster-scheduler", bus, store)
    scheduler = ClusterScheduler(runtime, settings())
    await heartbeats(bus, 2)  # 16 GPUs
    await write_job(store, "big", replicas=20)
    await scheduler.cycle()
    await scheduler.cycle()
    assert await store.allocations(C) == {}
    assert await probe.messages(subjects.pod_bound(C)) == []
    await runtime.stop()


async def test_pods_ready_wakes_the_running_service_which_binds_once(bus, store, probe) -> None:
    runtime = Runtime("cluster-scheduler", bus, store)
    await build(settings(schedule_period="1h"), runtime)  # only a wake-up makes it cycle
    await heartbeats(bus, 2)
    record = await write_job(store, "j1", replicas=3)
    ready = sh.message(events.PodsReady, cluster=C, job="j1")
    await sh.send(bus, subjects.pods_ready(C), ready)
    await sh.send(bus, subjects.pods_ready(C), ready, copy=1)
    await probe.wait(subjects.pod_bound(C), events.PodBound, count=3)
    await probe.settled(f"cluster-scheduler-{C}-wake", subjects.pods_ready(C))
    await runtime.stop()
    assert sorted(await store.allocations(C)) == sorted(record.pods)
    assert len(await probe.messages(subjects.pod_bound(C))) == 3


async def test_two_schedulers_cycling_at_once_never_oversubscribe_a_node(bus, store, probe, redis_url,
                                                                         key_prefix) -> None:
    nodes = await heartbeats(bus, 4)
    jobs = {f"j{i:02d}": 2 + i % 3 for i in range(24)}  # 24 gangs of 2-4 pods: 72 GPUs asked, 32 exist
    for name, replicas in jobs.items():
        await write_job(store, name, replicas)
    # Two replicas of the cluster-scheduler with their own connections to the same store; the
    # second packs nodes (binpack) where the first spreads (nodeorder), so from the same
    # snapshot they pick different nodes for the same pods and must collide.
    async with open_redis_store(redis_url, key_prefix, cleanup=False) as other_store:
        first_store, second_store = CountingStore(store), CountingStore(other_store)
        first = ClusterScheduler(Runtime("cluster-scheduler", bus, first_store), settings())
        second = ClusterScheduler(Runtime("cluster-scheduler", bus, second_store),
                                  settings(scheduler_conf=schedcore.DEFAULT_CONF_TEXT.replace("nodeorder", "binpack")))
        for _ in range(3):
            await asyncio.gather(*(s.cycle() for s in (first, second) for _ in range(4)))
            await assert_never_oversubscribed(store)
        await first.cycle()  # a quiet cycle alone: whatever gang still fits is bound now

    refused = first_store.refused + second_store.refused
    assert refused > 0, "the two schedulers never competed for a node"
    usage = await assert_never_oversubscribed(store)
    assert sorted(usage) == nodes
    allocations = await store.allocations(C)
    per_job: dict[str, int] = {}
    for pod in allocations:
        job = pod.rsplit("-worker-", 1)[0]
        per_job[job] = per_job.get(job, 0) + 1
    # Every gang whole or not at all, and the cluster is as full as its gangs allow (GPUs are
    # the only scarce resource here, and a gang may span nodes).
    assert all(per_job[job] == jobs[job] for job in per_job), per_job
    gpus = sum(u.used.get("nvidia.com/gpu", 0.0) for u in usage.values())
    assert gpus == len(allocations) <= 32
    unbound = [replicas for job, replicas in jobs.items() if job not in per_job]
    assert not unbound or 32 - gpus < min(unbound), (gpus, unbound)
    # Each pod is announced bound exactly once, to the node it holds.
    bound = await probe.wait(subjects.pod_bound(C), events.PodBound, count=len(allocations))
    assert sorted(b.pod for b in bound) == sorted(allocations)
    assert all(allocations[b.pod].node == b.node for b in bound)


async def test_the_phase_of_a_gone_job_is_forgotten_and_a_new_job_of_its_name_starts_afresh(bus, store, probe) -> None:
    runtime = Runtime("cluster-scheduler", bus, store)
    scheduler = ClusterScheduler(runtime, settings())
    await heartbeats(bus, 1)
    # What a finished and removed job "j1" left behind: its podgroup's last phase.
    await sh.put(store, records.pgphase_kind(C), "j1", records.PodGroupPhaseDoc(phase="Completed"))
    await scheduler.cycle()
    assert await store.get(records.pgphase_kind(C), "j1") is None
    # A new job of the same name is enqueued and bound like any other.
    record, podgroup = job_record("j1", replicas=2)
    await sh.write_docs(store, [Write.put(records.job_kind(C), "j1", record),
                                Write.put(records.podgroup_kind(C), "j1", podgroup)])
    await scheduler.cycle()
    phases = await probe.wait(subjects.podgroup_phase(C), events.PodGroupPhaseChanged)
    assert [p.phase for p in phases] == ["Inqueue"]
    await runtime.stop()

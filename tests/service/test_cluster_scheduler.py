"""One cluster's scheduler (its own ``build`` on a runtime over real JetStream and Redis): it follows
its nodes (``NodeStatus``), the jobs (``JobState``, as the job-controller describes them) and the
queues, and each cycle admits podgroups and binds whole gangs with one compare-and-set commit —
never above a node's allocatable, even with two instances deciding at once. A cross-cluster gang
member is held until the global-scheduler says start; pods of a node that goes down are evicted;
finished pods give their resources back; a pod naming a node without room is rejected. Every
decision is in its changelog, bindings included."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import generate_latest

from hyperjob import api, events, records
from hyperjob import jobcore as jc
from hyperjob.events import subjects
from hyperjob.servicekit import Runtime
from hyperjob.servicekit.metrics import REGISTRY
from hyperjob.services.cluster_scheduler.app import build
from hyperjob.services.cluster_scheduler.config import Settings
from hyperjob.services.job_controller import domain as jc_domain
from hyperjob.store import Binding
from hyperjob.testkit.metrics import sample
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

C = "c1"
INSTANCE = f"cluster-scheduler-{C}"
NODE = {"cpu": 96.0, "memory": float(1 << 40), "nvidia.com/gpu": 8.0, "pods": 110.0}


def settings() -> Settings:
    return Settings(cluster=C, schedule_period="0.1s")


@pytest.fixture
async def scheduler(bus, store) -> AsyncIterator[Runtime]:
    await nodes_report(bus, "n1", "n2")
    async with sh.running("cluster-scheduler", build, settings(), bus, store) as (runtime, _):
        yield runtime


# -- what the cluster says ------------------------------------------------------------------------


async def nodes_report(bus: Any, *names: str, ready: bool = True, allocatable: dict[str, float] | None = None) -> None:
    for name in names:
        await sh.send(
            bus,
            subjects.node_status(C, name),
            sh.message(
                events.NodeStatus,
                cluster=C,
                node=name,
                agent="agent-1",
                allocatable=allocatable or NODE,
                ready=ready,
                reason="" if ready else "NodeDown",
            ),
        )


class Job:
    """A job as the job-controller keeps it (jobcore's record), described to the scheduler as it
    is, through the job-controller's own ``job_state_parts``."""

    def __init__(self, name: str, replicas: int = 2, gpu: str = "4", gang: str = "", node_name: str = "") -> None:
        manifest = sh.job_manifest(name, replicas=replicas, gpu=gpu)
        if node_name:
            manifest["spec"]["tasks"][0]["template"]["spec"]["nodeName"] = node_name
        job = api.decode(manifest)
        assert isinstance(job, api.Job)
        self.record = jc.admit(job, {"default": "Open"}, 0.0)
        self.info = records.ChildInfo(gang=gang, gang_attempt=1 if gang else 0)

    @property
    def name(self) -> str:
        return self.record.name

    def admit(self) -> Job:
        """The podgroup went Inqueue: its pods are created."""
        self.record, _ = jc.decide(self.record, jc.PodGroupAdmitted(job_version=self.record.version), 1.0)
        assert self.record.pods
        return self

    def run_to_end(self, bindings: dict[str, Binding]) -> Job:
        """Every pod bound where the scheduler put it, ran, and succeeded, as its node reported."""
        for name, pod in sorted(self.record.pods.items()):
            common = {"pod": name, "uid": pod.uid, "job_version": pod.version}
            for event in (
                jc.PodBound(node=bindings[name].node, **common),
                jc.PodRunning(**common),
                jc.PodSucceeded(**common),
            ):
                self.record, _ = jc.decide(self.record, event, 2.0)
        assert all(p.phase == "Succeeded" for p in self.record.pods.values())
        return self

    def running(self, bindings: dict[str, Binding]) -> Job:
        """Every pod bound where the scheduler put it and running, as its node reported."""
        for name, pod in sorted(self.record.pods.items()):
            common = {"pod": name, "uid": pod.uid, "job_version": pod.version}
            for event in (jc.PodBound(node=bindings[name].node, **common), jc.PodRunning(**common)):
                self.record, _ = jc.decide(self.record, event, 2.0)
        return self

    def states(self) -> list[events.JobState]:
        return [
            sh.message(events.JobState, **fields) for fields in jc_domain.job_state_parts(self.record, self.info, C)
        ]

    async def send(self, bus: Any) -> None:
        for state in self.states():
            await sh.send(bus, subjects.job_state(C, self.name, state.part), state)

    async def gone(self, bus: Any) -> None:
        await sh.send(
            bus,
            subjects.job_state(C, self.name, 0),
            sh.message(events.JobState, cluster=C, job=self.name, uid="", version=0, created=0.0, deleted=True),
        )


async def bound(probe: sh.Probe, job: str) -> list[events.PodRef]:
    return [p for m in await probe.decoded(subjects.pods_bound(C), events.PodsBound) if m.job == job for p in m.pods]


async def allocations(store: Any, count: int) -> dict[str, Binding]:
    [found] = await sh.until(lambda: _allocations_if(store, count), what=f"{count} bindings")
    return found


async def _allocations_if(store: Any, count: int) -> list[dict[str, Binding]]:
    found = await store.allocations(C)
    return [found] if len(found) == count else []


async def within_allocatable(store: Any) -> None:
    for node, usage in (await store.nodes(C)).items():
        for resource, amount in usage.used.items():
            assert amount <= usage.allocatable.get(resource, amount) + 1e-9, (node, resource, usage)


# -- admission and binding ------------------------------------------------------------------------


async def test_a_podgroup_is_admitted_then_its_gang_is_bound_within_allocatable(scheduler, bus, store, probe) -> None:
    job = Job("j1", replicas=4, gpu="4")
    await job.send(bus)
    [phase] = await probe.wait(subjects.podgroup_phase(C), events.PodGroupPhaseChanged)
    assert (phase.job, phase.phase, phase.job_uid, phase.job_version) == ("j1", "Inqueue", job.record.uid, 0)
    await job.admit().send(bus)
    refs = await probe.wait(subjects.pods_bound(C), events.PodsBound)
    assert sorted(p.pod for p in refs[0].pods) == sorted(job.record.pods) and len(refs) == 1
    assert {p.uid for p in refs[0].pods} == {p.uid for p in job.record.pods.values()}
    found = await allocations(store, 4)
    assert sorted({b.node for b in found.values()}) == ["n1", "n2"]  # 16 GPUs: two pods of 4 on each node
    await within_allocatable(store)
    changelog = await probe.changelog(INSTANCE)
    assert {k for k in changelog if k.startswith("binding@")} == {f"binding@{C}/{p}" for p in job.record.pods}
    assert (await store.get(records.pgphase_kind(C), "j1")).decode(records.PodGroupPhaseDoc).phase in (
        "Inqueue",
        "Running",
    )
    await job.send(bus)  # the same state again: nothing new to decide
    await probe.wait(
        subjects.capacity(C), events.ClusterCapacityReported, where=lambda m: m.free.get("nvidia.com/gpu") == 0.0
    )
    assert len(await bound(probe, "j1")) == 4


async def test_a_gang_that_does_not_fit_binds_nothing(scheduler, bus, store, probe) -> None:
    await Job("big", replicas=5, gpu="4").admit().send(bus)  # 20 GPUs on a 16-GPU cluster
    small = Job("small", replicas=1, gpu="8").admit()
    await small.send(bus)
    await probe.wait(subjects.pods_bound(C), events.PodsBound, where=lambda m: m.job == "small")
    assert await bound(probe, "big") == []
    assert set(await store.allocations(C)) == set(small.record.pods)


async def test_a_gang_that_does_not_fit_shows_why_on_its_podgroup_and_in_volcanos_metrics(
    scheduler, bus, store, probe
) -> None:
    await Job("big", replicas=1, gpu="12").admit().send(bus)  # a 12-GPU pod on 8-GPU nodes
    [waiting] = await probe.wait(
        subjects.podgroup_phase(C), events.PodGroupPhaseChanged, where=lambda m: m.job == "big" and bool(m.reason)
    )
    assert "0/2 nodes are available: 2 Insufficient nvidia.com/gpu" in waiting.reason, waiting.reason
    doc = (await store.get(records.pgphase_kind(C), "big")).decode(records.PodGroupPhaseDoc)
    assert doc.reason == waiting.reason
    await nodes_report(bus, "n2", ready=False)  # the queue's share halves: a new kind of reason, announced
    [again] = await probe.wait(
        subjects.podgroup_phase(C), events.PodGroupPhaseChanged, where=lambda m: m.reason != waiting.reason
    )
    assert "quota does not admit" in again.reason and again.phase == waiting.phase
    text = generate_latest(REGISTRY).decode()
    assert 'hyperjob_unschedulable_tasks{job_id="default/big"} 1.0' in text
    assert "hyperjob_unschedulable_jobs 1.0" in text
    assert sample(text, "volcano_schedule_attempts_total", result="unschedulable") >= 1
    assert sample(text, "hyperjob_e2e_scheduling_latency_seconds_count") >= 1


# -- the cross-cluster gang -------------------------------------------------------------------------


async def test_a_gang_member_is_held_until_the_global_scheduler_says_start(scheduler, bus, store, probe) -> None:
    job = Job("train-0", gang="train").admit()
    await job.send(bus)
    [held] = await probe.wait(subjects.RESERVATION_HELD, events.ReservationHeld)
    assert (held.child, held.cluster, held.hyperjob, held.attempt, held.held) == ("train-0", C, "train", 1, True)
    await allocations(store, 2)
    assert await bound(probe, "train-0") == []  # held, not started
    start = sh.message(events.GangControl, child="train-0", cluster=C, action="start", attempt=1)
    await sh.send(bus, subjects.gang_control(C), start)
    await probe.settled(INSTANCE, subjects.gang_control(C))
    await sh.send(bus, subjects.gang_control(C), start, copy=1)
    await probe.settled(INSTANCE, subjects.gang_control(C))
    await probe.wait(subjects.pods_bound(C), events.PodsBound)
    assert sorted(p.pod for p in await bound(probe, "train-0")) == sorted(job.record.pods)
    reservation = await sh.doc(store, records.reservation_kind(C), "train-0", records.ReservationDoc)
    assert (reservation.state, reservation.attempt) == ("Started", 1)
    assert len(await probe.messages(subjects.RESERVATION_HELD)) == 1


async def test_a_released_gang_member_gives_its_nodes_back(scheduler, bus, store, probe) -> None:
    await Job("train-0", gang="train").admit().send(bus)
    await probe.wait(subjects.RESERVATION_HELD, events.ReservationHeld)
    release = sh.message(events.GangControl, child="train-0", cluster=C, action="release", attempt=1)
    await sh.send(bus, subjects.gang_control(C), release)
    await allocations(store, 0)
    reservation = await sh.doc(store, records.reservation_kind(C), "train-0", records.ReservationDoc)
    assert reservation.state == "Released"
    assert await bound(probe, "train-0") == []
    tombstones = [
        k
        for k, m in (await probe.changelog(INSTANCE)).items()
        if k.startswith("binding@") and m.headers.get("Hyperjob-Deleted")
    ]
    assert len(tombstones) == 2


async def test_a_release_that_arrived_before_its_job_does_not_keep_a_later_attempt_from_holding(
    scheduler, bus, store, probe
) -> None:
    """The gang stall of issue 13: under load the gang deadline passed before the job-controller
    had described the child, so its release came first and was kept without the child's uid. The
    child of the next attempt, of the same name, then read that release as its own and was never
    held: every attempt timed out, for ever, with capacity free."""
    release = sh.message(events.GangControl, child="train-0", cluster=C, action="release", attempt=1)
    await sh.send(bus, subjects.gang_control(C), release)
    await probe.settled(INSTANCE, subjects.gang_control(C))
    retried = Job("train-0", gang="train").admit()
    retried.info = records.ChildInfo(gang="train", gang_attempt=2)  # dispatched again, for attempt 2
    await retried.send(bus)
    [held] = await probe.wait(subjects.RESERVATION_HELD, events.ReservationHeld)
    assert (held.child, held.attempt, held.held) == ("train-0", 2, True)
    await allocations(store, 2)
    start = sh.message(events.GangControl, child="train-0", cluster=C, action="start", attempt=2)
    await sh.send(bus, subjects.gang_control(C), start)
    await probe.wait(subjects.pods_bound(C), events.PodsBound)
    assert sorted(p.pod for p in await bound(probe, "train-0")) == sorted(retried.record.pods)


async def test_a_cluster_in_a_long_session_keeps_publishing_its_summary(bus, store, probe) -> None:
    """The gang stall of issue 13 at 2 x 2,000 nodes: two sessions of 26 s and 12 s silenced a
    cluster for over 30 s, the splitter declared it lost and moved its children onto the other
    cluster, which could not hold them all. Live, a session runs in a worker thread and the summary
    (the cluster's liveness) is not behind the cycle's lock: summaries go out while it runs."""
    await nodes_report(bus, "n1", "n2")
    async with sh.running("cluster-scheduler", build, settings(), bus, store) as (runtime, scheduler):
        runtime.offload = True  # as a service process runs it
        loop = asyncio.get_running_loop()
        in_session, release = asyncio.Event(), threading.Event()
        session = scheduler.scheduler.cycle

        def long_session(snapshot: Any) -> Any:
            loop.call_soon_threadsafe(in_session.set)
            assert release.wait(60.0), "the test never let the session end"
            return session(snapshot)

        scheduler.scheduler.cycle = long_session
        await Job("j1", replicas=1, gpu="1").send(bus)
        await in_session.wait()
        started = runtime.now()
        try:
            await probe.wait(
                subjects.capacity(C), events.ClusterCapacityReported, where=lambda m: m.occurred_at > started
            )
        finally:
            release.set()
        await probe.wait(subjects.podgroup_phase(C), events.PodGroupPhaseChanged)  # and the session ends well


# -- nodes, finished pods, named nodes ------------------------------------------------------------------


async def test_the_pods_of_a_node_that_goes_down_are_evicted(scheduler, bus, store, probe) -> None:
    job = Job("j1", replicas=2, gpu="8").admit()
    await job.send(bus)
    found = await allocations(store, 2)
    down = found[sorted(found)[0]].node
    await nodes_report(bus, down, ready=False)
    [evicted] = await probe.wait(subjects.pods_evicted(C), events.PodsEvicted)
    assert evicted.job == "j1" and [(p.node, p.reason) for p in evicted.pods] == [(down, "nodeDown")]
    remaining = await allocations(store, 1)
    assert all(b.node != down for b in remaining.values())
    await probe.wait(subjects.capacity(C), events.ClusterCapacityReported, where=lambda m: m.ready_nodes == 1)


async def test_finished_pods_and_removed_jobs_give_their_resources_back(scheduler, bus, store, probe) -> None:
    job = Job("j1", replicas=2, gpu="8").admit()
    await job.send(bus)
    await job.run_to_end(await allocations(store, 2)).send(bus)
    await allocations(store, 0)
    other = Job("j2", replicas=2, gpu="8").admit()
    await other.send(bus)
    await allocations(store, 2)
    await other.gone(bus)
    await allocations(store, 0)
    await sh.until(lambda: _absent(store, records.pgphase_kind(C), "j2"), what="phase of a removed job forgotten")


async def test_a_pod_naming_a_node_without_room_is_rejected_and_one_with_room_bound_there(
    scheduler, bus, store, probe
) -> None:
    await Job("fits", replicas=1, gpu="8", node_name="n2").admit().send(bus)
    [ok] = await probe.wait(subjects.pods_bound(C), events.PodsBound)
    assert [(p.node, p.reason) for p in ok.pods] == [("n2", "")]
    await Job("too-big", replicas=1, gpu="8", node_name="n2").admit().send(bus)
    [rejected] = await probe.wait(subjects.pods_rejected(C), events.PodsRejected)
    assert rejected.job == "too-big" and [(p.node, p.reason) for p in rejected.pods] == [("n2", "OutOfnvidia.com/gpu")]
    await Job("nowhere", replicas=1, gpu="1", node_name="n9").admit().send(bus)
    await probe.wait(
        subjects.pods_rejected(C),
        events.PodsRejected,
        where=lambda m: m.job == "nowhere" and m.pods[0].reason == "NodeNotFound",
    )
    assert set(await store.allocations(C)) == {"fits-worker-0"}


# -- two instances, crashes ----------------------------------------------------------------------------


async def test_two_instances_deciding_at_once_never_oversubscribe_a_node(bus, store, probe) -> None:
    await nodes_report(bus, "n1", "n2")
    jobs = [Job(f"j{i}", replicas=2, gpu="4").admit() for i in range(6)]  # 48 GPUs asked of 16
    async with (
        sh.running("cluster-scheduler", build, settings(), bus, store, instance=f"{INSTANCE}-a"),
        sh.running("cluster-scheduler", build, settings(), bus, store, instance=f"{INSTANCE}-b"),
    ):
        for job in jobs:
            await job.send(bus)
        await allocations(store, 4)
        await probe.wait(subjects.pods_bound(C), events.PodsBound, count=2)
        await probe.wait(
            subjects.capacity(C), events.ClusterCapacityReported, where=lambda m: m.free.get("nvidia.com/gpu") == 0.0
        )
    await within_allocatable(store)
    found = await store.allocations(C)
    assert len(found) == 4
    announced: dict[str, str] = {}
    for msg in await probe.decoded(subjects.pods_bound(C), events.PodsBound):
        for ref in msg.pods:
            assert announced.setdefault(ref.pod, ref.node) == ref.node  # never bound to two nodes
    assert announced == {p: b.node for p, b in found.items()}
    assert len({p.rsplit("-worker-", 1)[0] for p in found}) == 2  # whole gangs only: two jobs of two pods


async def test_a_cycle_that_crashed_after_its_commit_announces_its_bindings_on_restart(bus, store, probe) -> None:
    await nodes_report(bus, "n1", "n2")
    crash = sh.Crash("after-commit")
    job = Job("j1", replicas=2, gpu="8").admit()
    async with sh.running("cluster-scheduler", build, settings(), bus, store, fault=crash):
        await job.send(bus)
        await allocations(store, 2)
        await sh.until(lambda: crash.fired, what="the crash")
    # The process died with its commit in and nothing published; the next life publishes its outbox.
    async with sh.running("cluster-scheduler", build, settings(), bus, store):
        await probe.wait(subjects.pods_bound(C), events.PodsBound)
    assert sorted(p.pod for p in await bound(probe, "j1")) == sorted(job.record.pods)
    assert len(await store.allocations(C)) == 2
    await within_allocatable(store)


async def _absent(store: Any, kind: str, name: str) -> bool:
    return await store.get(kind, name) is None


async def test_a_preemption_order_evicts_its_victims_once_the_child_is_here_and_only_once(
    scheduler, bus, store, probe
) -> None:
    """The fleet's PreemptForGang (ADR 0011): kept until the gang's child is known here, then its
    named running pods are evicted (reason preempt); a redelivered order evicts nothing more."""
    victim = Job("batch", replicas=2, gpu="8").admit()
    await victim.send(bus)
    await victim.running(await allocations(store, 2)).send(bus)
    first = sorted(victim.record.pods)[0]
    order = sh.message(
        events.PreemptForGang,
        child="urgent-0",
        cluster=C,
        hyperjob="urgent",
        attempt=1,
        victims=[events.PreemptVictims(job="batch", pods=[first])],
        reason="preempting for urgent",
    )
    await sh.send(bus, subjects.gang_control(C), order)
    await probe.settled(INSTANCE, subjects.gang_control(C))
    kept = await sh.doc(store, records.preempt_kind(C), "urgent-0", records.PreemptOrderDoc)
    assert kept.order.victims == order.victims and kept.evicted_at == 0.0
    assert await probe.messages(subjects.pods_evicted(C)) == []  # its child is not here yet

    await Job("urgent-0", replicas=1, gpu="8", gang="urgent").send(bus)
    [evicted] = await probe.wait(subjects.pods_evicted(C), events.PodsEvicted)
    assert evicted.job == "batch" and [p.pod for p in evicted.pods] == [first]
    assert evicted.pods[0].reason == "preempt: for HyperJob urgent (preempting for urgent)"
    await allocations(store, 1)

    await sh.send(bus, subjects.gang_control(C), order, copy=1)
    await probe.settled(INSTANCE, subjects.gang_control(C))
    await victim.send(bus)  # a change: the scheduler runs a cycle
    await allocations(store, 1)
    assert len(await probe.messages(subjects.pods_evicted(C))) == 1

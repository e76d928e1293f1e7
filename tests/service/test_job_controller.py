"""One cluster's job-controller (its own ``build`` on a runtime over real JetStream and Redis): a
dispatched child becomes a jobcore record and a ``JobState`` for the scheduler; its podgroup's
admission creates the pods; bound pods are started on their nodes with their whole environment
(the cross-cluster rank included); nodes' reports drive the job to its end; removal stops the pods
and ends with ``JobRemoved`` once they are gone. Every handler given the same message twice has
one effect, and so has a message whose handling crashed after its commit."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hyperjob import events, records
from hyperjob.events import subjects
from hyperjob.jobcore import model as jm
from hyperjob.servicekit import Runtime
from hyperjob.services.job_controller.app import build
from hyperjob.services.job_controller.config import Settings
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

C = "c1"
DURABLE = f"job-controller-{C}"
NODES_DURABLE = f"job-controller-{C}-nodes"
JOB_KIND = f"job@{C}"


@pytest.fixture
async def controller(bus, store) -> AsyncIterator[Runtime]:
    async with sh.running("job-controller", build, Settings(cluster=C), bus, store) as (runtime, _):
        yield runtime


async def send(
    bus: Any, probe: sh.Probe, subject: str, msg: events.Message, *, again: bool = False, durable: str = DURABLE
) -> events.Message:
    await sh.send(bus, subject, msg)
    await probe.settled(durable, subject)
    if again:
        await sh.send(bus, subject, msg, copy=1)
        await probe.settled(durable, subject)
    return msg


def dispatch(
    name: str = "j1", replicas: int = 2, world: events.World | None = None, hyperjob: str = "", **job: Any
) -> events.DispatchChild:
    return sh.message(
        events.DispatchChild,
        child=name,
        cluster=C,
        hyperjob=hyperjob,
        job=sh.job_manifest(name, replicas=replicas, **job),
        world=world,
    )


async def record(store: Any, name: str = "j1", where: Any = lambda _r: True) -> jm.JobRecord:
    return await sh.doc(store, JOB_KIND, name, jm.JobRecord, where=where)


async def job_state(bus: Any, name: str = "j1", where: Any = lambda _s: True) -> events.JobState:
    async def latest() -> events.JobState | None:
        found = await bus.last(subjects.job_state(C, name, 0))
        state = sh.ALL_TYPES.decode(found.data) if found is not None else None
        return state if state is not None and where(state) else None

    return await sh.until(latest, what=f"job state of {name}")


async def phases(probe: sh.Probe, job: str = "j1") -> list[str]:
    return [m.new for m in await probe.decoded(subjects.job_phase(C), events.JobPhaseChanged) if m.job == job]


async def admitted_job(bus: Any, probe: sh.Probe, store: Any, msg: events.DispatchChild) -> jm.JobRecord:
    """Dispatched, and its podgroup admitted by the scheduler: its pods exist."""
    await send(bus, probe, subjects.dispatch(C), msg)
    rec = await record(store, msg.child)
    await send(
        bus,
        probe,
        subjects.podgroup_phase(C),
        sh.message(
            events.PodGroupPhaseChanged,
            cluster=C,
            job=msg.child,
            job_uid=rec.uid,
            job_version=rec.version,
            phase="Inqueue",
        ),
    )
    return await record(store, msg.child, where=lambda r: bool(r.pods))


async def bind_all(bus: Any, probe: sh.Probe, rec: jm.JobRecord, node: str = "n1", *, again: bool = False) -> None:
    refs = [events.PodRef(pod=p.name, uid=p.uid, node=node) for p in rec.pods.values()]
    await send(
        bus,
        probe,
        subjects.pods_bound(C),
        sh.message(events.PodsBound, cluster=C, job=rec.name, pods=refs),
        again=again,
    )


async def report(bus: Any, probe: sh.Probe, rec: jm.JobRecord, phase: str, node: str = "n1", **kw: Any) -> None:
    reports = [
        events.PodReport(pod=p.name, uid=p.uid, job=rec.name, node=node, phase=phase, **kw) for p in rec.pods.values()
    ]
    await send(
        bus,
        probe,
        subjects.pod_phases(C),
        sh.message(events.PodPhasesReported, cluster=C, reports=reports),
        durable=NODES_DURABLE,
    )


# -- dispatch and admission -------------------------------------------------------------------------


async def test_a_dispatched_child_is_recorded_once_and_described_to_the_scheduler(
    controller, bus, store, probe
) -> None:
    msg = dispatch(hyperjob="train")
    await send(bus, probe, subjects.dispatch(C), msg, again=True)
    rec = await record(store)
    assert (rec.uid, rec.version, rec.podgroup_exists, rec.pods) == (msg.event_id, 0, True, {})
    assert await sh.version(store, JOB_KIND, "j1") == 1
    info = (await store.get(f"child@{C}", "j1")).decode(records.ChildInfo)
    assert info.hyperjob == "train"
    state = await job_state(bus)
    assert (state.uid, state.podgroup.min_member, state.podgroup.queue, state.pods) == (msg.event_id, 2, "default", [])
    [pending] = await probe.decoded(subjects.job_phase(C), events.JobPhaseChanged)
    assert (pending.job, pending.hyperjob, pending.old, pending.new) == ("j1", "train", "", "Pending")


async def test_the_podgroups_admission_creates_the_pods_and_another_incarnations_phase_does_not(
    controller, bus, store, probe
) -> None:
    await send(bus, probe, subjects.dispatch(C), dispatch())
    rec = await record(store)
    stale = sh.message(
        events.PodGroupPhaseChanged, cluster=C, job="j1", job_uid="an-earlier-j1", job_version=0, phase="Inqueue"
    )
    await send(bus, probe, subjects.podgroup_phase(C), stale)
    assert (await record(store)).pods == {}
    inqueue = sh.message(
        events.PodGroupPhaseChanged, cluster=C, job="j1", job_uid=rec.uid, job_version=0, phase="Inqueue"
    )
    await send(bus, probe, subjects.podgroup_phase(C), inqueue, again=True)
    rec = await record(store, where=lambda r: bool(r.pods))
    assert sorted(rec.pods) == ["j1-worker-0", "j1-worker-1"]
    state = await job_state(bus, where=lambda s: len(s.pods) == 2)
    assert {(p.name, p.uid, p.phase) for p in state.pods} == {(p.name, p.uid, "Pending") for p in rec.pods.values()}
    assert await sh.version(store, JOB_KIND, "j1") == 2


async def test_a_child_dispatched_into_a_closed_queue_is_refused(bus, store, probe) -> None:
    closed = sh.queue_manifest("shut")
    await sh.send(
        bus,
        subjects.queue_config("shut"),
        sh.message(events.QueueChanged, name="shut", manifest=closed, state="Closed"),
    )
    async with sh.running("job-controller", build, Settings(cluster=C), bus, store):  # it knows the queue
        await send(bus, probe, subjects.dispatch(C), dispatch(queue="shut"))
        [refused] = await probe.wait(subjects.job_removed(C), events.JobRemoved)
    assert refused.job == "j1" and "shut" in refused.reason and "closed" in refused.reason.lower()
    assert await store.get(JOB_KIND, "j1") is None


# -- running the pods -------------------------------------------------------------------------------


async def test_bound_pods_are_started_once_with_their_rank_in_the_hyperjobs_world(
    controller, bus, store, probe
) -> None:
    hyperjob = sh.hyperjob_manifest("train", {"c0": 2, C: 2})
    plan = [
        events.ChildRef(name="train-0", cluster="c0", replicas=2, tasks={"worker": 2}, rank_offset=0),
        events.ChildRef(name="j1", cluster=C, replicas=2, tasks={"worker": 2}, rank_offset=2),
    ]
    world = events.World(hyperjob=hyperjob, plan=plan, world_size=4)
    rec = await admitted_job(bus, probe, store, dispatch(world=world, hyperjob="train"))
    await bind_all(bus, probe, rec, again=True)
    [start] = await probe.decoded(subjects.start_pods(C), events.StartPods)
    assert (start.job, start.job_version) == ("j1", 0)
    ranks = {p.pod: (p.node, p.uid, p.env["HYPERJOB_RANK"], p.env["HYPERJOB_WORLD_SIZE"]) for p in start.pods}
    assert ranks == {
        "j1-worker-0": ("n1", rec.pods["j1-worker-0"].uid, "2", "4"),
        "j1-worker-1": ("n1", rec.pods["j1-worker-1"].uid, "3", "4"),
    }
    assert all(p.sim_duration == 10.0 for p in start.pods)
    state = await job_state(bus, where=lambda s: all(p.node for p in s.pods))
    assert {p.node for p in state.pods} == {"n1"}


async def test_a_started_pod_carries_its_image_and_the_gpu_devices_of_its_binding(
    controller, bus, store, probe
) -> None:
    # The node-agent runs the image and gives the pod exactly these GPUs (issue 27).
    rec = await admitted_job(bus, probe, store, dispatch())
    devices = {name: (i, i + 4) for i, name in enumerate(sorted(rec.pods))}
    refs = [events.PodRef(pod=p.name, uid=p.uid, node="n1", devices=devices[p.name]) for p in rec.pods.values()]
    await send(bus, probe, subjects.pods_bound(C), sh.message(events.PodsBound, cluster=C, job=rec.name, pods=refs))
    [start] = await probe.decoded(subjects.start_pods(C), events.StartPods)
    assert {p.pod: p.devices for p in start.pods} == devices
    assert {p.image for p in start.pods} == {"example.com/w:1"}


async def test_node_reports_drive_the_job_to_completed(controller, bus, store, probe) -> None:
    rec = await admitted_job(bus, probe, store, dispatch())
    await bind_all(bus, probe, rec)
    await report(bus, probe, rec, "Running")
    await sh.until(lambda: _has(probe, "Running"), what="Running")
    reports = [
        events.PodReport(pod=p.name, uid=p.uid, job="j1", node="n1", phase="Succeeded", exit_code=0)
        for p in rec.pods.values()
    ]
    succeeded = sh.message(events.PodPhasesReported, cluster=C, reports=reports)
    await send(bus, probe, subjects.pod_phases(C), succeeded, again=True, durable=NODES_DURABLE)
    await report(bus, probe, rec, "Succeeded", exit_code=0)  # a node repeating itself
    done = await record(store, where=lambda r: r.phase == "Completed")
    assert all(p.phase == "Succeeded" for p in done.pods.values())
    assert await phases(probe) == ["Pending", "Running", "Completed"]
    [completed] = [
        m for m in await probe.decoded(subjects.job_phase(C), events.JobPhaseChanged) if m.new == "Completed"
    ]
    assert completed.counts == events.PodCounts(succeeded=2)


async def test_a_pod_killed_for_memory_keeps_its_reason_and_exit_code_in_the_job_record(
    controller, bus, store, probe
) -> None:
    # What `get pods` shows as OOMKilled (issue 27): the node's reason is no longer dropped here.
    rec = await admitted_job(bus, probe, store, dispatch())
    await bind_all(bus, probe, rec)
    await report(bus, probe, rec, "Running")
    reports = [
        events.PodReport(pod=p.name, uid=p.uid, job="j1", node="n1", phase="Failed", exit_code=137, reason="OOMKilled")
        for p in rec.pods.values()
    ]
    oom = sh.message(events.PodPhasesReported, cluster=C, reports=reports)
    await send(bus, probe, subjects.pod_phases(C), oom, again=True, durable=NODES_DURABLE)
    failed = await record(store, where=lambda r: all(p.phase == "Failed" for p in r.pods.values()))
    assert {(p.status.exit_code, p.status.reason) for p in failed.pods.values()} == {(137, "OOMKilled")}


async def test_evicted_pods_are_stopped_on_their_nodes_and_created_again(controller, bus, store, probe) -> None:
    rec = await admitted_job(bus, probe, store, dispatch())
    await bind_all(bus, probe, rec)
    await report(bus, probe, rec, "Running")
    victim = rec.pods["j1-worker-0"]
    evicted = sh.message(
        events.PodsEvicted,
        cluster=C,
        job="j1",
        pods=[events.PodRef(pod=victim.name, uid=victim.uid, node="n1", reason="nodeDown")],
    )
    await send(bus, probe, subjects.pods_evicted(C), evicted, again=True)
    stops = await probe.wait(subjects.stop_pods(C), events.StopPods)
    assert [(p.pod, p.uid, p.node, p.reason) for m in stops for p in m.pods] == [
        (victim.name, victim.uid, "n1", "nodeDown")
    ]
    await sh.send(
        bus,
        subjects.pod_phases(C),
        sh.message(
            events.PodPhasesReported,
            cluster=C,
            reports=[events.PodReport(pod=victim.name, uid=victim.uid, job="j1", node="n1", phase="Deleted")],
        ),
    )
    again = await record(store, where=lambda r: r.pods["j1-worker-0"].uid != victim.uid)
    assert again.pods["j1-worker-0"].phase == "Pending" and again.pods["j1-worker-0"].node is None


async def test_a_pod_its_named_node_rejects_fails_as_a_kubelets_admission_fails_it(
    controller, bus, store, probe
) -> None:
    rec = await admitted_job(bus, probe, store, dispatch(replicas=1))
    [pod] = rec.pods.values()
    rejected = sh.message(
        events.PodsRejected,
        cluster=C,
        job="j1",
        pods=[events.PodRef(pod=pod.name, uid=pod.uid, node="n2", reason="OutOfnvidia.com/gpu")],
    )
    await send(bus, probe, subjects.pods_rejected(C), rejected, again=True)
    done = await record(store, where=lambda r: r.phase == "Failed")
    failed = done.pods[pod.name]
    assert (failed.uid, failed.phase, failed.status.node, failed.status.exit_code) == (pod.uid, "Failed", "n2", 1)
    assert (await phases(probe))[-1] == "Failed"
    assert await probe.messages(subjects.start_pods(C)) == []
    assert await sh.version(store, JOB_KIND, "j1") == 3  # dispatched, admitted, rejected; the copy changed nothing


# -- removal and commands -----------------------------------------------------------------------------


async def test_a_removed_child_stops_its_pods_and_is_gone_once_they_are(controller, bus, store, probe) -> None:
    rec = await admitted_job(bus, probe, store, dispatch(hyperjob="train"))
    await bind_all(bus, probe, rec)
    await report(bus, probe, rec, "Running")
    await send(bus, probe, subjects.remove_child(C), sh.message(events.RemoveChild, child="j1", cluster=C), again=True)
    stops = await probe.wait(subjects.stop_pods(C), events.StopPods)
    assert sorted(p.pod for m in stops for p in m.pods) == sorted(rec.pods)
    assert await probe.messages(subjects.job_removed(C)) == []
    await report(bus, probe, rec, "Deleted")
    [removed] = await probe.wait(subjects.job_removed(C), events.JobRemoved)
    assert (removed.job, removed.hyperjob, removed.reason) == ("j1", "train", "")
    assert await store.get(JOB_KIND, "j1") is None and await store.get(f"child@{C}", "j1") is None
    await job_state(bus, where=lambda s: s.deleted)  # the scheduler forgets it too
    await send(bus, probe, subjects.remove_child(C), sh.message(events.RemoveChild, child="j1", cluster=C))
    assert len(await probe.messages(subjects.job_removed(C))) == 1


async def test_an_abort_command_stops_the_pods_and_ends_aborted(controller, bus, store, probe) -> None:
    rec = await admitted_job(bus, probe, store, dispatch())
    await bind_all(bus, probe, rec)
    await report(bus, probe, rec, "Running")
    abort = sh.message(events.CommandChild, child="j1", cluster=C, action="AbortJob")
    await send(bus, probe, subjects.command_child(C), abort, again=True)
    stops = await probe.wait(subjects.stop_pods(C), events.StopPods)
    assert sorted(p.pod for m in stops for p in m.pods) == sorted(rec.pods)
    await report(bus, probe, rec, "Deleted")
    await record(store, where=lambda r: r.phase == "Aborted")
    assert (await phases(probe))[-2:] == ["Aborting", "Aborted"]


# -- crashes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["after-commit", "after-publish"])
async def test_a_crash_after_the_commit_starts_the_pods_once(bus, store, probe, point) -> None:
    async with sh.running("job-controller", build, Settings(cluster=C), bus, store):
        rec = await admitted_job(bus, probe, store, dispatch())
    crash = sh.Crash(point)
    async with sh.running("job-controller", build, Settings(cluster=C), bus, store, fault=crash):
        await bind_all(bus, probe, rec)
        assert crash.fired == 1
        await probe.wait(subjects.start_pods(C), events.StartPods)
    [start] = await probe.decoded(subjects.start_pods(C), events.StartPods)
    assert sorted(p.pod for p in start.pods) == sorted(rec.pods)
    assert await sh.version(store, JOB_KIND, "j1") == 3  # dispatched, pods created, pods bound


async def _has(probe: sh.Probe, phase: str) -> bool:
    return phase in await phases(probe)


def lease(cluster: str, basis: float, length: float = 20.0) -> events.FleetLease:
    return sh.message(events.FleetLease, cluster=cluster, basis=basis, lease=length)


async def test_a_lapsed_fleet_lease_stops_the_pods_and_a_renewed_one_starts_them_where_they_are(
    controller, bus, store, probe
) -> None:
    """Fencing (issue 33), on the real bus: the lease on the ordered consumer, the fleet's word on the watch."""
    rec = await admitted_job(bus, probe, store, dispatch())
    await bind_all(bus, probe, rec)
    await probe.wait(subjects.start_pods(C), events.StartPods)
    # The fleet's last word for c1 was 25 s ago (its lease lapsed 5 s ago); it still grants c2.
    await send(bus, probe, subjects.fleet_lease(C), lease(C, time.time() - 25.0))
    await sh.send(bus, subjects.fleet_lease("c2"), lease("c2", time.time()))
    [stop] = await probe.wait(subjects.stop_pods(C), events.StopPods)
    assert {(p.pod, p.uid, p.reason) for p in stop.pods} == {
        (p.name, p.uid, "FleetLeaseLapsed") for p in rec.pods.values()
    }
    await send(bus, probe, subjects.fleet_lease(C), lease(C, time.time()))
    starts = await probe.wait(subjects.start_pods(C), events.StartPods, count=2)
    assert [sorted((p.pod, p.uid, p.node) for p in s.pods) for s in starts] == [
        sorted((p.name, p.uid, "n1") for p in rec.pods.values())
    ] * 2


async def test_a_lease_that_lapsed_unread_is_renewed_with_a_confirmation_that_resumes_only(
    controller, bus, store, probe
) -> None:
    """The bus (or the whole cluster) was cut off past the lease: the fleet spoke to no one we
    heard, so nothing was fenced here, but the node-agents may have frozen their pods. The first
    grant read in order that holds again confirms the pods still ours, resume only; later grants
    confirm nothing more."""
    rec = await admitted_job(bus, probe, store, dispatch())
    await bind_all(bus, probe, rec)
    await probe.wait(subjects.start_pods(C), events.StartPods)
    await send(bus, probe, subjects.fleet_lease(C), lease(C, time.time() - 25.0))  # lapsed 5 s ago
    await send(bus, probe, subjects.fleet_lease(C), lease(C, time.time()))
    [first, confirmation] = await probe.wait(subjects.start_pods(C), events.StartPods, count=2)
    assert not first.resume_only and confirmation.resume_only
    assert sorted((p.pod, p.uid, p.node) for p in confirmation.pods) == sorted(
        (p.name, p.uid, "n1") for p in rec.pods.values()
    )
    await send(bus, probe, subjects.fleet_lease(C), lease(C, time.time()))
    assert len(await probe.decoded(subjects.start_pods(C), events.StartPods)) == 2
    assert await probe.messages(subjects.stop_pods(C)) == []


async def test_an_agent_asking_about_its_frozen_pods_under_a_held_lease_gets_those_still_ours_resumed(
    controller, bus, store, probe
) -> None:
    """An agent cut off alone (with its cluster-scheduler) froze its pods while this
    job-controller kept the lease: no renewal confirms them, so the agent asks (``PodsFrozen``).
    The pods still ours, same incarnation and node, are confirmed resume only; another
    incarnation is not. Without a grant read in order that holds, nothing is answered."""
    rec = await admitted_job(bus, probe, store, dispatch())
    await bind_all(bus, probe, rec)
    await probe.wait(subjects.start_pods(C), events.StartPods)
    mine, *_ = sorted(rec.pods.values(), key=lambda p: p.name)
    frozen = [
        events.FrozenPod(pod=mine.name, uid=mine.uid, job="j1", node="n1"),
        events.FrozenPod(pod="j1-other-0", uid="stale", job="j1", node="n1"),
    ]

    def asked() -> events.PodsFrozen:
        return sh.message(events.PodsFrozen, cluster=C, agent="agent-1", pods=frozen)

    await send(bus, probe, subjects.pods_frozen(C), asked(), durable=f"job-controller-{C}-frozen")
    assert len(await probe.decoded(subjects.start_pods(C), events.StartPods)) == 1  # no grant read yet
    await send(bus, probe, subjects.fleet_lease(C), lease(C, time.time()))
    await send(bus, probe, subjects.pods_frozen(C), asked(), durable=f"job-controller-{C}-frozen")
    [_, confirmation] = await probe.wait(subjects.start_pods(C), events.StartPods, count=2)
    assert confirmation.resume_only
    assert [(p.pod, p.uid, p.node) for p in confirmation.pods] == [(mine.name, mine.uid, "n1")]

"""The global-scheduler (its own ``build`` on a runtime over real JetStream and Redis): owners are
admitted by their global queue (watched from the configuration stream) over the fleet's capacity
(watched from the clusters' summaries); each child is dispatched to a cluster where its whole gang
fits, or waits and says why; a cross-cluster gang is dispatched held and started once every
member holds; removals, moves and finished children are followed. Every handler given the same
message twice has one effect, and so has a message whose handling crashed after its commit."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hyperjob import events, fleetcore, records
from hyperjob.events import subjects
from hyperjob.servicekit import Runtime
from hyperjob.services.global_scheduler.app import build
from hyperjob.services.global_scheduler.config import Settings
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

HJ = "train"
DURABLE = "global-scheduler"


@pytest.fixture
async def scheduler(bus, store) -> AsyncIterator[Runtime]:
    await sh.report_capacity(bus, sh.capacity("c1"), sh.capacity("c2"))
    async with sh.running("global-scheduler", build, Settings(retry_period=0.2), bus, store) as (runtime, _):
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


def submitted(
    name: str = HJ, *, gpus: float = 4.0, queue: str = "default", plain: bool = False
) -> events.OwnerSubmitted:
    return sh.message(
        events.OwnerSubmitted,
        name=name,
        plain=plain,
        queue=queue,
        request={"cpu": 8.0 * gpus, "nvidia.com/gpu": gpus, "pods": gpus},
        created=time.time(),
    )


def child(name: str, clusters: list[str], replicas: int = 2) -> events.PlannedChild:
    return events.PlannedChild(name=name, clusters=clusters, job=sh.job_manifest(name, replicas=replicas))


def place(owner: str, *children: events.PlannedChild, gang: int = 0, plain: bool = False) -> events.PlaceChildren:
    plan = [
        events.ChildRef(name=c.name, cluster=c.clusters[0], replicas=2, tasks={"worker": 2}, rank_offset=2 * i)
        for i, c in enumerate(children)
    ]
    return sh.message(
        events.PlaceChildren,
        owner=owner,
        plain=plain,
        children=list(children),
        gang=gang,
        plan=[] if plain else plan,
        world_size=0 if plain else 2 * len(children),
        hyperjob={} if plain else sh.hyperjob_manifest(owner, {c.clusters[0]: 2 for c in children}),
    )


async def admitted(bus: Any, probe: sh.Probe, owner: events.OwnerSubmitted) -> events.OwnerAdmitted:
    await send(bus, probe, subjects.OWNER_SUBMITTED, owner)
    [found] = await probe.wait(subjects.OWNER_ADMITTED, events.OwnerAdmitted, where=lambda m: m.name == owner.name)
    return found


async def placement(store: Any, name: str, state: str) -> records.PlacementDoc:
    return await sh.doc(store, records.PLACEMENT, name, records.PlacementDoc, where=lambda p: p.state == state)


async def dispatches(probe: sh.Probe, cluster: str) -> list[events.DispatchChild]:
    return await probe.decoded(subjects.dispatch(cluster), events.DispatchChild)


# -- admission ------------------------------------------------------------------------------------


async def test_a_submitted_owner_is_admitted_once(scheduler, bus, store, probe) -> None:
    owner = submitted()
    await send(bus, probe, subjects.OWNER_SUBMITTED, owner, again=True)
    [found] = await probe.wait(subjects.OWNER_ADMITTED, events.OwnerAdmitted)
    assert (found.name, found.queue, found.generation) == (HJ, "default", 1)
    doc = await sh.doc(store, records.OWNER, HJ, records.OwnerDoc, where=lambda o: o.admitted)
    assert doc.request["nvidia.com/gpu"] == 4.0
    assert await sh.version(store, records.OWNER, HJ) == 2  # recorded, then admitted; the copy changed nothing
    assert len(await probe.messages(subjects.OWNER_ADMITTED)) == 1


async def test_an_owner_waits_for_its_queue_and_is_admitted_when_the_queue_grows(scheduler, bus, store, probe) -> None:
    small = sh.queue_manifest("small", capability={"nvidia.com/gpu": "2"})
    await sh.send(bus, subjects.queue_config("small"), sh.message(events.QueueChanged, name="small", manifest=small))
    await send(bus, probe, subjects.OWNER_SUBMITTED, submitted(queue="small"))
    [waiting] = await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting)
    assert (waiting.hyperjob, waiting.child) == (HJ, "") and "queue small" in waiting.reason
    assert not (await store.get(records.OWNER, HJ)).decode(records.OwnerDoc).admitted
    assert await probe.messages(subjects.OWNER_ADMITTED) == []
    bigger = sh.queue_manifest("small", capability={"nvidia.com/gpu": "8"})
    await sh.send(bus, subjects.queue_config("small"), sh.message(events.QueueChanged, name="small", manifest=bigger))
    [found] = await probe.wait(subjects.OWNER_ADMITTED, events.OwnerAdmitted)
    assert found.name == HJ


async def test_a_withdrawn_owner_is_forgotten_before_admission_and_kept_while_its_children_run(
    scheduler, bus, store, probe
) -> None:
    small = sh.queue_manifest("small", capability={"nvidia.com/gpu": "2"})
    await sh.send(bus, subjects.queue_config("small"), sh.message(events.QueueChanged, name="small", manifest=small))
    await send(bus, probe, subjects.OWNER_SUBMITTED, submitted("waiting", queue="small"))
    await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting)
    await send(bus, probe, subjects.OWNER_WITHDRAWN, sh.message(events.OwnerWithdrawn, name="waiting"), again=True)
    assert await store.get(records.OWNER, "waiting") is None
    await admitted(bus, probe, submitted())
    await send(bus, probe, subjects.PLACE_CHILDREN, place(HJ, child("train-0", ["c1"])))
    await placement(store, "train-0", "Dispatched")
    await send(bus, probe, subjects.OWNER_WITHDRAWN, sh.message(events.OwnerWithdrawn, name=HJ), again=True)
    assert (await store.get(records.OWNER, HJ)).decode(records.OwnerDoc).withdrawn  # its child still runs
    await send(bus, probe, subjects.UNPLACE_CHILD, sh.message(events.RemoveChild, child="train-0", cluster="c1"))
    await send(
        bus,
        probe,
        subjects.job_removed("c1"),
        sh.message(events.JobRemoved, cluster="c1", job="train-0", hyperjob=HJ),
        durable="global-scheduler-jobs",
    )
    await sh.until(lambda: _absent(store, records.OWNER, HJ), what="owner forgotten once its child is gone")


# -- placing children -------------------------------------------------------------------------------


async def test_a_plain_job_is_dispatched_once_to_a_cluster_where_it_fits(scheduler, bus, store, probe) -> None:
    await sh.report_capacity(bus, sh.capacity("c1", full=True))
    await admitted(bus, probe, submitted("solo", plain=True))
    await send(bus, probe, subjects.PLACE_CHILDREN, place("solo", child("solo", ["c1", "c2"]), plain=True), again=True)
    doc = await placement(store, "solo", "Dispatched")
    assert doc.cluster == "c2"  # c1 is full
    [dispatch] = await dispatches(probe, "c2")
    assert (dispatch.child, dispatch.cluster, dispatch.hyperjob, dispatch.gang) == ("solo", "c2", "", "")
    assert dispatch.job["metadata"]["name"] == "solo"
    assert await dispatches(probe, "c1") == []


async def test_a_planned_child_waits_for_its_clusters_room(scheduler, bus, store, probe) -> None:
    await sh.report_capacity(bus, sh.capacity("c1", full=True))
    await admitted(bus, probe, submitted())
    await send(bus, probe, subjects.PLACE_CHILDREN, place(HJ, child("train-0", ["c1"])))
    [waiting] = await probe.wait(
        subjects.CHILD_WAITING, events.ChildPlacementWaiting, where=lambda m: m.child == "train-0"
    )
    assert waiting.hyperjob == HJ and waiting.reason
    assert (await placement(store, "train-0", "Waiting")).reason == waiting.reason
    await sh.report_capacity(bus, sh.capacity("c1"))  # room: the next round dispatches it
    [dispatch] = await probe.wait(subjects.dispatch("c1"), events.DispatchChild)
    assert dispatch.child == "train-0" and dispatch.world is not None and dispatch.world.world_size == 2
    assert [(r.name, r.rank_offset) for r in dispatch.world.plan] == [("train-0", 0)]


async def test_a_cross_cluster_gang_is_dispatched_held_and_started_once_every_member_holds(
    scheduler, bus, store, probe
) -> None:
    await admitted(bus, probe, submitted())
    await send(
        bus, probe, subjects.PLACE_CHILDREN, place(HJ, child("train-0", ["c1"]), child("train-1", ["c2"]), gang=2)
    )
    for name, cluster in (("train-0", "c1"), ("train-1", "c2")):
        [dispatch] = await probe.wait(subjects.dispatch(cluster), events.DispatchChild)
        assert (dispatch.child, dispatch.gang, dispatch.gang_attempt) == (name, HJ, 1)
    gang = await sh.doc(store, records.GANG, HJ, fleetcore.HyperJobGang)
    assert (gang.phase, gang.attempt, gang.required) == ("Reserving", 1, 2)
    held = sh.message(events.ReservationHeld, child="train-0", cluster="c1", hyperjob=HJ, attempt=1)
    await send(bus, probe, subjects.RESERVATION_HELD, held, again=True)
    assert await probe.messages(subjects.gang_control("c1")) == []  # one of two holds: nothing starts
    await send(
        bus,
        probe,
        subjects.RESERVATION_HELD,
        sh.message(events.ReservationHeld, child="train-1", cluster="c2", hyperjob=HJ, attempt=1),
        again=True,
    )
    for name, cluster in (("train-0", "c1"), ("train-1", "c2")):
        [control] = await probe.decoded(subjects.gang_control(cluster), events.GangControl)
        assert (control.child, control.action, control.attempt) == (name, "start", 1)
    gang = await sh.doc(store, records.GANG, HJ, fleetcore.HyperJobGang, where=lambda g: g.phase != "Reserving")
    assert set(gang.bound) == {"train-0", "train-1"}
    stale = sh.message(events.ReservationHeld, child="train-0", cluster="c1", hyperjob=HJ, attempt=0)
    await send(bus, probe, subjects.RESERVATION_HELD, stale)
    assert len(await probe.messages(subjects.gang_control("c1"))) == 1


async def test_suspending_a_holding_gang_releases_its_reservations(scheduler, bus, store, probe) -> None:
    await admitted(bus, probe, submitted())
    await send(
        bus, probe, subjects.PLACE_CHILDREN, place(HJ, child("train-0", ["c1"]), child("train-1", ["c2"]), gang=2)
    )
    await send(
        bus,
        probe,
        subjects.RESERVATION_HELD,
        sh.message(events.ReservationHeld, child="train-0", cluster="c1", hyperjob=HJ, attempt=1),
    )
    await send(
        bus,
        probe,
        subjects.OWNER_LIFECYCLE,
        sh.message(events.OwnerLifecycle, name=HJ, lifecycle="Suspended"),
        again=True,
    )
    for cluster in ("c1", "c2"):
        [control] = await probe.wait(subjects.gang_control(cluster), events.GangControl)
        assert (control.action, control.attempt) == ("release", 1)
    assert (await sh.doc(store, records.GANG, HJ, fleetcore.HyperJobGang)).phase != "Reserving"


# -- removing, moving, finishing -------------------------------------------------------------------


async def test_removing_a_dispatched_child_waits_for_its_cluster_to_say_it_is_gone(
    scheduler, bus, store, probe
) -> None:
    await admitted(bus, probe, submitted())
    await send(bus, probe, subjects.PLACE_CHILDREN, place(HJ, child("train-0", ["c1"])))
    await placement(store, "train-0", "Dispatched")
    await send(
        bus, probe, subjects.UNPLACE_CHILD, sh.message(events.RemoveChild, child="train-0", cluster="c1"), again=True
    )
    [remove] = await probe.decoded(subjects.remove_child("c1"), events.RemoveChild)
    assert remove.child == "train-0"
    await placement(store, "train-0", "Removing")
    gone = sh.message(events.JobRemoved, cluster="c1", job="train-0", hyperjob=HJ)
    await send(bus, probe, subjects.job_removed("c1"), gone, again=True, durable="global-scheduler-jobs")
    await sh.until(lambda: _absent(store, records.PLACEMENT, "train-0"), what="placement forgotten")


async def test_removing_a_child_that_never_left_the_waiting_line_says_it_is_gone(scheduler, bus, store, probe) -> None:
    await sh.report_capacity(bus, sh.capacity("c1", full=True))
    await admitted(bus, probe, submitted())
    await send(bus, probe, subjects.PLACE_CHILDREN, place(HJ, child("train-0", ["c1"])))
    await placement(store, "train-0", "Waiting")
    await send(bus, probe, subjects.UNPLACE_CHILD, sh.message(events.RemoveChild, child="train-0", cluster="c1"))
    [gone] = await probe.wait(subjects.job_removed("unplaced"), events.JobRemoved)
    assert (gone.job, gone.hyperjob) == ("train-0", HJ)
    assert await store.get(records.PLACEMENT, "train-0") is None
    assert await probe.messages(subjects.remove_child("c1")) == []


async def test_a_moved_child_leaves_its_cluster_and_goes_to_the_other(scheduler, bus, store, probe) -> None:
    await admitted(bus, probe, submitted("solo", plain=True))
    await send(bus, probe, subjects.PLACE_CHILDREN, place("solo", child("solo", ["c1"]), plain=True))
    await placement(store, "solo", "Dispatched")
    move = sh.message(events.MoveChild, child="solo", to_cluster="c2", reason="cluster c1 lost")
    await send(bus, probe, subjects.MOVE_CHILD, move, again=True)
    [remove] = await probe.decoded(subjects.remove_child("c1"), events.RemoveChild)
    [dispatch] = await probe.decoded(subjects.dispatch("c2"), events.DispatchChild)
    assert remove.child == dispatch.child == "solo"
    doc = await placement(store, "solo", "Dispatched")
    assert (doc.cluster, doc.moves) == ("c2", 1)


async def test_an_owner_whose_children_all_finished_is_forgotten(scheduler, bus, store, probe) -> None:
    await admitted(bus, probe, submitted())
    await send(bus, probe, subjects.PLACE_CHILDREN, place(HJ, child("train-0", ["c1"])))
    await placement(store, "train-0", "Dispatched")
    done = sh.message(events.JobPhaseChanged, cluster="c1", job="train-0", hyperjob=HJ, old="Running", new="Completed")
    await send(bus, probe, subjects.job_phase("c1"), done, again=True, durable="global-scheduler-jobs")
    assert (await store.get(records.PLACEMENT, "train-0")).decode(records.PlacementDoc).finished
    await sh.until(lambda: _absent(store, records.OWNER, HJ), what="owner forgotten")


# -- crashes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["after-commit", "after-publish"])
async def test_a_crash_after_the_commit_dispatches_once(bus, store, probe, point) -> None:
    await sh.report_capacity(bus, sh.capacity("c1"), sh.capacity("c2"))
    async with sh.running("global-scheduler", build, Settings(retry_period=0.2), bus, store):
        await admitted(bus, probe, submitted("solo", plain=True))
    crash = sh.Crash(point)
    async with sh.running("global-scheduler", build, Settings(retry_period=0.2), bus, store, fault=crash):
        await send(bus, probe, subjects.PLACE_CHILDREN, place("solo", child("solo", ["c1"]), plain=True))
        await placement(store, "solo", "Dispatched")
        assert crash.fired == 1
        await probe.wait(subjects.dispatch("c1"), events.DispatchChild)
    assert len(await dispatches(probe, "c1")) == 1
    assert await sh.version(store, records.PLACEMENT, "solo") == 1


async def _absent(store: Any, kind: str, name: str) -> bool:
    return await store.get(kind, name) is None

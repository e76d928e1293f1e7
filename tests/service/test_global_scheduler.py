"""The global-scheduler in-process on real JetStream and Redis: a requested child is admitted by its
global queue and dispatched to a cluster with room; one that does not fit waits (with its reason)
and the retry round dispatches it once capacity appears; removal goes to the child's cluster; a
finished owner gives its queue share back; every handler applied twice has one effect.

The owners' documents (``hyperjob``) are written as the splitter writes them."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import events
import records
from events import subjects
from global_scheduler.app import build
from global_scheduler.config import Settings
from servicekit import Runtime

sys.path.insert(0, str(Path(__file__).parent))
import service_helpers as sh  # noqa: E402

pytestmark = pytest.mark.service

DURABLES = [("global-scheduler", subjects.PLACE_CHILD), ("global-scheduler-removed", subjects.job_removed("x")),
            ("global-scheduler-phases", subjects.job_phase("x"))]


@pytest.fixture
async def scheduler(bus, store) -> AsyncIterator[Runtime]:
    runtime = Runtime("global-scheduler", bus, store)
    await build(Settings(retry_period=0.1), runtime)
    yield runtime
    await runtime.stop()


async def settled(probe: sh.Probe) -> None:
    for durable, subject in DURABLES:
        await probe.settled(durable, subject)


async def plain_job(store: Any, name: str, clusters: list[str], replicas: int = 2) -> events.PlaceChild:
    """A plain Job as the splitter stores it, and the PlaceChild it sends."""
    manifest = sh.job_manifest(name, replicas=replicas)
    await sh.put(store, records.HYPERJOB, name, sh.plain_owner(manifest))
    return sh.message(events.PlaceChild, child=name, clusters=clusters, job=manifest)


async def planned_child(store: Any, hyperjob: str, cluster: str, replicas: int = 2) -> events.PlaceChild:
    """A HyperJob split onto one cluster as the splitter stores it, and its child's PlaceChild."""
    manifest = sh.hyperjob_manifest(hyperjob, {cluster: replicas})
    child = f"{hyperjob}-job-0"
    ref = records.ChildRef(name=child, replicated_job="job", index=0, replicas=replicas, cluster=cluster)
    await sh.put(store, records.HYPERJOB, hyperjob, sh.hyperjob_owner(manifest, [ref]))
    job = sh.job_manifest(child, replicas=replicas)
    return sh.message(events.PlaceChild, child=child, hyperjob=hyperjob, replicated_job="job", clusters=[cluster],
                      job=job, env_by_pod={f"{child}-worker-0": {"HYPERJOB_RANK": "0"}}, world_size=replicas)


async def send(bus: Any, subject: str, msg: events.Message, *, twice: bool = False) -> None:
    await sh.send(bus, subject, msg)
    if twice:
        await sh.send(bus, subject, msg, copy=1)


async def test_child_is_admitted_and_dispatched_once_to_the_cluster_with_room(scheduler, bus, store, probe) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a", full=True), sh.cluster_doc("cluster-b"))
    msg = await plain_job(store, "train-1", ["cluster-a", "cluster-b"])
    await send(bus, subjects.PLACE_CHILD, msg, twice=True)
    dispatched = await probe.wait(subjects.dispatch("cluster-b"), events.DispatchChild)
    await settled(probe)
    assert len(await probe.messages("sched.child.dispatch.>")) == 1
    d = dispatched[0]
    assert (d.child, d.cluster, d.job, d.gang) == ("train-1", "cluster-b", msg.job, "")
    assert d.correlation_id  # a derived message of the chain
    stored = await store.get(records.PLACEMENT, "train-1")
    placement = stored.decode(records.PlacementDoc)
    assert (placement.state, placement.cluster, placement.reason) == ("Dispatched", "cluster-b", "")
    assert stored.version == 2  # recorded once (Waiting), dispatched once
    admitted = await probe.decoded(subjects.OWNER_ADMITTED)
    assert [a.name for a in admitted] == ["train-1"]  # type: ignore[attr-defined]
    assert (await store.get(records.ADMISSION, "train-1")) is not None


async def test_a_new_place_request_for_a_dispatched_child_changes_nothing(scheduler, bus, store, probe) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a"))
    await send(bus, subjects.PLACE_CHILD, await plain_job(store, "train-1", ["cluster-a"]))
    await probe.wait(subjects.dispatch("cluster-a"), events.DispatchChild)
    await settled(probe)
    version = await sh.version(store, records.PLACEMENT, "train-1")
    await send(bus, subjects.PLACE_CHILD, await plain_job(store, "train-1", ["cluster-a"]))
    await settled(probe)
    assert len(await probe.messages("sched.child.dispatch.>")) == 1
    assert await sh.version(store, records.PLACEMENT, "train-1") == version


async def test_planned_child_that_does_not_fit_waits_then_the_retry_round_dispatches_it(scheduler, bus, store,
                                                                                       probe) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a", full=True), sh.cluster_doc("cluster-b"))
    msg = await planned_child(store, "hj", "cluster-a")
    await send(bus, subjects.PLACE_CHILD, msg, twice=True)
    waiting = await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting,
                               where=lambda w: "fits" in w.reason)
    assert (waiting[-1].child, waiting[-1].hyperjob) == (msg.child, "hj")
    placement = await sh.doc(store, records.PLACEMENT, msg.child, records.PlacementDoc,
                             where=lambda p: "fits" in p.reason)
    assert placement.state == "Waiting"
    assert await probe.messages("sched.child.dispatch.>") == []

    await sh.put_clusters(store, sh.cluster_doc("cluster-a"))
    dispatched = await probe.wait(subjects.dispatch("cluster-a"), events.DispatchChild)
    assert [(d.child, d.hyperjob, d.world_size) for d in dispatched] == [(msg.child, "hj", 2)]
    assert dispatched[0].env_by_pod == msg.env_by_pod
    placement = await sh.doc(store, records.PLACEMENT, msg.child, records.PlacementDoc,
                             where=lambda p: p.state == "Dispatched")
    assert placement.cluster == "cluster-a" and not placement.reason
    await settled(probe)
    assert await probe.messages(subjects.dispatch("cluster-b")) == []
    # The retry round ran many times meanwhile, but said nothing new while nothing changed.
    reasons = [w.reason for w in await probe.decoded(subjects.CHILD_WAITING, events.ChildPlacementWaiting)]
    assert len(reasons) == len(set(reasons)), reasons


async def test_plain_job_waits_for_a_live_cluster_and_is_dispatched_when_one_reports(scheduler, bus, store,
                                                                                     probe) -> None:
    await send(bus, subjects.PLACE_CHILD, await plain_job(store, "train-1", []))
    waiting = await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting)
    assert waiting[0].child == "train-1"
    await sh.put_clusters(store, sh.cluster_doc("cluster-b"))
    dispatched = await probe.wait(subjects.dispatch("cluster-b"), events.DispatchChild)
    assert [d.child for d in dispatched] == ["train-1"]


async def test_a_silent_cluster_gets_no_work(scheduler, bus, store, probe) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a", now=time.time() - 120), sh.cluster_doc("cluster-b"))
    await send(bus, subjects.PLACE_CHILD, await plain_job(store, "train-1", ["cluster-a", "cluster-b"]))
    dispatched = await probe.wait("sched.child.dispatch.>", events.DispatchChild)
    assert [d.cluster for d in dispatched] == ["cluster-b"]


async def test_removing_a_dispatched_child_asks_its_cluster_once_and_forgets_it_when_gone(scheduler, bus, store,
                                                                                         probe) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a"))
    await send(bus, subjects.PLACE_CHILD, await plain_job(store, "train-1", ["cluster-a"]))
    await probe.wait(subjects.dispatch("cluster-a"), events.DispatchChild)
    await settled(probe)
    version = await sh.version(store, records.PLACEMENT, "train-1")
    unplace = sh.message(events.RemoveChild, child="train-1", cluster="")
    await send(bus, subjects.UNPLACE_CHILD, unplace, twice=True)
    removes = await probe.wait(subjects.remove_child("cluster-a"), events.RemoveChild)
    await settled(probe)
    assert [(r.child, r.cluster) for r in removes] == [("train-1", "cluster-a")]
    stored = await store.get(records.PLACEMENT, "train-1")
    assert stored.version == version + 1 and stored.decode(records.PlacementDoc).state == "Removing"

    # Another cluster reporting a job of the same name gone changes nothing.
    await send(bus, subjects.job_removed("cluster-b"), sh.message(events.JobRemoved, cluster="cluster-b",
                                                                   job="train-1"))
    await settled(probe)
    assert await sh.version(store, records.PLACEMENT, "train-1") == version + 1
    gone = sh.message(events.JobRemoved, cluster="cluster-a", job="train-1")
    await send(bus, subjects.job_removed("cluster-a"), gone, twice=True)
    await settled(probe)
    assert await store.get(records.PLACEMENT, "train-1") is None


async def test_removing_a_waiting_child_forgets_it_at_once(scheduler, bus, store, probe) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a", full=True))
    msg = await planned_child(store, "hj", "cluster-a")
    await send(bus, subjects.PLACE_CHILD, msg)
    await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting, where=lambda w: "fits" in w.reason)
    unplace = sh.message(events.RemoveChild, child=msg.child, cluster="")
    await send(bus, subjects.UNPLACE_CHILD, unplace, twice=True)
    removed = await probe.wait("job.removed.>", events.JobRemoved)
    await settled(probe)
    assert [(r.job, r.hyperjob) for r in removed] == [(msg.child, "hj")]
    assert await store.get(records.PLACEMENT, msg.child) is None
    assert await probe.messages("sched.child.remove.>") == []

    # When room appears the retry round dispatches what still waits, and not the removed child.
    other = await plain_job(store, "train-2", ["cluster-a"])
    await send(bus, subjects.PLACE_CHILD, other)
    await sh.doc(store, records.PLACEMENT, "train-2", records.PlacementDoc)
    await sh.put_clusters(store, sh.cluster_doc("cluster-a"))
    dispatched = await probe.wait(subjects.dispatch("cluster-a"), events.DispatchChild)
    assert [d.child for d in dispatched] == ["train-2"]
    assert await store.get(records.PLACEMENT, msg.child) is None


async def test_remove_of_an_unknown_child_changes_nothing(scheduler, bus, store, probe) -> None:
    await send(bus, subjects.UNPLACE_CHILD, sh.message(events.RemoveChild, child="nope", cluster=""))
    await settled(probe)
    assert await probe.messages("sched.child.remove.>") == [] and await probe.messages("job.>") == []


async def test_a_finished_child_frees_its_owners_admission_once(scheduler, bus, store, probe) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a"))
    await send(bus, subjects.PLACE_CHILD, await plain_job(store, "train-1", ["cluster-a"]))
    await probe.wait(subjects.dispatch("cluster-a"), events.DispatchChild)
    await sh.doc(store, records.ADMISSION, "train-1", records.AdmissionDoc)
    await settled(probe)
    version = await sh.version(store, records.PLACEMENT, "train-1")
    done = sh.message(events.JobPhaseChanged, cluster="cluster-a", job="train-1", old="Running", new="Completed")
    await send(bus, subjects.job_phase("cluster-a"), done, twice=True)
    await sh.until(lambda: _absent(store, records.ADMISSION, "train-1"), what="admission released")
    await settled(probe)
    stored = await store.get(records.PLACEMENT, "train-1")
    assert stored.version == version + 1 and stored.decode(records.PlacementDoc).finished


async def _absent(store: Any, kind: str, name: str) -> bool:
    return await store.get(kind, name) is None


async def test_dispatch_whose_publish_failed_after_the_write_still_goes_out(bus, store, probe) -> None:
    # The round is periodic work: no redelivery will republish what its commit recorded.
    flaky = sh.FlakyBus(bus, failures=0)
    runtime = Runtime("global-scheduler", flaky, store)
    await build(Settings(retry_period=0.1), runtime)
    try:
        await sh.put_clusters(store, sh.cluster_doc("cluster-a", full=True))
        msg = await planned_child(store, "hj", "cluster-a")
        await send(bus, subjects.PLACE_CHILD, msg)
        await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting, where=lambda w: "fits" in w.reason)
        flaky.failures = 1  # the next publish (the round's dispatch) fails after its write
        await sh.put_clusters(store, sh.cluster_doc("cluster-a"))
        await sh.doc(store, records.PLACEMENT, msg.child, records.PlacementDoc, where=lambda p: p.state == "Dispatched")
        assert flaky.failures == 0
        dispatched = await probe.wait(subjects.dispatch("cluster-a"), events.DispatchChild)
        assert [d.child for d in dispatched] == [msg.child]
    finally:
        await runtime.stop()


async def test_a_child_replaced_while_its_predecessor_is_removed_is_placed_once_that_one_is_gone(
        scheduler, bus, store, probe) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a"))
    first = await planned_child(store, "hj", "cluster-a")
    await send(bus, subjects.PLACE_CHILD, first)
    await probe.wait(subjects.dispatch("cluster-a"), events.DispatchChild)
    # A changed template: the splitter unplaces the child and places its replacement (same name).
    await send(bus, subjects.UNPLACE_CHILD, sh.message(events.RemoveChild, child=first.child, cluster="cluster-a"))
    replacement = sh.message(events.PlaceChild, child=first.child, hyperjob="hj", replicated_job="job",
                             clusters=["cluster-a"], job=sh.job_manifest(first.child, replicas=2, duration="1s"))
    await send(bus, subjects.PLACE_CHILD, replacement, twice=True)
    await probe.wait(subjects.remove_child("cluster-a"), events.RemoveChild)
    await settled(probe)
    placement = await sh.doc(store, records.PLACEMENT, first.child, records.PlacementDoc)
    assert (placement.state, placement.cluster) == ("Replacing", "cluster-a")
    assert len(await probe.messages(subjects.dispatch("cluster-a"))) == 1

    await send(bus, subjects.job_removed("cluster-a"), sh.message(events.JobRemoved, cluster="cluster-a",
                                                                   job=first.child, hyperjob="hj"))
    dispatched = await probe.wait(subjects.dispatch("cluster-a"), events.DispatchChild, count=2)
    assert dispatched[-1].job == replacement.job
    placement = await sh.doc(store, records.PLACEMENT, first.child, records.PlacementDoc,
                             where=lambda p: p.state == "Dispatched")
    assert placement.job == replacement.job

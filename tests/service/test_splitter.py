"""The splitter in-process on real JetStream and Redis: applies answer on ``hj.result.<id>``, accepted
objects are stored and split into ``PlaceChild`` requests, rejected ones change nothing, deletes
wait for every child to be gone; every handler applied twice has one effect."""

from __future__ import annotations

import copy
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import events
import records
from events import subjects
from servicekit import Runtime
from splitter.app import build
from splitter.config import Settings


sys.path.insert(0, str(Path(__file__).parent))
import service_helpers as sh  # noqa: E402

pytestmark = pytest.mark.service

HJ = "llm-train-hyperjob"


@pytest.fixture
async def splitter(bus, store) -> AsyncIterator[Runtime]:
    runtime = Runtime("splitter", bus, store)
    await build(Settings(replan_period=0.1), runtime)
    yield runtime
    await runtime.stop()


async def apply(bus: Any, manifest: dict[str, Any], *, twice: bool = False) -> events.ApplyManifest:
    msg = sh.message(events.ApplyManifest, manifest=manifest)
    await sh.send(bus, subjects.APPLY, msg)
    if twice:
        await sh.send(bus, subjects.APPLY, msg, copy=1)
    return msg


async def answer(probe: sh.Probe, msg: events.Message) -> events.RequestAccepted | events.RequestRejected:
    found = await probe.wait(subjects.result(msg.event_id))
    assert len(found) == 1, found
    return found[0]  # type: ignore[return-value]


async def settled(probe: sh.Probe) -> None:
    await probe.settled("splitter", subjects.APPLY)
    await probe.settled("splitter-children", subjects.job_removed("x"))


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    queue, hyperjob = sh.example_documents()
    return queue, hyperjob


async def with_clusters(store: Any) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a"), sh.cluster_doc("cluster-b"))


# -- Queue ----------------------------------------------------------------------------------------

async def test_queue_applied_twice_is_stored_once_and_answered_once(splitter, bus, store, probe) -> None:
    msg = await apply(bus, sh.queue_manifest("team-a"), twice=True)
    accepted = await answer(probe, msg)
    assert isinstance(accepted, events.RequestAccepted)
    assert (accepted.kind, accepted.name, accepted.outcome) == ("Queue", "team-a", "created")
    await settled(probe)
    stored = await store.get(records.QUEUE, "team-a")
    assert stored.version == 1 and stored.decode(records.QueueDoc).state == "Open"
    assert len(await probe.messages(subjects.result(msg.event_id))) == 1


async def test_queue_applied_again_with_a_change_is_configured(splitter, bus, store, probe) -> None:
    await answer(probe, await apply(bus, sh.queue_manifest("team-a")))
    again = await answer(probe, await apply(bus, sh.queue_manifest("team-a", weight=3)))
    assert again.outcome == "configured"
    assert (await store.get(records.QUEUE, "team-a")).decode(records.QueueDoc).manifest["spec"]["weight"] == 3


# -- Job ------------------------------------------------------------------------------------------

async def test_job_applied_twice_is_stored_once_and_placed_once(splitter, bus, store, probe) -> None:
    await with_clusters(store)
    msg = await apply(bus, sh.job_manifest("train-1", replicas=4), twice=True)
    accepted = await answer(probe, msg)
    assert (accepted.kind, accepted.name, accepted.outcome) == ("Job", "train-1", "created")
    await settled(probe)
    places = await probe.decoded(subjects.PLACE_CHILD, events.PlaceChild)
    assert len(places) == 1
    place = places[0]
    assert (place.child, place.hyperjob, place.clusters) == ("train-1", "", ["cluster-a", "cluster-b"])
    assert place.job["spec"]["tasks"][0]["replicas"] == 4 and place.correlation_id == msg.event_id
    stored = await store.get(records.HYPERJOB, "train-1")
    doc = stored.decode(records.HyperJobDoc)
    assert stored.version == 1 and doc.plain and [c.name for c in doc.children] == ["train-1"]


# -- HyperJob -------------------------------------------------------------------------------------

async def test_example_hyperjob_is_split_32_32_and_each_child_placed_once(splitter, bus, store, probe) -> None:
    await with_clusters(store)
    queue, hyperjob = example()
    assert (await answer(probe, await apply(bus, queue))).outcome == "created"
    msg = await apply(bus, hyperjob, twice=True)
    accepted = await answer(probe, msg)
    assert (accepted.kind, accepted.name, accepted.outcome) == ("HyperJob", HJ, "created")
    await probe.wait(subjects.PLACE_CHILD, events.PlaceChild, count=2)
    await settled(probe)

    places = sorted(await probe.decoded(subjects.PLACE_CHILD, events.PlaceChild), key=lambda p: p.rank_offset)
    assert len(places) == 2
    assert [p.clusters for p in places] == [["cluster-a"], ["cluster-b"]]
    assert [p.hyperjob for p in places] == [HJ, HJ] and [p.rank_offset for p in places] == [0, 32]
    assert all(p.world_size == 64 and p.job["spec"]["tasks"][0]["replicas"] == 32 for p in places)
    ranks = sorted(int(env["HYPERJOB_RANK"]) for p in places for env in p.env_by_pod.values())
    assert ranks == list(range(64))
    stored = await store.get(records.HYPERJOB, HJ)
    doc = stored.decode(records.HyperJobDoc)
    assert stored.version == 1 and doc.generation == 1 and not doc.waiting_reason
    assert sorted((c.cluster, c.replicas) for c in doc.children) == [("cluster-a", 32), ("cluster-b", 32)]
    assert sorted(c.name for c in doc.children) == sorted(p.child for p in places)


async def test_example_hyperjob_applied_unchanged_places_nothing_more(splitter, bus, store, probe) -> None:
    await with_clusters(store)
    queue, hyperjob = example()
    await answer(probe, await apply(bus, queue))
    await answer(probe, await apply(bus, hyperjob))
    again = await answer(probe, await apply(bus, hyperjob))
    assert again.outcome == "unchanged"
    await settled(probe)
    assert len(await probe.messages(subjects.PLACE_CHILD)) == 2
    assert (await store.get(records.HYPERJOB, HJ)).version == 1


async def test_hyperjob_without_room_waits_and_is_split_when_capacity_appears(splitter, bus, store, probe) -> None:
    await sh.put_clusters(store, sh.cluster_doc("cluster-a", full=True), sh.cluster_doc("cluster-b"))
    queue, hyperjob = example()
    await answer(probe, await apply(bus, queue))
    accepted = await answer(probe, await apply(bus, hyperjob))
    assert accepted.outcome == "created"
    waiting = await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting)
    assert waiting[0].hyperjob == HJ and "cluster-a" in waiting[0].reason
    doc = await sh.doc(store, records.HYPERJOB, HJ, records.HyperJobDoc)
    assert doc.waiting_reason and doc.children == []
    assert await probe.messages(subjects.PLACE_CHILD) == []

    await sh.put_clusters(store, sh.cluster_doc("cluster-a"), sh.cluster_doc("cluster-b"))
    places = await probe.wait(subjects.PLACE_CHILD, events.PlaceChild, count=2)
    assert sorted(p.clusters[0] for p in places) == ["cluster-a", "cluster-b"]
    doc = await sh.doc(store, records.HYPERJOB, HJ, records.HyperJobDoc, where=lambda d: bool(d.children))
    assert not doc.waiting_reason and len(doc.children) == 2
    await settled(probe)
    assert len(await probe.messages(subjects.PLACE_CHILD)) == 2


# -- rejections -----------------------------------------------------------------------------------

def _hyperjob(change: Any) -> dict[str, Any]:
    manifest = copy.deepcopy(example()[1])
    change(manifest)
    return manifest


def _job(change: Any) -> dict[str, Any]:
    manifest = sh.job_manifest("train-bad", queue="global-ai")
    change(manifest)
    return manifest


REJECTIONS = [
    pytest.param(_hyperjob(lambda m: m["spec"].update(bogus=1)), "$.spec", "bogus", id="unknown-field"),
    pytest.param(_hyperjob(lambda m: m["spec"]["template"]["spec"]["tasks"][0].update(replicas=-1)),
                 "$.spec.template.spec.tasks[0].replicas", ">= 0", id="negative-replicas"),
    pytest.param(_job(lambda m: m["spec"]["tasks"][0].update(replicas=-2)),
                 "$.spec.tasks[0].replicas", ">= 0", id="job-negative-replicas"),
    pytest.param(_hyperjob(lambda m: m["spec"]["splitPolicy"]["clusters"][1].update(replicas=31)),
                 "$.spec.splitPolicy.clusters", "63", id="split-counts-do-not-add-up"),
    pytest.param(_hyperjob(lambda m: m["spec"]["splitPolicy"]["clusters"][1].update(name="cluster-z")),
                 "$.spec.splitPolicy.clusters[1].name", "cluster-z", id="unknown-cluster"),
    pytest.param(_hyperjob(lambda m: m["spec"]["template"]["spec"].update(queue="no-such-queue")),
                 "$.spec.template.spec.queue", "no-such-queue", id="hyperjob-missing-queue"),
    pytest.param(_job(lambda m: m["spec"].update(queue="no-such-queue")),
                 "$.spec.queue", "no-such-queue", id="job-missing-queue"),
]


@pytest.mark.parametrize(("manifest", "path", "detail"), REJECTIONS)
async def test_bad_manifest_is_rejected_naming_the_field_and_changes_nothing(splitter, bus, store, probe,
                                                                             manifest, path, detail) -> None:
    await with_clusters(store)
    await answer(probe, await apply(bus, example()[0]))  # the queue global-ai
    hj_before = await probe.messages("hj.>")
    msg = await apply(bus, manifest, twice=True)
    rejected = await answer(probe, msg)
    assert isinstance(rejected, events.RequestRejected), rejected
    assert rejected.reason.startswith(path + ":") and detail in rejected.reason, rejected.reason
    assert rejected.name == manifest["metadata"]["name"] and rejected.kind == manifest["kind"]
    await settled(probe)
    assert await store.list(records.HYPERJOB) == {}
    assert list(await store.list(records.QUEUE)) == ["global-ai"]
    assert await probe.messages("sched.>") == []
    hj_after = await probe.messages("hj.>")
    new = [m.subject for m in hj_after[len(hj_before):]]
    assert new == [subjects.APPLY, subjects.APPLY, subjects.result(msg.event_id)]


# -- deletes --------------------------------------------------------------------------------------

async def removed(bus: Any, cluster: str, job: str, hyperjob: str = "", *, twice: bool = False) -> events.JobRemoved:
    msg = sh.message(events.JobRemoved, cluster=cluster, job=job, hyperjob=hyperjob)
    await sh.send(bus, subjects.job_removed(cluster), msg)
    if twice:
        await sh.send(bus, subjects.job_removed(cluster), msg, copy=1)
    return msg


async def test_deleting_a_job_removes_its_child_then_forgets_it(splitter, bus, store, probe) -> None:
    await with_clusters(store)
    await answer(probe, await apply(bus, sh.job_manifest("train-1")))
    delete = sh.message(events.DeleteObject, kind="Job", name="train-1")
    await sh.send(bus, subjects.DELETE, delete)
    await sh.send(bus, subjects.DELETE, delete, copy=1)
    accepted = await answer(probe, delete)
    assert accepted.outcome == "deleting"
    unplace = await probe.wait(subjects.UNPLACE_CHILD, events.RemoveChild)
    assert [u.child for u in unplace] == ["train-1"]
    doc = await sh.doc(store, records.HYPERJOB, "train-1", records.HyperJobDoc)
    assert doc.deleting
    await settled(probe)
    assert len(await probe.messages(subjects.UNPLACE_CHILD)) == 1
    assert (await store.get(records.HYPERJOB, "train-1")).version == 2

    await removed(bus, "cluster-a", "train-1", twice=True)
    gone = await probe.wait(subjects.HYPERJOB_DELETED, events.HyperJobDeleted)
    assert [g.name for g in gone] == ["train-1"]
    await settled(probe)
    assert await store.get(records.HYPERJOB, "train-1") is None
    assert len(await probe.messages(subjects.HYPERJOB_DELETED)) == 1


async def test_deleting_a_hyperjob_ends_only_when_every_child_is_gone(splitter, bus, store, probe) -> None:
    await with_clusters(store)
    queue, hyperjob = example()
    await answer(probe, await apply(bus, queue))
    await answer(probe, await apply(bus, hyperjob))
    places = await probe.wait(subjects.PLACE_CHILD, events.PlaceChild, count=2)
    delete = sh.message(events.DeleteObject, kind="HyperJob", name=HJ)
    await sh.send(bus, subjects.DELETE, delete)
    assert (await answer(probe, delete)).outcome == "deleting"
    unplaced = await probe.wait(subjects.UNPLACE_CHILD, events.RemoveChild, count=2)
    assert sorted(u.child for u in unplaced) == sorted(p.child for p in places)

    first, second = sorted(places, key=lambda p: p.rank_offset)
    await removed(bus, "cluster-a", first.child, HJ, twice=True)
    await settled(probe)
    doc = await sh.doc(store, records.HYPERJOB, HJ, records.HyperJobDoc)
    assert doc.deleting and [c.name for c in doc.children] == [second.child]
    assert await probe.messages(subjects.HYPERJOB_DELETED) == []

    await removed(bus, "cluster-b", second.child, HJ)
    await probe.wait(subjects.HYPERJOB_DELETED, events.HyperJobDeleted)
    await settled(probe)
    assert await store.get(records.HYPERJOB, HJ) is None


async def test_hyperjob_applied_while_deleting_is_rejected(splitter, bus, store, probe) -> None:
    await with_clusters(store)
    queue, hyperjob = example()
    await answer(probe, await apply(bus, queue))
    await answer(probe, await apply(bus, hyperjob))
    delete = sh.message(events.DeleteObject, kind="HyperJob", name=HJ)
    await sh.send(bus, subjects.DELETE, delete)
    await answer(probe, delete)
    again = await answer(probe, await apply(bus, hyperjob))
    assert isinstance(again, events.RequestRejected) and again.reason.startswith("$.metadata.name:")


async def test_deleting_a_waiting_hyperjob_is_immediate(splitter, bus, store, probe) -> None:
    queue, hyperjob = example()
    await sh.put_clusters(store, sh.cluster_doc("cluster-a", nodes=1), sh.cluster_doc("cluster-b", nodes=1))
    await answer(probe, await apply(bus, queue))
    await answer(probe, await apply(bus, hyperjob))
    await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting)
    delete = sh.message(events.DeleteObject, kind="HyperJob", name=HJ)
    await sh.send(bus, subjects.DELETE, delete)
    assert (await answer(probe, delete)).outcome == "deleting"
    await probe.wait(subjects.HYPERJOB_DELETED, events.HyperJobDeleted)
    await settled(probe)
    assert await store.get(records.HYPERJOB, HJ) is None
    assert await probe.messages(subjects.UNPLACE_CHILD) == []


async def test_delete_of_unknown_object_is_rejected(splitter, bus, store, probe) -> None:
    delete = sh.message(events.DeleteObject, kind="HyperJob", name="nope")
    await sh.send(bus, subjects.DELETE, delete)
    rejected = await answer(probe, delete)
    assert isinstance(rejected, events.RequestRejected) and "not found" in rejected.reason


async def test_queue_in_use_is_not_deleted_and_an_unused_one_is(splitter, bus, store, probe) -> None:
    await with_clusters(store)
    await answer(probe, await apply(bus, sh.queue_manifest("busy")))
    await answer(probe, await apply(bus, sh.queue_manifest("idle")))
    await answer(probe, await apply(bus, sh.job_manifest("train-1", queue="busy")))
    busy = sh.message(events.DeleteObject, kind="Queue", name="busy")
    idle = sh.message(events.DeleteObject, kind="Queue", name="idle")
    await sh.send(bus, subjects.DELETE, busy)
    await sh.send(bus, subjects.DELETE, idle)
    refused = await answer(probe, busy)
    assert isinstance(refused, events.RequestRejected) and "train-1" in refused.reason
    assert (await answer(probe, idle)).outcome == "deleted"
    await settled(probe)
    assert list(await store.list(records.QUEUE)) == ["busy"]


async def test_job_removed_for_a_job_not_being_deleted_changes_nothing(splitter, bus, store, probe) -> None:
    await with_clusters(store)
    await answer(probe, await apply(bus, sh.job_manifest("train-1")))
    await removed(bus, "cluster-a", "train-1")
    await settled(probe)
    stored = await store.get(records.HYPERJOB, "train-1")
    assert stored.version == 1 and not stored.decode(records.HyperJobDoc).deleting


async def test_hyperjob_whose_publish_failed_after_the_write_is_answered_and_placed_once(bus, store, probe) -> None:
    flaky = sh.FlakyBus(bus, failures=0)
    runtime = Runtime("splitter", flaky, store)
    await build(Settings(replan_period=0.1), runtime)
    try:
        await with_clusters(store)
        queue, hyperjob = example()
        await answer(probe, await apply(bus, queue))
        flaky.failures = 1
        msg = await apply(bus, hyperjob)
        assert (await answer(probe, msg)).outcome == "created"
        await probe.wait(subjects.PLACE_CHILD, events.PlaceChild, count=2)
        await settled(probe)
        assert flaky.failures == 0
        assert len(await probe.messages(subjects.PLACE_CHILD)) == 2
        assert len(await probe.messages(subjects.result(msg.event_id))) == 1
        assert await sh.version(store, records.HYPERJOB, HJ) == 1
    finally:
        await runtime.stop()

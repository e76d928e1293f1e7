"""The splitter (its own ``build`` on a runtime over real JetStream and Redis): applies are answered on
``hj.result.<id>``; accepted objects are stored, announced and submitted for admission; an
admitted HyperJob is split into one ``PlaceChildren``; a rejected manifest changes nothing;
deletes wait for every child to be gone; commands go to each child's cluster. Every handler
given the same message twice has one effect, and so has a message whose handling crashed after
its commit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from hyperjob import events, fleetcore, records
from hyperjob.events import subjects
from hyperjob.servicekit import Runtime
from hyperjob.services.splitter.app import build
from hyperjob.services.splitter.config import Settings
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

HJ = "train"
CLUSTERS = {"c1": 2, "c2": 2}


@pytest.fixture
async def splitter(bus, store) -> AsyncIterator[Runtime]:
    await sh.report_capacity(bus, sh.capacity("c1"), sh.capacity("c2"))
    async with sh.running("splitter", build, Settings(replan_period=0.2), bus, store) as (runtime, _):
        yield runtime


async def send(
    bus: Any, probe: sh.Probe, subject: str, msg: events.Message, *, again: bool = False, durable: str = "splitter"
) -> events.Message:
    """Send ``msg`` and wait until it is handled; ``again``: then send it once more (a redelivery,
    after the first was committed) and wait for that too."""
    await sh.send(bus, subject, msg)
    await probe.settled(durable, subject)
    if again:
        await sh.send(bus, subject, msg, copy=1)
        await probe.settled(durable, subject)
    return msg


async def answer(probe: sh.Probe, msg: events.Message) -> events.RequestAccepted | events.RequestRejected:
    found = await probe.wait(subjects.result(msg.event_id))
    assert len(found) == 1, found
    return found[0]  # type: ignore[return-value]


async def hyperjob_doc(store: Any, name: str = HJ) -> records.HyperJobDoc:
    return await sh.doc(store, records.HYPERJOB, name, records.HyperJobDoc)


async def applied_and_admitted(bus: Any, probe: sh.Probe, manifest: dict[str, Any]) -> events.PlaceChildren:
    await send(bus, probe, subjects.APPLY, sh.apply(manifest))
    name = manifest["metadata"]["name"]
    await send(
        bus,
        probe,
        subjects.OWNER_ADMITTED,
        sh.message(events.OwnerAdmitted, name=name, queue="default"),
        durable="splitter-sched",
    )
    [place] = await probe.wait(subjects.PLACE_CHILDREN, events.PlaceChildren, where=lambda m: m.owner == name)
    return place


# -- queues and priority classes ----------------------------------------------------------------


async def test_a_queue_applied_twice_is_stored_announced_and_answered_once(splitter, bus, store, probe) -> None:
    msg = await send(bus, probe, subjects.APPLY, sh.apply(sh.queue_manifest("team-a")), again=True)
    accepted = await answer(probe, msg)
    assert isinstance(accepted, events.RequestAccepted)
    assert (accepted.kind, accepted.name, accepted.outcome) == ("Queue", "team-a", "created")
    stored = await store.get(records.QUEUE, "team-a")
    assert stored.version == 1 and stored.decode(records.QueueDoc).state == "Open"
    [announced] = await probe.decoded(subjects.queue_config("team-a"), events.QueueChanged)
    assert (announced.name, announced.state, announced.manifest["kind"]) == ("team-a", "Open", "Queue")
    changelog = await probe.changelog("splitter")
    assert changelog["queue/team-a"].headers["Hyperjob-Version"] == "1"
    assert changelog["queue/team-a"].data == stored.data


async def test_a_queue_applied_again_is_configured_or_unchanged(splitter, bus, store, probe) -> None:
    await send(bus, probe, subjects.APPLY, sh.apply(sh.queue_manifest("team-a")))
    changed = await send(bus, probe, subjects.APPLY, sh.apply(sh.queue_manifest("team-a", weight=3)))
    same = await send(bus, probe, subjects.APPLY, sh.apply(sh.queue_manifest("team-a", weight=3)))
    assert (await answer(probe, changed)).outcome == "configured"  # type: ignore[union-attr]
    assert (await answer(probe, same)).outcome == "unchanged"  # type: ignore[union-attr]
    assert await sh.version(store, records.QUEUE, "team-a") == 2
    [announced] = await probe.decoded(subjects.queue_config("team-a"), events.QueueChanged)
    assert announced.manifest["spec"]["weight"] == 3


async def test_closing_a_queue_is_announced_and_deleting_a_used_queue_is_refused(splitter, bus, store, probe) -> None:
    await send(bus, probe, subjects.APPLY, sh.apply(sh.queue_manifest("team-a")))
    await send(bus, probe, subjects.APPLY, sh.apply(sh.hyperjob_manifest(HJ, CLUSTERS, queue="team-a")))
    close = await send(
        bus,
        probe,
        subjects.OBJECT_COMMAND,
        sh.message(events.CommandObject, kind="Queue", name="team-a", action="close"),
        again=True,
    )
    assert (await answer(probe, close)).outcome == "commanded"  # type: ignore[union-attr]
    [announced] = await probe.decoded(subjects.queue_config("team-a"), events.QueueChanged)
    assert announced.state == "Closed"
    delete = await send(bus, probe, subjects.DELETE, sh.message(events.DeleteObject, kind="Queue", name="team-a"))
    refused = await answer(probe, delete)
    assert isinstance(refused, events.RequestRejected) and HJ in refused.reason
    assert (await store.get(records.QUEUE, "team-a")).decode(records.QueueDoc).state == "Closed"
    assert await sh.version(store, records.QUEUE, "team-a") == 2  # created, closed; the copy changed nothing


async def test_a_priority_class_is_stored_and_announced(splitter, bus, store, probe) -> None:
    manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
        "globalDefault": True,
    }
    msg = await send(bus, probe, subjects.APPLY, sh.apply(manifest))
    assert (await answer(probe, msg)).outcome == "created"  # type: ignore[union-attr]
    stored = (await store.get(records.PRIORITY_CLASS, "high")).decode(records.PriorityClassDoc)
    assert (stored.value, stored.global_default) == (1000, True)
    [announced] = await probe.decoded(subjects.priority_class_config("high"), events.PriorityClassChanged)
    assert (announced.value, announced.global_default) == (1000, True)


# -- rejections ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "path"),
    [
        (sh.hyperjob_manifest(HJ, CLUSTERS, queue="nope"), "queue"),
        (sh.hyperjob_manifest(HJ, {"c1": 2, "c9": 2}), "splitPolicy.clusters[1]"),
        ({**sh.job_manifest("j"), "spec": {**sh.job_manifest("j")["spec"], "tasks": []}}, "$.spec.tasks"),
        ({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Gadget", "metadata": {"name": "g"}}, "kind"),
    ],
    ids=["unknown-queue", "unknown-cluster", "no-tasks", "unknown-kind"],
)
async def test_a_rejected_manifest_names_the_field_and_changes_nothing(
    splitter, bus, store, probe, manifest, path
) -> None:
    msg = await send(bus, probe, subjects.APPLY, sh.apply(manifest))
    rejected = await answer(probe, msg)
    assert isinstance(rejected, events.RequestRejected) and path in rejected.reason, rejected
    name = manifest["metadata"]["name"]
    assert await store.get(records.HYPERJOB, name) is None
    assert await probe.messages(subjects.OWNER_SUBMITTED) == [] and await probe.messages(subjects.HYPERJOB_SPEC) == []
    assert await probe.changelog("splitter") == {}


# -- a HyperJob's life --------------------------------------------------------------------------


async def test_an_applied_hyperjob_is_stored_announced_and_submitted_once(splitter, bus, store, probe) -> None:
    msg = await send(bus, probe, subjects.APPLY, sh.apply(sh.hyperjob_manifest(HJ, CLUSTERS)), again=True)
    assert (await answer(probe, msg)).outcome == "created"  # type: ignore[union-attr]
    doc = await hyperjob_doc(store)
    assert (doc.admitted, doc.children, doc.generation) == (False, [], 1)
    assert await sh.version(store, records.HYPERJOB, HJ) == 1
    [submitted] = await probe.decoded(subjects.OWNER_SUBMITTED, events.OwnerSubmitted)
    assert (submitted.name, submitted.queue, submitted.plain, submitted.generation) == (HJ, "default", False, 1)
    assert submitted.request["nvidia.com/gpu"] == 4.0 and submitted.request["cpu"] == 32.0
    assert submitted.causation_id == msg.event_id
    [spec] = await probe.decoded(subjects.HYPERJOB_SPEC, events.HyperJobSpecChanged)
    assert (spec.name, spec.manifest["kind"], spec.children) == (HJ, "HyperJob", [])


async def test_an_admitted_hyperjob_is_split_into_one_placement_request(splitter, bus, store, probe) -> None:
    await send(bus, probe, subjects.APPLY, sh.apply(sh.hyperjob_manifest(HJ, CLUSTERS)))
    admitted = sh.message(events.OwnerAdmitted, name=HJ, queue="default")
    await send(bus, probe, subjects.OWNER_ADMITTED, admitted, again=True, durable="splitter-sched")
    [place] = await probe.decoded(subjects.PLACE_CHILDREN, events.PlaceChildren)
    assert (place.owner, place.plain, place.gang, place.world_size, place.attempt) == (HJ, False, 2, 4, 1)
    assert [(c.clusters, c.job["spec"]["tasks"][0]["replicas"]) for c in place.children] == [(["c1"], 2), (["c2"], 2)]
    assert [(r.cluster, r.rank_offset) for r in place.plan] == [("c1", 0), ("c2", 2)]
    assert place.hyperjob["metadata"]["name"] == HJ
    doc = await hyperjob_doc(store)
    assert doc.admitted and [r.name for r in doc.children] == [c.name for c in place.children]
    assert await sh.version(store, records.HYPERJOB, HJ) == 2  # applied, then admitted: the copy changed nothing
    specs = await probe.decoded(subjects.HYPERJOB_SPEC, events.HyperJobSpecChanged)
    assert [len(s.children) for s in specs] == [0, 2]


async def test_deleting_a_placed_hyperjob_waits_for_every_child_to_be_gone(splitter, bus, store, probe) -> None:
    place = await applied_and_admitted(bus, probe, sh.hyperjob_manifest(HJ, CLUSTERS))
    first, second = (c.name for c in place.children)
    delete = await send(
        bus, probe, subjects.DELETE, sh.message(events.DeleteObject, kind="HyperJob", name=HJ), again=True
    )
    assert (await answer(probe, delete)).outcome == "deleting"  # type: ignore[union-attr]
    assert [w.name for w in await probe.decoded(subjects.OWNER_WITHDRAWN, events.OwnerWithdrawn)] == [HJ]
    unplaced = await probe.decoded(subjects.UNPLACE_CHILD, events.RemoveChild)
    assert sorted((r.child, r.cluster) for r in unplaced) == [(first, "c1"), (second, "c2")]
    assert (await hyperjob_doc(store)).deleting
    removed = sh.message(events.JobRemoved, cluster="c1", job=first, hyperjob=HJ)
    await send(bus, probe, subjects.job_removed("c1"), removed, again=True, durable="splitter-children")
    assert [r.name for r in (await hyperjob_doc(store)).children] == [second]
    assert await probe.messages(subjects.HYPERJOB_DELETED) == []
    await send(
        bus,
        probe,
        subjects.job_removed("c2"),
        sh.message(events.JobRemoved, cluster="c2", job=second, hyperjob=HJ),
        durable="splitter-children",
    )
    [deleted] = await probe.decoded(subjects.HYPERJOB_DELETED, events.HyperJobDeleted)
    assert deleted.name == HJ and await store.get(records.HYPERJOB, HJ) is None
    tombstone = (await probe.changelog("splitter"))[f"hyperjob/{HJ}"]
    assert tombstone.headers.get("Hyperjob-Deleted") == "1" and tombstone.data == b""


async def test_deleting_a_hyperjob_nobody_admitted_is_immediate(splitter, bus, store, probe) -> None:
    await send(bus, probe, subjects.APPLY, sh.apply(sh.hyperjob_manifest(HJ, CLUSTERS)))
    await send(bus, probe, subjects.DELETE, sh.message(events.DeleteObject, kind="HyperJob", name=HJ))
    assert [d.name for d in await probe.decoded(subjects.HYPERJOB_DELETED, events.HyperJobDeleted)] == [HJ]
    assert await store.get(records.HYPERJOB, HJ) is None and await probe.messages(subjects.UNPLACE_CHILD) == []
    missing = await send(bus, probe, subjects.DELETE, sh.message(events.DeleteObject, kind="HyperJob", name=HJ))
    assert isinstance(await answer(probe, missing), events.RequestRejected)


async def test_a_gang_that_timed_out_is_planned_again_once(splitter, bus, store, probe) -> None:
    first = await applied_and_admitted(bus, probe, sh.hyperjob_manifest(HJ, CLUSTERS))
    retry = sh.message(events.GangRetry, owner=HJ, attempt=2, reason="c2 did not hold in time")
    await send(bus, probe, subjects.GANG_RETRY, retry, again=True, durable="splitter-sched")
    unplaced = await probe.decoded(subjects.UNPLACE_CHILD, events.RemoveChild)
    assert sorted((r.child, r.cluster) for r in unplaced) == [(c.name, c.clusters[0]) for c in first.children]
    places = await probe.decoded(subjects.PLACE_CHILDREN, events.PlaceChildren)
    assert [(p.attempt, len(p.children)) for p in places] == [(1, 2), (2, 2)]
    doc = await hyperjob_doc(store)
    assert (doc.attempt, len(doc.children)) == (2, 2)
    stale = sh.message(events.GangRetry, owner=HJ, attempt=2, reason="the same attempt, told again")
    await send(bus, probe, subjects.GANG_RETRY, stale, durable="splitter-sched")
    assert len(await probe.messages(subjects.PLACE_CHILDREN)) == 2


def auto_manifest(name: str, gpus: int) -> dict[str, Any]:
    """A HyperJob of ``gpus`` one-GPU pods split ``auto`` (the split chooses the clusters)."""
    template = sh.job_manifest(name, replicas=gpus)
    del template["metadata"]
    split = {"mode": "auto", "accelerators": gpus, "acceleratorType": "nvidia.com/gpu"}
    spec = {"template": template, "splitPolicy": split}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "HyperJob", "metadata": {"name": name}, "spec": spec}


async def test_a_burst_of_splits_counts_the_room_each_one_took(splitter, bus, store, probe) -> None:
    """Two HyperJobs admitted one after the other on the same summaries: the second split sees
    the room the first one took (its pods are not bound yet) and goes elsewhere (issue 28)."""
    await sh.report_capacity(bus, sh.capacity("c1", nodes=1), sh.capacity("c2", nodes=1))
    first = await applied_and_admitted(bus, probe, auto_manifest("one", 8))
    second = await applied_and_admitted(bus, probe, auto_manifest("two", 8))
    assert [c.clusters for c in first.children] == [["c1"]]
    assert [c.clusters for c in second.children] == [["c2"]]


async def test_a_room_retry_that_would_not_move_a_child_keeps_the_plan(splitter, bus, store, probe) -> None:
    """The global scheduler asks for a new plan when a child cannot fit where it was planned; a
    plan pinned to its clusters (ByCluster) would not move, so nothing is replaced (issue 28)."""
    await applied_and_admitted(bus, probe, sh.hyperjob_manifest(HJ, CLUSTERS))
    reason = f"{fleetcore.ROOM_RETRY}{HJ}-job-0 waits for room on c1, c2 has it"
    retry = sh.message(events.GangRetry, owner=HJ, attempt=2, reason=reason)
    await send(bus, probe, subjects.GANG_RETRY, retry, again=True, durable="splitter-sched")
    assert await probe.messages(subjects.UNPLACE_CHILD) == []
    assert len(await probe.messages(subjects.PLACE_CHILDREN)) == 1
    assert (await hyperjob_doc(store)).attempt == 1


async def test_a_hyperjob_no_cluster_could_ever_hold_is_inadmissible_at_once(splitter, bus, store, probe) -> None:
    """Said before admission, and not submitted to its queue, where it would wait as a queue
    limit (issue 28); applied twice, said once; submitted once the fleet could hold it."""
    await send(bus, probe, subjects.APPLY, sh.apply(sh.hyperjob_manifest(HJ, {"c1": 64})), again=True)
    [waiting] = await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting)
    assert waiting.hyperjob == HJ and waiting.reason.startswith(fleetcore.INADMISSIBLE)
    assert await probe.messages(subjects.OWNER_SUBMITTED) == []
    assert (await hyperjob_doc(store)).waiting_reason == waiting.reason
    await sh.report_capacity(bus, sh.capacity("c1", nodes=16))  # now c1 could: the round submits it
    [submitted] = await probe.wait(subjects.OWNER_SUBMITTED, events.OwnerSubmitted)
    assert submitted.name == HJ
    cleared = await sh.doc(store, records.HYPERJOB, HJ, records.HyperJobDoc, where=lambda d: not d.waiting_reason)
    assert not cleared.admitted


async def test_suspend_goes_to_every_childs_cluster_and_to_the_global_scheduler(splitter, bus, store, probe) -> None:
    place = await applied_and_admitted(bus, probe, sh.hyperjob_manifest(HJ, CLUSTERS))
    suspend = sh.message(events.CommandHyperJob, name=HJ, action="suspend")
    await send(bus, probe, subjects.HYPERJOB_COMMAND, suspend, again=True)
    assert (await answer(probe, suspend)).outcome == "commanded"  # type: ignore[union-attr]
    for child, cluster in zip((c.name for c in place.children), ("c1", "c2"), strict=True):
        [command] = await probe.decoded(subjects.command_child(cluster), events.CommandChild)
        assert (command.child, command.action) == (child, "AbortJob")
    [lifecycle] = await probe.decoded(subjects.OWNER_LIFECYCLE, events.OwnerLifecycle)
    assert (lifecycle.name, lifecycle.lifecycle) == (HJ, "Suspended")
    assert (await hyperjob_doc(store)).lifecycle == "Suspended"


async def test_child_phases_are_followed_and_a_plain_job_is_its_own_child(splitter, bus, store, probe) -> None:
    await send(bus, probe, subjects.APPLY, sh.apply(sh.job_manifest("solo")))
    [submitted] = await probe.decoded(subjects.OWNER_SUBMITTED, events.OwnerSubmitted)
    assert (submitted.name, submitted.plain) == ("solo", True)
    await send(
        bus,
        probe,
        subjects.OWNER_ADMITTED,
        sh.message(events.OwnerAdmitted, name="solo", queue="default"),
        durable="splitter-sched",
    )
    [place] = await probe.wait(subjects.PLACE_CHILDREN, events.PlaceChildren)
    assert (place.plain, place.gang, [c.name for c in place.children]) == (True, 0, ["solo"])
    assert place.children[0].clusters == ["c1", "c2"]  # any live cluster
    running = sh.message(
        events.JobPhaseChanged,
        cluster="c2",
        job="solo",
        old="Pending",
        new="Running",
        counts=events.PodCounts(running=2),
    )
    await send(bus, probe, subjects.job_phase("c2"), running, again=True, durable="splitter-children")
    doc = await hyperjob_doc(store, "solo")
    assert doc.child_phases == {"solo": "Running"} and doc.children[0].cluster == "c2"


async def test_a_child_whose_name_a_job_goes_by_waits_with_that_reason(splitter, bus, store, probe) -> None:
    place = await applied_and_admitted(bus, probe, sh.hyperjob_manifest(HJ, CLUSTERS))
    child = f"other{place.children[0].name.removeprefix(HJ)}"  # what HyperJob "other" would call it
    await applied_and_admitted(bus, probe, sh.job_manifest(child))  # a plain Job already goes by it
    await send(bus, probe, subjects.APPLY, sh.apply(sh.hyperjob_manifest("other", CLUSTERS)))
    await send(
        bus,
        probe,
        subjects.OWNER_ADMITTED,
        sh.message(events.OwnerAdmitted, name="other", queue="default"),
        durable="splitter-sched",
    )
    [waiting] = await probe.wait(
        subjects.CHILD_WAITING, events.ChildPlacementWaiting, where=lambda m: m.hyperjob == "other"
    )
    assert waiting.reason == f"child {child}: a job of that name already exists"
    assert [p.owner for p in await probe.decoded(subjects.PLACE_CHILDREN, events.PlaceChildren)] == [HJ, child]


async def test_a_plain_job_named_as_a_hyperjobs_child_is_refused_naming_the_hyperjob(
    splitter, bus, store, probe
) -> None:
    place = await applied_and_admitted(bus, probe, sh.hyperjob_manifest(HJ, CLUSTERS))
    child = place.children[1].name
    rejected = await answer(probe, await send(bus, probe, subjects.APPLY, sh.apply(sh.job_manifest(child))))
    assert isinstance(rejected, events.RequestRejected)
    assert rejected.reason == f"$.metadata.name: a job named {child!r} already exists (a child of HyperJob {HJ!r})"
    assert await store.get(records.HYPERJOB, child) is None
    assert [p.owner for p in await probe.decoded(subjects.PLACE_CHILDREN, events.PlaceChildren)] == [HJ]


async def test_a_hyperjob_applied_again_after_its_delete_is_planned_as_a_new_object(
    splitter, bus, store, probe
) -> None:
    """Both lives wait for room and are planned by the replan round: the second life's placement
    request must not carry the first one's id (the global-scheduler would take it for a
    redelivery and drop it: the HyperJob never ran and its delete never ended)."""
    for life in (1, 2):
        await sh.report_capacity(bus, sh.capacity("c1", full=True), sh.capacity("c2", full=True))
        await send(bus, probe, subjects.APPLY, sh.apply(sh.hyperjob_manifest(HJ, CLUSTERS)))
        admitted = sh.message(events.OwnerAdmitted, name=HJ, queue="default")
        await send(bus, probe, subjects.OWNER_ADMITTED, admitted, durable="splitter-sched")
        await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting, count=life)
        await sh.report_capacity(bus, sh.capacity("c1"), sh.capacity("c2"))  # the round plans it
        place = (await probe.wait(subjects.PLACE_CHILDREN, events.PlaceChildren, count=life))[-1]
        await send(bus, probe, subjects.DELETE, sh.message(events.DeleteObject, kind="HyperJob", name=HJ))
        for child in place.children:
            removed = sh.message(events.JobRemoved, cluster=child.clusters[0], job=child.name, hyperjob=HJ)
            await send(bus, probe, subjects.job_removed(child.clusters[0]), removed, durable="splitter-children")
        await sh.until(lambda: _gone(store, HJ), what="the HyperJob gone")
    places = await probe.decoded(subjects.PLACE_CHILDREN, events.PlaceChildren)
    assert len({p.event_id for p in places}) == 2  # one placement request per life, each its own


async def _gone(store: Any, name: str) -> bool:
    return await store.get(records.HYPERJOB, name) is None


async def test_a_hyperjob_that_fits_nowhere_waits_and_is_planned_when_room_appears(splitter, bus, store, probe) -> None:
    await sh.report_capacity(bus, sh.capacity("c1", full=True), sh.capacity("c2", full=True))
    await send(bus, probe, subjects.APPLY, sh.apply(sh.hyperjob_manifest(HJ, CLUSTERS)))
    await send(
        bus,
        probe,
        subjects.OWNER_ADMITTED,
        sh.message(events.OwnerAdmitted, name=HJ, queue="default"),
        durable="splitter-sched",
    )
    [waiting] = await probe.wait(subjects.CHILD_WAITING, events.ChildPlacementWaiting)
    assert waiting.hyperjob == HJ and waiting.reason
    assert await probe.messages(subjects.PLACE_CHILDREN) == []
    assert (await hyperjob_doc(store)).waiting_reason == waiting.reason
    await sh.report_capacity(bus, sh.capacity("c1"), sh.capacity("c2"))  # the round plans it again
    [place] = await probe.wait(subjects.PLACE_CHILDREN, events.PlaceChildren)
    assert place.owner == HJ and len(place.children) == 2
    planned = await sh.doc(store, records.HYPERJOB, HJ, records.HyperJobDoc, where=lambda d: bool(d.children))
    assert planned.waiting_reason == ""


# -- crashes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["after-commit", "after-publish"])
async def test_a_crash_after_the_commit_has_one_effect_once_redelivered(bus, store, probe, point) -> None:
    await sh.report_capacity(bus, sh.capacity("c1"), sh.capacity("c2"))
    crash = sh.Crash(point)
    async with sh.running("splitter", build, Settings(replan_period=0.2), bus, store, fault=crash):
        msg = await send(bus, probe, subjects.APPLY, sh.apply(sh.hyperjob_manifest(HJ, CLUSTERS)))
        assert crash.fired == 1
        assert (await answer(probe, msg)).outcome == "created"  # type: ignore[union-attr]
    assert await sh.version(store, records.HYPERJOB, HJ) == 1
    assert len(await probe.messages(subjects.OWNER_SUBMITTED)) == 1
    assert len(await probe.messages(subjects.HYPERJOB_SPEC)) == 1
    assert (await probe.changelog("splitter"))[f"hyperjob/{HJ}"].headers["Hyperjob-Version"] == "1"


# -- namespaces (contract v2: a request's subject names its namespace) ------------------------------


def in_namespace(manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}


async def test_one_name_in_two_namespaces_is_two_hyperjobs_with_their_own_children(splitter, bus, store, probe) -> None:
    for team in ("team-a", "team-b"):
        apply = sh.apply(in_namespace(sh.hyperjob_manifest(HJ, CLUSTERS), team))
        msg = await send(bus, probe, subjects.in_namespace(subjects.APPLY, team), apply)
        assert (await answer(probe, msg)).outcome == "created"  # type: ignore[union-attr]
        admitted = sh.message(events.OwnerAdmitted, name=f"{team}/{HJ}", queue="default")
        await send(bus, probe, subjects.OWNER_ADMITTED, admitted, durable="splitter-sched")
    places = await probe.decoded(subjects.PLACE_CHILDREN, events.PlaceChildren)
    assert sorted(p.owner for p in places) == ["team-a/train", "team-b/train"]
    for place in places:  # children named after the namespace: no clash on a cluster
        team = place.owner.split("/")[0]
        assert [c.name for c in place.children] == [f"{team}-{HJ}-job-0", f"{team}-{HJ}-job-1"]
        assert {c.job["metadata"]["namespace"] for c in place.children} == {team}
    assert await store.get(records.HYPERJOB, HJ) is None  # nothing in the default namespace
    team_b = await hyperjob_doc(store, f"team-b/{HJ}")
    delete = sh.message(events.DeleteObject, kind="HyperJob", name=HJ)
    await send(bus, probe, subjects.in_namespace(subjects.DELETE, "team-a"), delete)
    assert (await answer(probe, delete)).outcome == "deleting"  # type: ignore[union-attr]
    assert (await hyperjob_doc(store, f"team-a/{HJ}")).deleting
    assert await hyperjob_doc(store, f"team-b/{HJ}") == team_b  # untouched


async def test_one_plain_job_name_in_two_namespaces_is_two_jobs_sent_under_their_fleet_names(
    splitter, bus, store, probe
) -> None:
    """team-a/x and team-b/x are two Jobs (ADR 0010): each is sent to its cluster under its fleet
    name, which its pods are named from; a Job of default whose name is one of them is refused."""
    for team in ("team-a", "team-b"):
        apply = sh.apply(in_namespace(sh.job_manifest("x"), team))
        msg = await send(bus, probe, subjects.in_namespace(subjects.APPLY, team), apply)
        assert (await answer(probe, msg)).outcome == "created"  # type: ignore[union-attr]
        admitted = sh.message(events.OwnerAdmitted, name=f"{team}-x", queue="default")
        await send(bus, probe, subjects.OWNER_ADMITTED, admitted, durable="splitter-sched")
    places = await probe.decoded(subjects.PLACE_CHILDREN, events.PlaceChildren)
    sent = sorted((p.owner, c.name, c.job["metadata"]["name"]) for p in places for c in p.children)
    assert sent == [("team-a-x", "team-a-x", "team-a-x"), ("team-b-x", "team-b-x", "team-b-x")]
    assert (await hyperjob_doc(store, "team-b-x")).manifest["metadata"]["name"] == "x"  # as applied
    clash = sh.apply(sh.job_manifest("team-b-x"))
    await send(bus, probe, subjects.APPLY, clash)
    refused = await answer(probe, clash)
    assert isinstance(refused, events.RequestRejected)
    assert refused.reason.startswith("$.metadata.name: default/team-b-x goes by 'team-b-x' on the clusters"), refused
    assert await store.get(records.HYPERJOB, "x") is None  # nothing in the default namespace


@pytest.mark.parametrize(
    ("subject", "request_", "field"),
    [
        (  # the object lives in another namespace than the subject's
            "hj.manifest.apply.team-a",
            lambda: sh.apply(in_namespace(sh.hyperjob_manifest(HJ, CLUSTERS), "team-b")),
            "$.metadata.namespace: namespace 'team-b' is not the namespace of the request's subject",
        ),
        (  # the request names another namespace than its subject's
            "hj.object.delete.team-a",
            lambda: sh.message(events.DeleteObject, kind="HyperJob", name=HJ, namespace="team-b"),
            "$.namespace: namespace 'team-b' is not the namespace",
        ),
        (
            "hj.hyperjob.command.team-a",
            lambda: sh.message(events.CommandHyperJob, name=HJ, action="suspend", namespace="team-b"),
            "$.namespace: namespace 'team-b' is not the namespace",
        ),
        (  # a cluster-scoped kind is for the every-namespace subject only
            "hj.manifest.apply.team-a",
            lambda: sh.apply(sh.queue_manifest("sneaky")),
            "$.kind: a Queue has no namespace",
        ),
        (  # team-a's subject does not reach team-b's HyperJob
            "hj.object.delete.team-a",
            lambda: sh.message(events.DeleteObject, kind="HyperJob", name=HJ),
            "HyperJob 'train' in namespace 'team-a' not found",
        ),
    ],
)
async def test_a_request_never_reaches_past_its_subjects_namespace(
    splitter, bus, store, probe, subject, request_, field
) -> None:
    team_b = sh.apply(in_namespace(sh.hyperjob_manifest(HJ, CLUSTERS), "team-b"))
    await send(bus, probe, subjects.in_namespace(subjects.APPLY, "team-b"), team_b)
    before = await hyperjob_doc(store, f"team-b/{HJ}")
    msg = await send(bus, probe, subject, request_())
    rejected = await answer(probe, msg)
    assert isinstance(rejected, events.RequestRejected) and rejected.reason.startswith(field), rejected
    assert await hyperjob_doc(store, f"team-b/{HJ}") == before
    assert await store.get(records.HYPERJOB, HJ) is None and await store.get(records.QUEUE, "sneaky") is None


# A request's subject is its authority (what NATS let its sender publish): a person allowed only to
# apply in team-a must not delete, command or close anything by sending another type on her subject.
_WRONG_TYPES = {
    "apply": lambda: sh.apply(in_namespace(sh.hyperjob_manifest(HJ, CLUSTERS), "team-b")),
    "delete": lambda: sh.message(events.DeleteObject, kind="HyperJob", name=HJ, namespace="team-b"),
    "command": lambda: sh.message(events.CommandHyperJob, name=HJ, action="abort", namespace="team-b"),
    "object-command": lambda: sh.message(events.CommandObject, kind="Queue", name="default", action="close"),
}
_SUBJECT_OF = {
    "apply": subjects.APPLY,
    "delete": subjects.DELETE,
    "command": subjects.HYPERJOB_COMMAND,
    "object-command": subjects.OBJECT_COMMAND,
}


@pytest.mark.parametrize("namespaced", [True, False], ids=["team-a", "bare"])
@pytest.mark.parametrize(
    ("subject_of", "sent"),
    [(s, t) for s in _SUBJECT_OF for t in _WRONG_TYPES if s != t],
)
async def test_a_request_subject_takes_its_own_request_type_only(
    splitter, bus, store, probe, subject_of, sent, namespaced
) -> None:
    team_b = sh.apply(in_namespace(sh.hyperjob_manifest(HJ, CLUSTERS), "team-b"))
    await send(bus, probe, subjects.in_namespace(subjects.APPLY, "team-b"), team_b)
    before = await hyperjob_doc(store, f"team-b/{HJ}")
    request = _SUBJECT_OF[subject_of]
    subject = subjects.in_namespace(request, "team-a") if namespaced else request
    msg = await send(bus, probe, subject, _WRONG_TYPES[sent]())
    rejected = await answer(probe, msg)
    assert isinstance(rejected, events.RequestRejected), rejected
    assert rejected.reason.startswith(f"{subject} takes {request}.v1 requests only"), rejected.reason
    [dead] = await probe.messages(subjects.dlq("splitter"))
    assert dead.headers and dead.headers.get("Hyperjob-Dlq-Reason") == "wrong-subject", dead.headers
    assert await hyperjob_doc(store, f"team-b/{HJ}") == before  # not deleted, aborted nor replaced
    assert await probe.messages(subjects.queue_config("default")) == []  # the default queue not closed


async def test_a_kubectl_exported_object_is_applied_without_its_server_set_metadata(
    splitter, bus, store, probe
) -> None:
    manifest = sh.hyperjob_manifest(HJ, CLUSTERS)
    exported = {
        **manifest,
        "metadata": {
            **manifest["metadata"],
            "uid": "0d9c4c5e-8d7b-4b53-a4b5-0b8f1b0f6a11",
            "resourceVersion": "48213",
            "generation": 3,
            "creationTimestamp": "2026-11-20T10:00:00Z",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Thing", "name": "owner", "uid": "1"}],
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update"}],
        },
        "status": {"phase": "Running"},
    }
    msg = await send(bus, probe, subjects.APPLY, sh.apply(exported))
    assert (await answer(probe, msg)).outcome == "created"  # type: ignore[union-attr]
    again = await send(bus, probe, subjects.APPLY, sh.apply(manifest))
    assert (await answer(probe, again)).outcome == "unchanged"  # type: ignore[union-attr]
    stored = (await hyperjob_doc(store)).manifest
    assert "status" not in stored and not {"uid", "resourceVersion", "managedFields"} & set(stored["metadata"])


# -- commands that would change nothing are refused -------------------------------------------------


async def phases(bus: Any, probe: sh.Probe, place: events.PlaceChildren, phase: str) -> None:
    for child, cluster in zip((c.name for c in place.children), ("c1", "c2"), strict=True):
        news = sh.message(events.JobPhaseChanged, cluster=cluster, job=child, hyperjob=HJ, old="Running", new=phase)
        await send(bus, probe, subjects.job_phase(cluster), news, durable="splitter-children")


async def test_resume_of_an_aborted_hyperjob_and_commands_on_a_finished_one_are_refused(
    splitter, bus, store, probe
) -> None:
    place = await applied_and_admitted(bus, probe, sh.hyperjob_manifest(HJ, CLUSTERS))
    resume = await send(
        bus, probe, subjects.HYPERJOB_COMMAND, sh.message(events.CommandHyperJob, name=HJ, action="resume")
    )
    refused = await answer(probe, resume)
    assert isinstance(refused, events.RequestRejected)
    assert refused.reason == "HyperJob 'train' is not suspended (Active): nothing to resume"
    abort = await send(
        bus, probe, subjects.HYPERJOB_COMMAND, sh.message(events.CommandHyperJob, name=HJ, action="abort")
    )
    assert (await answer(probe, abort)).outcome == "commanded"  # type: ignore[union-attr]
    await phases(bus, probe, place, "Aborted")
    commands_before = len(await probe.messages(subjects.command_child("c1")))
    for action, phase in (("resume", "Aborted"), ("restart", "Aborted"), ("suspend", "Aborted")):
        msg = await send(
            bus, probe, subjects.HYPERJOB_COMMAND, sh.message(events.CommandHyperJob, name=HJ, action=action)
        )
        refused = await answer(probe, msg)
        assert isinstance(refused, events.RequestRejected), action
        assert (
            refused.reason
            == f"HyperJob 'train' is {phase}: a finished HyperJob takes no {action} (delete it and apply it again)"
        )
    assert len(await probe.messages(subjects.command_child("c1"))) == commands_before  # nothing sent on


async def test_a_command_on_a_completed_hyperjob_is_refused(splitter, bus, store, probe) -> None:
    place = await applied_and_admitted(bus, probe, sh.hyperjob_manifest(HJ, CLUSTERS))
    await phases(bus, probe, place, "Completed")
    msg = await send(
        bus, probe, subjects.HYPERJOB_COMMAND, sh.message(events.CommandHyperJob, name=HJ, action="suspend")
    )
    refused = await answer(probe, msg)
    assert isinstance(refused, events.RequestRejected) and "is Completed" in refused.reason
    assert (await hyperjob_doc(store)).lifecycle == "Active"

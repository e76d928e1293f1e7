"""The status-aggregator (its own ``build`` on a runtime over real JetStream and Redis): it keeps
what the splitter says of each HyperJob (``HyperJobSpecChanged``, ``OwnerAdmitted``), folds each
child's phase news and the reasons it waits into one status, stores it and announces each change
once on ``hj.hyperjob.status``; a deleted HyperJob is forgotten. Every handler given the same
message twice has one effect, and so has a message whose handling crashed after its commit."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hyperjob import api, events, records
from hyperjob.events import subjects
from hyperjob.records.capacity import cluster_capacity
from hyperjob.servicekit import Runtime
from hyperjob.servicekit.metrics import REGISTRY
from hyperjob.services.splitter import domain as splitter_domain
from hyperjob.services.status_aggregator.app import build
from hyperjob.services.status_aggregator.config import Settings
from hyperjob.services.status_aggregator.domain import AggregateDoc, SpecDoc
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

HJ = "train"


@pytest.fixture
async def aggregator(bus, store) -> AsyncIterator[Runtime]:
    async with sh.running("status-aggregator", build, Settings(), bus, store) as (runtime, _):
        yield runtime


def spec(**fields: Any) -> events.HyperJobSpecChanged:
    """What the splitter announces of a HyperJob split over c1 and c2 (its own planning code)."""
    manifest = sh.hyperjob_manifest(HJ, {"c1": 2, "c2": 2})
    hyperjob = api.decode(manifest)
    assert isinstance(hyperjob, api.HyperJob)
    now = time.time()
    clusters = {c: cluster_capacity(sh.capacity(c), now) for c in ("c1", "c2")}
    planned = splitter_domain.plan(hyperjob, clusters, now)
    assert isinstance(planned, splitter_domain.Planned)
    return sh.message(
        events.HyperJobSpecChanged,
        name=HJ,
        manifest=api.encode(hyperjob),
        children=planned.refs,
        world_size=planned.world_size,
        **fields,
    )


async def send(
    bus: Any, probe: sh.Probe, subject: str, msg: events.Message, durable: str, *, again: bool = False
) -> None:
    await sh.send(bus, subject, msg)
    await probe.settled(durable, subject)
    if again:
        await sh.send(bus, subject, msg, copy=1)
        await probe.settled(durable, subject)


async def child_phase(
    bus: Any, probe: sh.Probe, ref: events.ChildRef, new: str, *, again: bool = False, **counts: int
) -> None:
    msg = sh.message(
        events.JobPhaseChanged,
        cluster=ref.cluster,
        job=ref.name,
        hyperjob=HJ,
        replicated_job=ref.replicated_job,
        old="",
        new=new,
        counts=events.PodCounts(**counts),
    )
    await send(bus, probe, subjects.job_phase(ref.cluster), msg, "status-aggregator-jobs", again=again)


async def statuses(probe: sh.Probe) -> list[events.HyperJobStatusChanged]:
    return await probe.decoded(subjects.HYPERJOB_STATUS, events.HyperJobStatusChanged)


async def status_doc(store: Any, phase: str) -> AggregateDoc:
    return await sh.doc(store, records.HYPERJOB_STATUS, HJ, AggregateDoc, where=lambda d: d.phase == phase)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_hyperjob_is_pending_until_admitted_then_follows_its_children_to_completed(
    aggregator, bus, store, probe
) -> None:
    counted = ("hyperjob_admissions_total", "hyperjob_submit_to_running_seconds_count")
    before = {name: sample(name) for name in counted}
    running_in_c1 = sample("hyperjob_child_job_phase_transitions_total", cluster="c1", phase="Running")
    announced = spec()
    await send(bus, probe, subjects.HYPERJOB_SPEC, announced, "status-aggregator", again=True)
    await status_doc(store, "Pending")
    assert (await store.get(records.HYPERJOB_SPEC, HJ)).decode(SpecDoc).children == announced.children
    await send(
        bus,
        probe,
        subjects.OWNER_ADMITTED,
        sh.message(events.OwnerAdmitted, name=HJ, queue="default"),
        "status-aggregator-sched",
        again=True,
    )
    await status_doc(store, "Admitted")
    first, second = announced.children
    await child_phase(bus, probe, first, "Running", again=True, running=2)
    await status_doc(store, "Admitted")  # one of two children running
    await child_phase(bus, probe, second, "Running", running=2)
    running = await status_doc(store, "Running")
    assert running.status["placement"] == {"c1": 2, "c2": 2}
    for ref in (first, second):
        await child_phase(bus, probe, ref, "Completed", succeeded=2)
    done = await status_doc(store, "Completed")
    assert [c["type"] for c in done.status["conditions"]] == ["Completed"]
    # Its metrics (servicekit.metrics.REGISTRY, on /metrics): counted once each, copies or not.
    assert {name: sample(name) - before[name] for name in counted} == dict.fromkeys(counted, 1.0)
    assert sample("hyperjob_child_job_phase_transitions_total", cluster="c1", phase="Running") == running_in_c1 + 1
    assert sample("hyperjob_hyperjobs", namespace="default", phase="Completed") == 1
    # One announcement per change (six pieces of news; the three copies changed nothing).
    assert [s.phase for s in await statuses(probe)] == [
        "Pending",
        "Admitted",
        "Admitted",
        "Running",
        "Running",
        "Completed",
    ]


async def test_v1_phase_news_still_in_the_stream_is_read_once(aggregator, bus, store, probe) -> None:
    """An upgrade finds ``job.phase.v1`` messages (flat counters) in the stream: they count."""
    announced = spec()
    await send(bus, probe, subjects.HYPERJOB_SPEC, announced, "status-aggregator")
    admitted = sh.message(events.OwnerAdmitted, name=HJ, queue="default")
    await send(bus, probe, subjects.OWNER_ADMITTED, admitted, "status-aggregator-sched")
    for ref in announced.children:
        old = sh.message(
            events.JobPhaseChangedV1,
            cluster=ref.cluster,
            job=ref.name,
            hyperjob=HJ,
            replicated_job=ref.replicated_job,
            old="Pending",
            new="Running",
            running=2,
            terminating=1,
        )
        await send(bus, probe, subjects.job_phase(ref.cluster), old, "status-aggregator-jobs", again=True)
    running = await status_doc(store, "Running")
    (replicated,) = running.status["replicatedJobsStatus"]
    assert (replicated["running"], replicated["terminating"], replicated["pending"]) == (4, 2, 0)


async def test_why_a_hyperjob_waits_is_in_its_status(aggregator, bus, store, probe) -> None:
    await send(bus, probe, subjects.HYPERJOB_SPEC, spec(), "status-aggregator")
    waiting = sh.message(events.ChildPlacementWaiting, child="", hyperjob=HJ, reason="queue default: no room")
    await send(bus, probe, subjects.CHILD_WAITING, waiting, "status-aggregator-sched", again=True)
    doc = await sh.doc(
        store,
        records.HYPERJOB_STATUS,
        HJ,
        AggregateDoc,
        where=lambda d: d.status.get("waitingReason") == "queue default: no room",
    )
    assert doc.phase == "Pending"
    [_, latest] = await statuses(probe)
    assert latest.status["waitingReason"] == "queue default: no room"
    other = sh.message(events.ChildPlacementWaiting, child="", hyperjob="someone-else", reason="x")
    await send(bus, probe, subjects.CHILD_WAITING, other, "status-aggregator-sched")
    assert await store.get(records.HYPERJOB_STATUS, "someone-else") is None


async def test_plain_jobs_are_not_aggregated_and_a_deleted_hyperjob_is_forgotten(aggregator, bus, store, probe) -> None:
    plain = sh.message(events.HyperJobSpecChanged, name="solo", manifest=sh.job_manifest("solo"), plain=True)
    await send(bus, probe, subjects.HYPERJOB_SPEC, plain, "status-aggregator")
    assert await store.get(records.HYPERJOB_SPEC, "solo") is None
    await send(bus, probe, subjects.HYPERJOB_SPEC, spec(), "status-aggregator")
    await status_doc(store, "Pending")
    await send(
        bus,
        probe,
        subjects.HYPERJOB_DELETED,
        sh.message(events.HyperJobDeleted, name=HJ),
        "status-aggregator",
        again=True,
    )
    assert await store.get(records.HYPERJOB_SPEC, HJ) is None and await store.get(records.HYPERJOB_STATUS, HJ) is None
    news = sh.message(events.JobPhaseChanged, cluster="c1", job="train-0", hyperjob=HJ, old="", new="Running")
    await send(bus, probe, subjects.job_phase("c1"), news, "status-aggregator-jobs")
    assert await store.get(records.HYPERJOB_STATUS, HJ) is None  # news of a forgotten HyperJob


async def test_news_that_comes_before_its_spec_is_folded_in_when_the_spec_comes(aggregator, bus, store, probe) -> None:
    """Issue 33, item 3: a killed aggregator's spec message comes back only after its ack wait,
    while the children's news flows on through the other consumer. That news is its last (the
    children completed meanwhile): kept, the HyperJob completes once its spec comes."""
    accepted = time.time()
    announced = spec(created=accepted)
    for ref in announced.children:
        await child_phase(bus, probe, ref, "Completed", again=True, succeeded=2)
    assert await store.get(records.HYPERJOB_STATUS, HJ) is None  # nothing to fold it into yet
    await send(bus, probe, subjects.HYPERJOB_SPEC, announced, "status-aggregator")
    done = await status_doc(store, "Completed")
    assert sorted(done.children) == sorted(f"{ref.name}@{ref.cluster}" for ref in announced.children)
    assert await store.get(records.HYPERJOB_EARLY_NEWS, HJ) is None


async def test_news_of_a_deleted_hyperjob_is_not_folded_into_a_new_one_of_that_name(
    aggregator, bus, store, probe
) -> None:
    first = spec()
    await send(bus, probe, subjects.HYPERJOB_SPEC, first, "status-aggregator")
    deleted = sh.message(events.HyperJobDeleted, name=HJ)
    await send(bus, probe, subjects.HYPERJOB_DELETED, deleted, "status-aggregator")
    for ref in first.children:  # the old children's endings, arriving after the delete
        await child_phase(bus, probe, ref, "Failed", failed=2)
    await send(bus, probe, subjects.HYPERJOB_SPEC, spec(created=time.time()), "status-aggregator")
    await probe.settled("status-aggregator", subjects.HYPERJOB_SPEC)
    doc = await status_doc(store, "Pending")
    assert doc.children == {}
    assert await store.get(records.HYPERJOB_EARLY_NEWS, HJ) is None


async def test_a_spec_in_deletion_shows_terminating(aggregator, bus, store, probe) -> None:
    await send(bus, probe, subjects.HYPERJOB_SPEC, spec(), "status-aggregator")
    await send(bus, probe, subjects.HYPERJOB_SPEC, spec(deleting=True), "status-aggregator")
    await status_doc(store, "Terminating")


@pytest.mark.parametrize("point", ["after-commit", "after-publish"])
async def test_a_crash_after_the_commit_announces_the_status_once(bus, store, probe, point) -> None:
    crash = sh.Crash(point)
    async with sh.running("status-aggregator", build, Settings(), bus, store, fault=crash):
        await send(bus, probe, subjects.HYPERJOB_SPEC, spec(), "status-aggregator")
        assert crash.fired == 1
        await probe.wait(subjects.HYPERJOB_STATUS, events.HyperJobStatusChanged)
    assert [s.phase for s in await statuses(probe)] == ["Pending"]
    assert await sh.version(store, records.HYPERJOB_STATUS, HJ) == 1


async def test_gang_reservation_outcomes_are_counted_once(aggregator, bus, probe) -> None:
    name = "hyperjob_gang_reservations_total"
    before = {o: sample(name, cluster=c, outcome=o) for c, o in (("c1", "held"), ("c2", "lost"), ("", "released"))}
    held = sh.message(events.ReservationHeld, child="train-0", cluster="c1", hyperjob=HJ, attempt=1)
    lost = sh.message(events.ReservationHeld, child="train-1", cluster="c2", hyperjob=HJ, attempt=1, held=False)
    retry = sh.message(events.GangRetry, owner=HJ, attempt=2, reason="train-1 not held in 30s")
    await send(bus, probe, subjects.RESERVATION_HELD, held, "status-aggregator-sched", again=True)
    await send(bus, probe, subjects.RESERVATION_HELD, lost, "status-aggregator-sched")
    await send(bus, probe, subjects.GANG_RETRY, retry, "status-aggregator-sched")
    assert sample(name, cluster="c1", outcome="held") == before["held"] + 1  # its copy counted no more
    assert sample(name, cluster="c2", outcome="lost") == before["lost"] + 1
    assert sample(name, cluster="", outcome="released") == before["released"] + 1


async def test_a_childs_podgroup_message_is_why_its_hyperjob_waits_until_it_runs(aggregator, bus, store, probe) -> None:
    announced = spec()
    await send(bus, probe, subjects.HYPERJOB_SPEC, announced, "status-aggregator")
    admitted = sh.message(events.OwnerAdmitted, name=HJ, queue="default")
    await send(bus, probe, subjects.OWNER_ADMITTED, admitted, "status-aggregator-sched")
    first, second = announced.children
    await child_phase(bus, probe, first, "Running", running=2)
    why = "2/2 tasks in gang unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu"

    async def podgroup(phase: str, reason: str, *, again: bool = False) -> None:
        msg = sh.message(
            events.PodGroupPhaseChanged, cluster=second.cluster, job=second.name, phase=phase, reason=reason
        )
        await send(bus, probe, subjects.podgroup_phase(second.cluster), msg, "status-aggregator-podgroups", again=again)

    await podgroup("Inqueue", why, again=True)
    expected = f"child {second.name} on cluster {second.cluster}: {why}"
    doc = await sh.doc(
        store, records.HYPERJOB_STATUS, HJ, AggregateDoc, where=lambda d: d.status.get("waitingReason") == expected
    )
    assert doc.phase == "Admitted"
    assert sample("hyperjob_pending_hyperjobs", namespace="default", reason="Unschedulable") >= 1
    await podgroup("Running", "")
    await child_phase(bus, probe, second, "Running", running=2)
    doc = await status_doc(store, "Running")
    assert "waitingReason" not in doc.status or doc.status["waitingReason"] == ""
    assert doc.unschedulable == {}

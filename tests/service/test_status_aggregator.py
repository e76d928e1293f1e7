"""The status-aggregator in-process on real JetStream and Redis: the children's phase changes fold
into the HyperJob's ``hjstatus`` document (Running, then Completed with its condition), each
change announced once; waiting reasons show; a deleted HyperJob's status goes away.

The HyperJob, its split and its admission are written as the splitter and the global-scheduler
write them (the example HyperJob, 32 + 32 trainers on cluster-a and cluster-b)."""

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
from servicekit import Runtime
from status_aggregator.app import build
from status_aggregator.config import Settings

sys.path.insert(0, str(Path(__file__).parent))
import service_helpers as sh  # noqa: E402

pytestmark = pytest.mark.service

HJ = "llm-train-hyperjob"
DURABLES = [("status-aggregator-jobs", subjects.job_phase("x")), ("status-aggregator-waiting", subjects.CHILD_WAITING),
            ("status-aggregator-hyperjobs", subjects.HYPERJOB_DELETED),
            ("status-aggregator-admissions", subjects.OWNER_ADMITTED)]


@pytest.fixture
async def aggregator(bus, store) -> AsyncIterator[Runtime]:
    runtime = Runtime("status-aggregator", bus, store)
    await build(Settings(), runtime)
    yield runtime
    await runtime.stop()


async def settled(probe: sh.Probe) -> None:
    for durable, subject in DURABLES:
        await probe.settled(durable, subject)


async def split_example(store: Any, *, admitted: bool = True) -> list[records.ChildRef]:
    """The example HyperJob as the splitter stores it once split (and as admitted by its queue)."""
    manifest = sh.example_documents()[1]
    refs = [records.ChildRef(name=f"{HJ}-job-{i}", replicated_job="job", index=i, replicas=32, cluster=cluster)
            for i, cluster in enumerate(["cluster-a", "cluster-b"])]
    await sh.put(store, records.HYPERJOB, HJ, sh.hyperjob_owner(manifest, refs))
    if admitted:
        await sh.put(store, records.ADMISSION, HJ, records.AdmissionDoc(owner=HJ, queue="global-ai",
                                                                          request={}, admitted_at=time.time()))
    return refs


def phase_changed(ref: records.ChildRef, old: str, new: str, **counts: int) -> events.JobPhaseChanged:
    return sh.message(events.JobPhaseChanged, cluster=ref.cluster, job=ref.name, hyperjob=HJ,
                      replicated_job=ref.replicated_job, old=old, new=new, **counts)


async def send(bus: Any, msg: events.Message, subject: str, *, twice: bool = False) -> None:
    await sh.send(bus, subject, msg)
    if twice:
        await sh.send(bus, subject, msg, copy=1)


async def status(store: Any, phase: str) -> records.HyperJobStatusDoc:
    return await sh.doc(store, records.HYPERJOB_STATUS, HJ, records.HyperJobStatusDoc, where=lambda d: d.phase == phase)


def conditions(doc: records.HyperJobStatusDoc) -> list[dict[str, Any]]:
    return list(doc.status.get("conditions", []))


async def test_children_running_then_completed_make_the_hyperjob_running_then_completed(aggregator, bus, store,
                                                                                        probe) -> None:
    refs = await split_example(store)
    assert sorted(r.cluster for r in refs) == ["cluster-a", "cluster-b"]
    for ref in refs:
        await send(bus, phase_changed(ref, "Pending", "Running", running=32), subjects.job_phase(ref.cluster),
                   twice=True)
    running = await status(store, "Running")
    assert running.status["phase"] == "Running" and not any(c["type"] == "Completed" for c in conditions(running))
    await settled(probe)
    running_version = await sh.version(store, records.HYPERJOB_STATUS, HJ)
    assert running_version == 2  # one write per child's news, the copies changed nothing

    for ref in refs:
        await send(bus, phase_changed(ref, "Running", "Completed", succeeded=32), subjects.job_phase(ref.cluster),
                   twice=True)
    completed = await status(store, "Completed")
    assert [c["status"] for c in conditions(completed) if c["type"] == "Completed"] == ["True"]
    await settled(probe)
    assert await sh.version(store, records.HYPERJOB_STATUS, HJ) == running_version + 2
    announced = await probe.decoded(subjects.HYPERJOB_STATUS, events.HyperJobStatusChanged)
    assert [a.phase for a in announced][-1] == "Completed"
    assert len({a.event_id for a in announced}) == len(announced)  # each change announced once
    assert [a.phase for a in announced].count("Completed") == 1


async def test_a_failed_child_fails_the_hyperjob(aggregator, bus, store, probe) -> None:
    refs = await split_example(store)
    for ref in refs:
        await send(bus, phase_changed(ref, "Pending", "Running", running=32), subjects.job_phase(ref.cluster))
    await status(store, "Running")
    await send(bus, phase_changed(refs[0], "Running", "Failed", failed=1, running=31), subjects.job_phase(refs[0].cluster))
    failed = await status(store, "Failed")
    assert conditions(failed) == []  # the condition follows once every child is terminal
    await send(bus, phase_changed(refs[1], "Running", "Aborted", terminating=0), subjects.job_phase(refs[1].cluster))
    failed = await sh.doc(store, records.HYPERJOB_STATUS, HJ, records.HyperJobStatusDoc,
                          where=lambda d: bool(conditions(d)))
    assert failed.phase == "Failed"
    assert [(c["type"], c["status"]) for c in conditions(failed)] == [("Failed", "True")]


async def test_waiting_reason_shows_in_the_status(aggregator, bus, store, probe) -> None:
    await split_example(store, admitted=False)
    waiting = sh.message(events.ChildPlacementWaiting, child="", hyperjob=HJ, reason="cluster-a lacks 8 GPUs")
    await send(bus, waiting, subjects.CHILD_WAITING, twice=True)
    doc = await sh.doc(store, records.HYPERJOB_STATUS, HJ, records.HyperJobStatusDoc)
    await settled(probe)
    assert doc.phase == "Pending" and "cluster-a lacks 8 GPUs" in doc.status.get("waitingReason", "")
    assert await sh.version(store, records.HYPERJOB_STATUS, HJ) == 1
    assert len(await probe.messages(subjects.HYPERJOB_STATUS)) == 1


async def test_deleted_hyperjob_loses_its_status(aggregator, bus, store, probe) -> None:
    refs = await split_example(store)
    await send(bus, phase_changed(refs[0], "Pending", "Running", running=32), subjects.job_phase(refs[0].cluster))
    await sh.doc(store, records.HYPERJOB_STATUS, HJ, records.HyperJobStatusDoc)
    await send(bus, sh.message(events.HyperJobDeleted, name=HJ), subjects.HYPERJOB_DELETED, twice=True)
    await settled(probe)
    assert await store.get(records.HYPERJOB_STATUS, HJ) is None


async def test_news_of_plain_jobs_and_unknown_hyperjobs_changes_nothing(aggregator, bus, store, probe) -> None:
    await send(bus, sh.message(events.JobPhaseChanged, cluster="cluster-a", job="plain", old="Pending", new="Running"),
               subjects.job_phase("cluster-a"))
    ghost = records.ChildRef(name="ghost-job-0", replicated_job="job", index=0, replicas=1, cluster="cluster-a")
    await send(bus, sh.message(events.JobPhaseChanged, cluster="cluster-a", job=ghost.name, hyperjob="ghost",
                               old="Pending", new="Running"), subjects.job_phase("cluster-a"))
    await settled(probe)
    assert await store.list(records.HYPERJOB_STATUS) == {}
    assert await probe.messages(subjects.HYPERJOB_STATUS) == []


async def test_admission_of_a_plain_job_is_acked_and_changes_nothing(aggregator, bus, store, probe) -> None:
    manifest = sh.job_manifest("plain")
    await sh.put(store, records.HYPERJOB, "plain", sh.plain_owner(manifest))
    await send(bus, sh.message(events.OwnerAdmitted, name="plain", queue="default"), subjects.OWNER_ADMITTED)
    await settled(probe)
    assert await store.list(records.HYPERJOB_STATUS) == {}
    assert await probe.messages(subjects.dlq("status-aggregator-admissions")) == []

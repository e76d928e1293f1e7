"""The workflow-controller (its own ``build`` on a runtime over real JetStream and Redis): it answers
CronJob, JobFlow and JobTemplate requests, asks the splitter for each job they make (an
``ApplyManifest`` on the front door, as a user would), follows those jobs' phases, records a job
the splitter refused, and deletes the jobs of a CronJob or JobFlow deleted. Every message handled
twice has one effect."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hyperjob import api, events, records
from hyperjob.events import subjects
from hyperjob.servicekit import AsyncioTimers, Runtime
from hyperjob.services.workflow_controller.app import build
from hyperjob.services.workflow_controller.config import Settings
from hyperjob.services.workflow_controller.domain import CREATED_BY_JOB_FLOW, SCHEDULED_TIMESTAMP
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

DURABLE = "workflow-controller"
TASKS = [{"name": "main", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]


class ShiftedClock:
    """Wall time moved so that the next whole minute is ``lead`` seconds away: a schedule of
    ``* * * * *`` is due within the test's deadline (timers wait on this clock)."""

    def __init__(self, lead: float) -> None:
        now = time.time()
        self.offset = (60.0 - now % 60.0) - lead

    def now(self) -> float:
        return time.time() + self.offset


@contextlib.asynccontextmanager
async def controller(bus: Any, store: Any, clock: Any = None) -> AsyncIterator[Runtime]:
    if clock is None:
        async with sh.running(DURABLE, build, Settings(), bus, store) as (runtime, _):
            yield runtime
        return
    runtime = sh.TestRuntime(DURABLE, DURABLE, bus, store, clock=clock, timers=AsyncioTimers(clock))
    await build(Settings(), runtime)
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop()


async def request(bus: Any, probe: sh.Probe, subject: str, msg: events.Message) -> events.Message:
    """Send a request and return the controller's answer."""
    await sh.send(bus, subject, msg)
    await probe.settled(DURABLE, subject)
    return (await probe.wait(subjects.result(msg.event_id)))[0]


def apply(manifest: dict[str, Any]) -> events.ApplyManifest:
    return sh.message(events.ApplyManifest, manifest=manifest)


def template(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": name},
        "spec": {"minAvailable": 1, "tasks": TASKS},
    }


FLOW = {
    "apiVersion": "flow.volcano.sh/v1alpha1",
    "kind": "JobFlow",
    "metadata": {"name": "f"},
    "spec": {"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}]},
}


async def made(probe: sh.Probe, count: int) -> list[events.ApplyManifest]:
    """The job applies the controller published (the test's own applies are on the subject too)."""
    return await probe.wait(subjects.APPLY, events.ApplyManifest, count=count, where=_mine)


def _mine(message: events.Message) -> bool:
    return message.producer == DURABLE


async def test_a_jobflow_makes_each_job_once_its_targets_completed_and_records_a_refused_one(bus, store, probe) -> None:
    async with controller(bus, store):
        answer = await request(bus, probe, subjects.APPLY, apply(template("a")))
        assert isinstance(answer, events.RequestAccepted) and answer.outcome == "created"
        answer = await request(bus, probe, subjects.APPLY, apply(FLOW))
        assert isinstance(answer, events.RequestAccepted) and answer.kind == "JobFlow"
        first = await made(probe, 1)
        assert [m.manifest["metadata"]["name"] for m in first] == ["f-a"]
        assert first[0].manifest["metadata"]["labels"][CREATED_BY_JOB_FLOW] == "default.f"

        done = sh.message(events.JobPhaseChanged, cluster="c1", job="f-a", old="Running", new="Completed")
        for copy in (0, 1):  # the same news twice: b is asked for once
            await sh.send(bus, subjects.job_phase("c1"), done, copy=copy)
            await probe.settled(f"{DURABLE}-jobs", subjects.job_phase("c1"))
        waiting = await sh.doc(store, records.JOBFLOW, "f", records.JobFlowDoc, where=lambda d: bool(d.message))
        assert waiting.message == "job 'f-b' waits for JobTemplate 'b', which does not exist"
        await request(bus, probe, subjects.APPLY, apply(template("b")))  # b can be made now
        second = await made(probe, 2)
        assert [m.manifest["metadata"]["name"] for m in second] == ["f-a", "f-b"]
        doc = await sh.doc(store, records.JOBFLOW, "f", records.JobFlowDoc, where=lambda d: d.phase == "Running")
        assert doc.status["completed_jobs"] == ["f-a"] and doc.status["pending_jobs"] == ["f-b"]
        assert doc.message == ""

        refused = sh.message(
            events.RequestRejected, kind="Job", name="f-b", reason="$.spec.queue: no such queue",
            causation_id=second[1].event_id,
        )  # fmt: skip
        await sh.send(bus, subjects.result(second[1].event_id), refused)
        doc = await sh.doc(store, records.JOBFLOW, "f", records.JobFlowDoc, where=lambda d: bool(d.refused))
        assert doc.refused == {"f-b": "$.spec.queue: no such queue"} and set(doc.jobs) == {"f-a"}

        answer = await request(bus, probe, subjects.DELETE, sh.message(events.DeleteObject, kind="JobFlow", name="f"))
        assert isinstance(answer, events.RequestAccepted) and answer.outcome == "deleted"
        deletes = await probe.wait(subjects.DELETE, events.DeleteObject, where=_mine)
        assert [(m.kind, m.name) for m in deletes] == [("Job", "f-a")]
        assert await store.get(records.JOBFLOW, "f") is None


def hyperjob_template(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJobTemplate",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "templateSpec": {"minAvailable": 1, "tasks": TASKS}}]},
    }


async def test_a_hyperjob_step_is_made_as_a_hyperjob_and_its_dependents_wait_for_the_whole_of_it(
    bus, store, probe
) -> None:
    """A flow a → b whose a is a HyperJobTemplate in team-a: the controller applies the HyperJob
    team-a/f-a; its children's phases do not move the flow, the HyperJob's own Completed does (twice
    told, b is asked for once); deleting the flow deletes the HyperJob in its namespace."""
    flow = {**FLOW, "metadata": {"name": "f", "namespace": "team-a"}}
    in_team_a = {**hyperjob_template("a"), "metadata": {"name": "a", "namespace": "team-a"}}
    async with controller(bus, store):
        answer = await request(bus, probe, subjects.APPLY, apply(in_team_a))
        assert isinstance(answer, events.RequestAccepted) and answer.kind == "HyperJobTemplate"
        clash = await request(bus, probe, subjects.APPLY, apply({**template("a"), "metadata": in_team_a["metadata"]}))
        assert (
            isinstance(clash, events.RequestRejected) and "a HyperJobTemplate named 'a' already exists" in clash.reason
        )
        await request(
            bus, probe, subjects.APPLY, apply({**template("b"), "metadata": {"name": "b", "namespace": "team-a"}})
        )
        await request(bus, probe, subjects.APPLY, apply(flow))
        first = await made(probe, 1)
        assert [(m.manifest["kind"], m.manifest["metadata"]["name"]) for m in first] == [("HyperJob", "f-a")]
        assert first[0].manifest["metadata"]["namespace"] == "team-a"
        assert [rj["name"] for rj in first[0].manifest["spec"]["replicatedJobs"]] == ["w"]

        child_done = sh.message(
            events.JobPhaseChanged, cluster="c1", job="f-a-w-0", hyperjob="team-a/f-a", old="Running", new="Completed"
        )
        await sh.send(bus, subjects.job_phase("c1"), child_done)
        await probe.settled(f"{DURABLE}-jobs", subjects.job_phase("c1"))
        running = sh.message(events.HyperJobStatusChanged, name="team-a/f-a", phase="Running", status={})
        await sh.send(bus, subjects.HYPERJOB_STATUS, running)
        doc = await sh.doc(store, records.JOBFLOW, "team-a/f", records.JobFlowDoc, where=lambda d: d.phase == "Running")
        assert doc.jobs["f-a"].kind == "HyperJob" and set(doc.jobs) == {"f-a"}  # b waits for the whole HyperJob

        done = sh.message(events.HyperJobStatusChanged, name="team-a/f-a", phase="Completed", status={})
        for copy in (0, 1):
            await sh.send(bus, subjects.HYPERJOB_STATUS, done, copy=copy)
            await probe.settled(DURABLE, subjects.HYPERJOB_STATUS)
        second = await made(probe, 2)
        assert [(m.manifest["kind"], m.manifest["metadata"]["name"]) for m in second] == [
            ("HyperJob", "f-a"), ("Job", "f-b"),
        ]  # fmt: skip

        delete = sh.message(events.DeleteObject, kind="JobFlow", name="f", namespace="team-a")
        answer = await request(bus, probe, subjects.DELETE, delete)
        assert isinstance(answer, events.RequestAccepted) and answer.outcome == "deleted"
        deletes = await probe.wait(subjects.DELETE, events.DeleteObject, count=2, where=_mine)
        assert sorted((m.kind, m.name, m.namespace) for m in deletes) == [
            ("HyperJob", "f-a", "team-a"), ("Job", "f-b", "team-a"),
        ]  # fmt: skip


async def test_a_workflow_kind_with_a_bad_field_is_refused_by_name_and_other_kinds_are_left_alone(
    bus, store, probe
) -> None:
    async with controller(bus, store):
        bad = {**FLOW, "spec": {"flows": [{"name": "a", "dependsOn": {"targets": ["z"]}}]}}
        answer = await request(bus, probe, subjects.APPLY, apply(bad))
        assert isinstance(answer, events.RequestRejected)
        assert answer.reason.startswith("$.spec") and "'z' is not a flow" in answer.reason
        job = apply({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}})
        await sh.send(bus, subjects.APPLY, job)
        await probe.settled(DURABLE, subjects.APPLY)
        assert await probe.decoded(subjects.result(job.event_id)) == []  # the splitter's to answer
        assert await store.get(records.JOBFLOW, "f") is None


async def test_a_cronjob_makes_its_job_at_the_schedule_time_and_its_deletion_deletes_the_job(bus, store, probe) -> None:
    # The controller starts and the CronJob is applied before the minute: on a loaded 2-core
    # machine that took over 1.5 s, the minute passed first and the next was a minute away.
    clock = ShiftedClock(lead=5.0)
    cron = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"tasks": TASKS}}},
    }
    async with controller(bus, store, clock):
        answer = await request(bus, probe, subjects.APPLY, apply(cron))
        assert isinstance(answer, events.RequestAccepted) and answer.outcome == "created"
        job = (await made(probe, 1))[0]
        minute = int(clock.now() // 60)
        assert job.manifest["metadata"]["name"] == f"nightly-{minute}"
        assert job.manifest["metadata"]["annotations"][SCHEDULED_TIMESTAMP].endswith(":00Z")
        doc = await sh.doc(store, records.CRONJOB, "nightly", records.CronJobDoc, where=lambda d: bool(d.active))
        assert doc.active == [f"nightly-{minute}"] and doc.last_schedule_time == minute * 60.0
        assert doc.next_sync == (minute + 1) * 60.0

        answer = await request(
            bus, probe, subjects.DELETE, sh.message(events.DeleteObject, kind="CronJob", name="nightly")
        )
        assert isinstance(answer, events.RequestAccepted) and answer.outcome == "deleted"
        deletes = await probe.wait(subjects.DELETE, events.DeleteObject, where=_mine)
        assert [m.name for m in deletes] == [f"nightly-{minute}"]


WORKFLOW_MANIFESTS = {
    "CronJob": {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"tasks": TASKS}}},
    },
    "JobFlow": {**FLOW, "spec": {"flows": [{"name": "a"}]}},
    "JobTemplate": {k: v for k, v in template("a").items() if k != "metadata"},
    "HyperJobTemplate": {k: v for k, v in hyperjob_template("a").items() if k != "metadata"},
}
RECORDS = {
    "CronJob": (records.CRONJOB, records.CronJobDoc),
    "JobFlow": (records.JOBFLOW, records.JobFlowDoc),
    "JobTemplate": (records.JOBTEMPLATE, records.JobTemplateDoc),
    "HyperJobTemplate": (records.JOBTEMPLATE, records.JobTemplateDoc),
}


@pytest.mark.parametrize("kind", list(WORKFLOW_MANIFESTS))
async def test_a_workflow_object_in_team_a_is_hers_alone_and_team_b_s_of_the_same_name_is_untouched(
    bus, store, probe, kind
) -> None:
    """As a person with rights in team-a only (her requests on the ``.team-a`` subjects): her
    ``nightly`` is created beside team-b's (not "configured" over it), an object naming team-b is
    refused naming the field, a delete naming team-b is refused, and her delete removes hers only."""
    as_her = {request: subjects.in_namespace(request, "team-a") for request in (subjects.APPLY, subjects.DELETE)}
    base = WORKFLOW_MANIFESTS[kind]
    theirs = {**base, "metadata": {"name": "nightly", "namespace": "team-b"}}
    table, doc_type = RECORDS[kind]
    async with controller(bus, store):
        answer = await request(bus, probe, subjects.APPLY, apply(theirs))
        assert isinstance(answer, events.RequestAccepted) and answer.outcome == "created"
        before = (await sh.doc(store, table, "team-b/nightly", doc_type)).manifest

        mine = {**base, "metadata": {"name": "nightly"}}
        answer = await request(bus, probe, as_her[subjects.APPLY], apply(mine))
        assert isinstance(answer, events.RequestAccepted) and answer.outcome == "created", answer
        stored = await sh.doc(store, table, "team-a/nightly", doc_type)
        assert stored.manifest["metadata"]["namespace"] == "team-a"

        answer = await request(bus, probe, as_her[subjects.APPLY], apply({**theirs, "spec": mine["spec"]}))
        assert isinstance(answer, events.RequestRejected) and answer.reason.startswith("$.metadata.namespace: ")

        naming_b = sh.message(events.DeleteObject, kind=kind, name="nightly", namespace="team-b")
        answer = await request(bus, probe, as_her[subjects.DELETE], naming_b)
        assert isinstance(answer, events.RequestRejected) and answer.reason.startswith("$.namespace: ")

        answer = await request(
            bus, probe, as_her[subjects.DELETE], sh.message(events.DeleteObject, kind=kind, name="nightly")
        )
        assert isinstance(answer, events.RequestAccepted) and answer.outcome == "deleted"
        assert await store.get(table, "team-a/nightly") is None
        kept = await sh.doc(store, table, "team-b/nightly", doc_type)
        assert kept.manifest == before and kept.manifest["metadata"]["namespace"] == "team-b"


async def test_a_flow_takes_the_template_of_its_own_namespace(bus, store, probe) -> None:
    """Team-b's JobTemplate ``a`` is not team-a's: her flow waits for a template of hers."""
    async with controller(bus, store):
        await request(
            bus, probe, subjects.APPLY, apply({**template("a"), "metadata": {"name": "a", "namespace": "team-b"}})
        )
        flow = {**FLOW, "metadata": {"name": "f", "namespace": "team-a"}, "spec": {"flows": [{"name": "a"}]}}
        answer = await request(bus, probe, subjects.APPLY, apply(flow))
        assert isinstance(answer, events.RequestAccepted)
        doc = await sh.doc(store, records.JOBFLOW, "team-a/f", records.JobFlowDoc, where=lambda d: bool(d.message))
        assert doc.message == "job 'f-a' waits for JobTemplate 'a', which does not exist" and not doc.jobs

        await request(
            bus, probe, subjects.APPLY, apply({**template("a"), "metadata": {"name": "a", "namespace": "team-a"}})
        )
        job = (await made(probe, 1))[0].manifest["metadata"]
        assert (job["name"], job["namespace"], job["labels"][CREATED_BY_JOB_FLOW]) == ("f-a", "team-a", "team-a.f")


async def test_a_cronjob_stored_under_its_name_alone_is_found_by_namespace_and_name(bus, store, probe) -> None:
    """A record kept before namespaces kept these objects apart (key ``nightly``, manifest in
    team-a) is read as team-a/nightly: a delete on her team-a subject finds it."""
    cron = {**WORKFLOW_MANIFESTS["CronJob"], "metadata": {"name": "nightly", "namespace": "team-a"}}
    old = records.CronJobDoc(manifest=cron, created=time.time())
    await store.put_if_version(records.CRONJOB, "nightly", old, None)
    async with controller(bus, store):
        delete = sh.message(events.DeleteObject, kind="CronJob", name="nightly")
        answer = await request(bus, probe, subjects.in_namespace(subjects.DELETE, "team-a"), delete)
        assert isinstance(answer, events.RequestAccepted) and answer.outcome == "deleted", answer
        assert await store.get(records.CRONJOB, "nightly") is None
        assert await store.get(records.CRONJOB, "team-a/nightly") is None


async def test_two_cronjobs_of_one_name_in_two_namespaces_keep_their_own_runs(bus, store, probe) -> None:
    """Should the splitter refuse one of two CronJobs' runs (two owners asking for one fleet name,
    ADR 0010), the refused CronJob records the refusal, and the first still follows its job, known
    on its cluster by its fleet name (``team-a-nightly-<minute>``), to the end."""
    clock = ShiftedClock(lead=1.5)
    async with controller(bus, store, clock):
        for team in ("team-a", "team-b"):
            cron = {**WORKFLOW_MANIFESTS["CronJob"], "metadata": {"name": "nightly", "namespace": team}}
            cron["spec"] = {**cron["spec"], "schedule": "* * * * *"}
            answer = await request(bus, probe, subjects.APPLY, apply(cron))
            assert isinstance(answer, events.RequestAccepted) and answer.outcome == "created"
        first, second = await made(probe, 2)
        name = first.manifest["metadata"]["name"]
        assert second.manifest["metadata"]["name"] == name
        kept, refused = (m.manifest["metadata"]["namespace"] for m in (first, second))
        reason = f"$.metadata.name: job {name!r} already exists in namespace {kept!r}"
        refusal = sh.message(events.RequestRejected, kind="Job", name=name, reason=reason, causation_id=second.event_id)
        await sh.send(bus, subjects.result(second.event_id), refusal)
        loser = await sh.doc(
            store, records.CRONJOB, f"{refused}/nightly", records.CronJobDoc, where=lambda d: bool(d.message)
        )
        assert loser.message.endswith(reason) and not loser.jobs

        fleet_name = api.fleet_key(kept, name)
        done = sh.message(events.JobPhaseChanged, cluster="c1", job=fleet_name, old="Running", new="Completed")
        await sh.send(bus, subjects.job_phase("c1"), done)
        winner = await sh.doc(
            store, records.CRONJOB, f"{kept}/nightly", records.CronJobDoc, where=lambda d: bool(d.last_successful_time)
        )
        assert winner.jobs[name].phase == "Completed"

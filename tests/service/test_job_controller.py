"""One cluster's job-controller in-process on real JetStream and Redis: a dispatched child becomes a
job record and a podgroup; an admitted podgroup gets its pods; a bound pod is started with its
whole environment; node reports drive the job to Running, Completed, or through its restart
policy to Failed; removal stops the pods and forgets the job. Every message applied twice has
one effect. The scheduler's and the nodes' messages are sent by the test."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import events
import records
from events import subjects
from job_controller.app import build
from job_controller.config import Settings
from jobcore import model as jm
from servicekit import Runtime

sys.path.insert(0, str(Path(__file__).parent))
import service_helpers as sh  # noqa: E402

pytestmark = pytest.mark.service

C = "cluster-a"
JOB_KIND = records.job_kind(C)


@pytest.fixture
async def controller(bus, store) -> AsyncIterator[Runtime]:
    runtime = Runtime("job-controller", bus, store)
    await build(Settings(cluster=C, timer_period=0.1), runtime)
    yield runtime
    await runtime.stop()


async def settled(probe: sh.Probe) -> None:
    await probe.settled(f"job-controller-{C}-sched", subjects.dispatch(C))
    await probe.settled(f"job-controller-{C}-nodes", subjects.pod_phase(C))


async def send(bus: Any, subject: str, msg: events.Message, *, twice: bool = False) -> events.Message:
    await sh.send(bus, subject, msg)
    if twice:
        await sh.send(bus, subject, msg, copy=1)
    return msg


async def record(store: Any, name: str = "j1") -> jm.JobRecord:
    stored = await store.get(JOB_KIND, name)
    assert stored is not None, f"no job record {name}"
    return stored.decode(jm.JobRecord)


async def phases(probe: sh.Probe, job: str = "j1") -> list[str]:
    return [m.new for m in await probe.decoded(subjects.job_phase(C), events.JobPhaseChanged) if m.job == job]


async def wait_phase(probe: sh.Probe, phase: str, count: int = 1, job: str = "j1") -> list[events.JobPhaseChanged]:
    return await probe.wait(subjects.job_phase(C), events.JobPhaseChanged, count=count,
                            where=lambda m: m.job == job and m.new == phase)


async def dispatch(bus: Any, manifest: dict[str, Any], *, twice: bool = False, **fields: Any) -> events.DispatchChild:
    msg = sh.message(events.DispatchChild, child=manifest["metadata"]["name"], cluster=C, job=manifest, **fields)
    await send(bus, subjects.dispatch(C), msg, twice=twice)
    return msg


async def admit_podgroup(bus: Any, job: str = "j1", *, twice: bool = False) -> events.PodGroupPhaseChanged:
    msg = sh.message(events.PodGroupPhaseChanged, cluster=C, job=job, phase="Inqueue")
    await send(bus, subjects.podgroup_phase(C), msg, twice=twice)
    return msg


async def pods_created(store: Any, count: int, job: str = "j1") -> jm.JobRecord:
    async def probe() -> jm.JobRecord | None:
        stored = await store.get(JOB_KIND, job)
        rec = stored.decode(jm.JobRecord) if stored else None
        return rec if rec and len(rec.pods) == count and all(p.phase == "Pending" for p in rec.pods.values()) else None

    return await sh.until(probe, what=f"{count} pending pods of {job}")


async def bind_all(bus: Any, store: Any, node: str = "node-0", job: str = "j1", *, twice: bool = False) -> None:
    for name, pod in sorted((await record(store, job)).pods.items()):
        await send(bus, subjects.pod_bound(C), sh.message(events.PodBound, cluster=C, job=job, pod=name, node=node,
                                                          job_version=pod.version, pod_uid=pod.uid), twice=twice)


async def report(bus: Any, store: Any, phase: str, *, pods: list[str] | None = None, job: str = "j1",
                 exit_code: int | None = None, twice: bool = False) -> None:
    rec = await record(store, job)
    for name in pods if pods is not None else sorted(rec.pods):
        pod = rec.pods[name]
        await send(bus, subjects.pod_phase(C), sh.message(
            events.PodPhaseReported, cluster=C, node=pod.node or "", pod=name, job=job, job_version=pod.version,
            pod_uid=pod.uid, phase=phase, exit_code=exit_code), twice=twice)


async def running_job(bus: Any, store: Any, probe: sh.Probe, manifest: dict[str, Any], pods: int) -> None:
    """Dispatch, admit, bind and run every pod: the job is Running."""
    await dispatch(bus, manifest)
    await wait_phase(probe, "Pending")
    await admit_podgroup(bus)
    await pods_created(store, pods)
    await bind_all(bus, store)
    await probe.wait(subjects.start_pod(C), events.StartPod, count=pods)
    await report(bus, store, "Running")
    await wait_phase(probe, "Running")


async def test_dispatched_child_is_admitted_once_with_its_podgroup(controller, bus, store, probe) -> None:
    msg = await dispatch(bus, sh.job_manifest("j1"), twice=True, env_by_pod={"j1-worker-0": {"HYPERJOB_RANK": "7"}})
    pending = await wait_phase(probe, "Pending")
    await settled(probe)
    assert await phases(probe) == ["Pending"]
    assert pending[0].causation_id == msg.event_id and pending[0].cluster == C
    stored = await store.get(JOB_KIND, "j1")
    assert stored.version == 1 and stored.decode(jm.JobRecord).pods == {}
    podgroup = (await store.get(records.podgroup_kind(C), "j1")).decode(jm.PodGroupInfo)
    assert podgroup.min_member == 2
    env = (await store.get(records.podenv_kind(C), "j1")).decode(records.PodEnvDoc)
    assert env.env_by_pod == {"j1-worker-0": {"HYPERJOB_RANK": "7"}}

    # A new dispatch of a child this cluster already has changes nothing.
    await dispatch(bus, sh.job_manifest("j1"))
    await settled(probe)
    assert (await store.get(JOB_KIND, "j1")).version == 1 and await phases(probe) == ["Pending"]


async def test_admitted_podgroup_gets_its_pods_once(controller, bus, store, probe) -> None:
    await dispatch(bus, sh.job_manifest("j1", replicas=3))
    await wait_phase(probe, "Pending")
    await settled(probe)
    version = await sh.version(store, JOB_KIND, "j1")
    inqueue = await admit_podgroup(bus, twice=True)
    rec = await pods_created(store, 3)
    await settled(probe)
    assert sorted(rec.pods) == ["j1-worker-0", "j1-worker-1", "j1-worker-2"]
    assert await sh.version(store, JOB_KIND, "j1") == version + 1
    ready = [m for m in await probe.decoded(subjects.pods_ready(C), events.PodsReady) if m.causation_id == inqueue.event_id]
    assert len(ready) == 1
    # The podgroup reported Running later (already admitted) creates nothing more.
    await send(bus, subjects.podgroup_phase(C), sh.message(events.PodGroupPhaseChanged, cluster=C, job="j1",
                                                           phase="Running"))
    await settled(probe)
    assert await sh.version(store, JOB_KIND, "j1") == version + 1


async def test_bound_pod_is_started_once_with_its_environment(controller, bus, store, probe) -> None:
    await dispatch(bus, sh.job_manifest("j1"), env={"TEAM": "llm"},
                   env_by_pod={"j1-worker-1": {"HYPERJOB_RANK": "33", "MASTER_ADDR": "j1-worker-0.a"}})
    await admit_podgroup(bus)
    rec = await pods_created(store, 2)
    pod = rec.pods["j1-worker-1"]
    bound = sh.message(events.PodBound, cluster=C, job="j1", pod="j1-worker-1", node="node-3",
                       job_version=pod.version, pod_uid=pod.uid)
    await send(bus, subjects.pod_bound(C), bound, twice=True)
    started = await probe.wait(subjects.start_pod(C), events.StartPod)
    await settled(probe)
    assert len(await probe.messages(subjects.start_pod(C))) == 1
    start = started[0]
    assert (start.pod, start.node, start.job, start.task, start.pod_uid) == ("j1-worker-1", "node-3", "j1", "worker",
                                                                            pod.uid)
    assert start.env["TEAM"] == "llm" and start.env["HYPERJOB_RANK"] == "33"
    assert start.env["MASTER_ADDR"] == "j1-worker-0.a"
    assert start.sim_duration == 10.0 and start.restart_policy == "Never"
    assert (await record(store)).pods["j1-worker-1"].node == "node-3"


async def test_running_then_succeeded_pods_complete_the_job_and_redeliveries_change_nothing(controller, bus, store,
                                                                                           probe) -> None:
    await running_job(bus, store, probe, sh.job_manifest("j1"), 2)
    await settled(probe)
    before, messages = await record(store), len(await probe.messages("job.>"))
    await report(bus, store, "Running", twice=True)  # the nodes say it again (new reports, and copies)
    await settled(probe)
    assert await record(store) == before and len(await probe.messages("job.>")) == messages
    assert await phases(probe) == ["Pending", "Running"]

    await report(bus, store, "Succeeded", exit_code=0, twice=True)
    completed = await wait_phase(probe, "Completed")
    await settled(probe)
    assert await phases(probe) == ["Pending", "Running", "Completed"]
    assert completed[0].succeeded == 2
    assert all(p.phase == "Succeeded" for p in (await record(store)).pods.values())


async def test_pod_failure_restarts_the_job_until_max_retry_then_fails_it(controller, bus, store, probe) -> None:
    manifest = sh.job_manifest("j1", policies=[{"event": "PodFailed", "action": "RestartJob"}], max_retry=2)
    await running_job(bus, store, probe, manifest, 2)

    # First failure: the job restarts; the pods on nodes are stopped and, once gone, recreated.
    await report(bus, store, "Failed", pods=["j1-worker-0"], exit_code=3, twice=True)
    await wait_phase(probe, "Restarting")
    stops = await probe.wait(subjects.stop_pod(C), events.StopPod, count=2)
    assert sorted(s.pod for s in stops) == ["j1-worker-0", "j1-worker-1"]
    await settled(probe)
    await report(bus, store, "Deleted", twice=True)
    await wait_phase(probe, "Pending", count=2)
    rec = await record(store)
    assert rec.retry_count == 1 and rec.pods == {}
    await admit_podgroup(bus)
    await pods_created(store, 2)
    await bind_all(bus, store)
    await probe.wait(subjects.start_pod(C), events.StartPod, count=4)
    await report(bus, store, "Running")
    await wait_phase(probe, "Running", count=2)

    # Second failure: maxRetry reached, the job fails.
    await report(bus, store, "Failed", pods=["j1-worker-1"], exit_code=3, twice=True)
    failed = await wait_phase(probe, "Failed")
    await settled(probe)
    assert failed[0].retry_count == 2
    assert await phases(probe) == ["Pending", "Running", "Restarting", "Pending", "Running", "Restarting", "Failed"]
    assert len(await probe.messages(subjects.stop_pod(C))) == 3  # the survivor of the second run
    # Nothing the nodes say now changes a failed job.
    before, messages = await record(store), len(await probe.messages("job.>"))
    await report(bus, store, "Failed", pods=["j1-worker-1"], exit_code=3)
    await settled(probe)
    assert await record(store) == before and len(await probe.messages("job.>")) == messages


async def test_removed_child_stops_its_pods_and_is_forgotten_once_they_are_gone(controller, bus, store, probe) -> None:
    await running_job(bus, store, probe, sh.job_manifest("j1"), 2)
    remove = sh.message(events.RemoveChild, child="j1", cluster=C)
    await send(bus, subjects.remove_child(C), remove, twice=True)
    stops = await probe.wait(subjects.stop_pod(C), events.StopPod, count=2)
    await settled(probe)
    assert len(stops) == 2 and await probe.messages(subjects.job_removed(C)) == []
    await report(bus, store, "Deleted", twice=True)
    removed = await probe.wait(subjects.job_removed(C), events.JobRemoved)
    await settled(probe)
    assert [r.job for r in removed] == ["j1"]
    assert len(await probe.messages(subjects.job_removed(C))) == 1
    for kind in (JOB_KIND, records.podgroup_kind(C), records.podenv_kind(C)):
        assert await store.get(kind, "j1") is None


async def test_messages_about_an_unknown_job_change_nothing(controller, bus, store, probe) -> None:
    await admit_podgroup(bus, job="ghost")
    await send(bus, subjects.pod_bound(C), sh.message(events.PodBound, cluster=C, job="ghost", pod="ghost-w-0",
                                                      node="node-0", job_version=0))
    await send(bus, subjects.pod_phase(C), sh.message(events.PodPhaseReported, cluster=C, node="node-0",
                                                      pod="ghost-w-0", job="ghost", job_version=0, phase="Running"))
    await settled(probe)
    assert await store.list(JOB_KIND) == {}
    assert await probe.messages("job.>") == [] and await probe.messages(subjects.dlq(f"job-controller-{C}-sched")) == []


@pytest.mark.parametrize("fault", ["publish", "store"])
async def test_bound_pod_is_started_exactly_once_when_the_first_attempt_fails(bus, store, probe, fault) -> None:
    flaky_bus, flaky_store = sh.FlakyBus(bus, failures=0), sh.FlakyStore(store, failures=0)
    runtime = Runtime("job-controller", flaky_bus, flaky_store)
    await build(Settings(cluster=C, timer_period=0.1), runtime)
    try:
        await dispatch(bus, sh.job_manifest("j1"))
        await admit_podgroup(bus)
        rec = await pods_created(store, 2)
        await settled(probe)
        version = await sh.version(store, JOB_KIND, "j1")
        if fault == "publish":
            flaky_bus.failures = 1  # the StartPod is not published though the binding was written
        else:
            flaky_store.failures = 1  # the binding is not written at all
        pod = rec.pods["j1-worker-0"]
        await send(bus, subjects.pod_bound(C), sh.message(events.PodBound, cluster=C, job="j1", pod="j1-worker-0",
                                                          node="node-0", job_version=pod.version, pod_uid=pod.uid))
        started = await probe.wait(subjects.start_pod(C), events.StartPod)
        await settled(probe)
        assert [s.pod for s in started] == ["j1-worker-0"]
        assert len(await probe.messages(subjects.start_pod(C))) == 1
        assert await sh.version(store, JOB_KIND, "j1") == version + 1
        assert (flaky_bus.failures, flaky_store.failures) == (0, 0)
    finally:
        await runtime.stop()


async def test_task_completed_completes_the_job_while_its_sidecar_still_runs(controller, bus, store, probe) -> None:
    manifest = sh.job_manifest("j1", replicas=1)
    trainer = manifest["spec"]["tasks"][0]
    trainer["name"] = "trainer"
    trainer["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    sidecar = {**trainer, "name": "sidecar", "policies": []}
    manifest["spec"]["tasks"] = [trainer, sidecar]
    manifest["spec"]["minAvailable"] = 2
    await running_job(bus, store, probe, manifest, 2)

    # The trainer finishes; the sidecar never would. TaskCompleted -> CompleteJob ends the job anyway.
    await report(bus, store, "Succeeded", pods=["j1-trainer-0"], twice=True)
    [completing] = await wait_phase(probe, "Completing")
    assert completing.reason.startswith("TaskCompleted: CompleteJob")
    [stop] = await probe.wait(subjects.stop_pod(C), events.StopPod, count=1)
    assert stop.pod == "j1-sidecar-0"
    await report(bus, store, "Deleted", pods=["j1-sidecar-0"], twice=True)
    await wait_phase(probe, "Completed")
    await settled(probe)
    assert await phases(probe) == ["Pending", "Running", "Completing", "Completed"]

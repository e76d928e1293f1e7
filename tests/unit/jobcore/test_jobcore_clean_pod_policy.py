"""A finished Kubeflow job's pods as its ``runPolicy.cleanPodPolicy`` says (issue 29): the
translation carries it as the ``hyperjob.io/clean-pod-policy`` annotation; ``Running`` deletes the
running pods, ``All`` every pod, ``None`` none; unset is a Volcano Job's own rule (``Running``'s)."""

from __future__ import annotations

import pytest

from hyperjob import api
from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import QUEUES, Driver, deleted, job, of_type, task


def master_done_workers_running(policy: str | None) -> tuple[Driver, list[object]]:
    """The master completes (and with it the job) while both workers still run."""
    annotations = {api.CLEAN_POD_POLICY_ANNOTATION: policy} if policy else None
    master = task(
        "master", 1, template_restartPolicy="Never", policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]
    )
    d = Driver(
        jc.admit(job(master, task("worker", 2, template_restartPolicy="Never"), annotations=annotations), QUEUES, 0.0)
    )
    d.start()
    d.run_all()
    return d, d.succeed("job1-master-0")


@pytest.mark.parametrize(
    ("policy", "doomed"),
    [
        (None, ["job1-worker-0", "job1-worker-1"]),
        ("Running", ["job1-worker-0", "job1-worker-1"]),
        ("All", ["job1-master-0", "job1-worker-0", "job1-worker-1"]),
    ],
    ids=["unset-as-volcano", "running-deletes-running-pods", "all-deletes-every-pod"],
)
def test_a_finishing_job_deletes_the_pods_its_policy_names(policy, doomed):
    d, effects = master_done_workers_running(policy)
    assert deleted(effects) == doomed
    assert d.record.phase == "Completing"
    d.delete_terminating()
    assert d.record.phase == "Completed"
    assert sorted(d.record.pods) == sorted({"job1-master-0", "job1-worker-0", "job1-worker-1"} - set(doomed))


def test_none_leaves_every_pod_as_it_is_and_the_job_completes_at_once():
    d, effects = master_done_workers_running("None")
    assert deleted(effects) == []
    assert d.record.phase == "Completed"
    assert of_type(effects, jc.DeletePodGroup) == [jc.DeletePodGroup(name="job1")]
    assert {n: p.phase for n, p in d.record.pods.items()} == {
        "job1-master-0": "Succeeded",
        "job1-worker-0": "Running",
        "job1-worker-1": "Running",
    }
    d.succeed("job1-worker-0")  # an event of the finished job deletes nothing either
    assert deleted(d.effects) == []


def test_all_deletes_the_finished_pods_of_a_job_that_completed_with_every_pod():
    annotations = {api.CLEAN_POD_POLICY_ANNOTATION: "All"}
    d = Driver(jc.admit(job(task("worker", 2, template_restartPolicy="Never"), annotations=annotations), QUEUES, 0.0))
    d.start()
    d.run_all()
    d.succeed("job1-worker-0")
    effects = d.succeed("job1-worker-1")
    assert d.record.phase == "Completed"
    assert deleted(effects) == ["job1-worker-0", "job1-worker-1"]


@pytest.mark.parametrize("finished", [False, True], ids=["while-running", "after-it-completed"])
def test_a_deleted_job_stops_its_running_pods_whatever_its_policy(finished):
    """A TerminateJob (the job deleted: its child removed) stops the pods the None policy left
    running; without this a deleted Kubeflow job with cleanPodPolicy None was never gone."""
    d, _ = master_done_workers_running("None") if finished else (None, None)
    if d is None:
        annotations = {api.CLEAN_POD_POLICY_ANNOTATION: "None"}
        d = Driver(
            jc.admit(job(task("worker", 2, template_restartPolicy="Never"), annotations=annotations), QUEUES, 0.0)
        )
        d.start()
        d.run_all()
    effects = d.send(jc.CommandIssued(action="TerminateJob", id="delete"))
    assert deleted(effects) == ["job1-worker-0", "job1-worker-1"]

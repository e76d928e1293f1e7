"""The main path: podgroup admission, pod creation, Running, Completed/Failed, evictions."""

from __future__ import annotations

import pytest

from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import Driver, admitted, of_type, task


def test_no_pods_before_the_podgroup_is_admitted():
    d = Driver(admitted(task("worker", 2)))
    assert d.record.pods == {}
    effects = d.start()
    (create,) = of_type(effects, jc.CreatePods)
    assert [p.name for p in create.pods] == ["job1-worker-0", "job1-worker-1"]
    assert all(p.phase == "Pending" and p.node is None for p in create.pods)


def test_pod_records_carry_annotations_request_and_run_info():
    t = task(
        "worker",
        1,
        cpu="500m",
        memory="1Gi",
        template_restartPolicy="Never",
        annotations={"hyperjob.io/sim-duration": "30s", "hyperjob.io/sim-exit-code": "2"},
    )
    t["template"]["spec"]["containers"][0].update(
        command=["python"], args=["train.py"], env=[{"name": "A", "value": "1"}]
    )
    d = Driver(admitted(t, queue="weight"))
    d.start()
    pod = d.pod("job1-worker-0")
    assert pod.annotations == {
        "hyperjob.io/sim-duration": "30s",
        "hyperjob.io/sim-exit-code": "2",
        "volcano.sh/task-spec": "worker",
        "volcano.sh/task-index": "0",
        "volcano.sh/job-name": "job1",
        "volcano.sh/queue-name": "weight",
        "volcano.sh/job-version": "0",
        "volcano.sh/job-retry-count": "0",
        "scheduling.k8s.io/group-name": "job1",
    }
    assert pod.request == {"cpu": 0.5, "memory": 2.0**30, "pods": 1.0}
    assert (pod.run.sim_duration, pod.run.sim_exit_code, pod.run.restart_policy) == (30.0, 2, "Never")
    assert (pod.run.command, pod.run.args, pod.run.env["A"]) == (["python"], ["train.py"], "1")
    assert pod.scheduling.priority == 1  # Volcano's default task priority


def test_job_sim_annotations_apply_to_every_pod():
    d = Driver(admitted(task("worker", 1), annotations={"hyperjob.io/sim-duration": "1m"}))
    d.start()
    assert d.pod("job1-worker-0").run.sim_duration == 60.0


def test_pending_running_completed():
    d = Driver(admitted(task("worker", 2, template_restartPolicy="Never")))
    d.start()
    d.run("job1-worker-0")
    assert d.record.phase == "Pending"
    d.run("job1-worker-1")
    assert d.record.phase == "Running"
    d.succeed("job1-worker-0")
    assert d.record.phase == "Running"
    effects = d.succeed("job1-worker-1")
    assert d.record.phase == "Completed"
    assert jc.JobPhaseChanged(old="Running", new="Completed", reason="all pods finished") in effects
    # A finished job lets go of its podgroup (KillJob soft keeps the succeeded pods).
    assert of_type(effects, jc.DeletePodGroup) == [jc.DeletePodGroup(name="job1")]
    assert of_type(effects, jc.DeletePods) == []
    assert d.phases() == ["Running", "Completed"]


def test_pod_failed_without_policy_syncs_and_the_job_fails_when_all_finished():
    d = Driver(admitted(task("worker", 2, template_restartPolicy="Never")))
    d.start()
    d.run_all()
    effects = d.fail("job1-worker-0", exit_code=3)
    assert d.record.phase == "Running"
    assert of_type(effects, jc.DeletePods) == [] and of_type(effects, jc.CreatePods) == []
    assert d.pod("job1-worker-0").status.exit_code == 3
    d.succeed("job1-worker-1")
    assert d.record.phase == "Failed"


def test_min_available_below_replicas_completes_with_some_failures():
    d = Driver(admitted(task("worker", 3, minAvailable=1, template_restartPolicy="Never"), minAvailable=1))
    d.start()
    d.run_all()
    d.fail("job1-worker-0")
    d.fail("job1-worker-1")
    d.succeed("job1-worker-2")
    assert d.record.phase == "Completed"


def test_eviction_recreates_the_pod_pending_by_default():
    d = Driver(admitted(task("worker", 2)))
    d.start()
    d.run_all()
    old_uid = d.pod("job1-worker-1").uid
    effects = d.evict("job1-worker-1")
    (create,) = of_type(effects, jc.CreatePods)
    (pod,) = create.pods
    assert (pod.name, pod.phase, pod.node, pod.restarts, pod.version) == ("job1-worker-1", "Pending", None, 1, 0)
    assert pod.uid != old_uid
    # minAvailable 2 of 2: one pending pod is more than replicas - minAvailable = 0, so Pending again.
    assert d.record.phase == "Pending"
    d.run("job1-worker-1")
    assert d.record.phase == "Running"
    assert d.pod("job1-worker-1").restarts == 1


def test_counts_follow_the_pods():
    d = Driver(admitted(task("worker", 3)))
    d.start()
    d.run("job1-worker-0")
    d.send(jc.PodBound(pod="job1-worker-1", node="n2"))
    assert jc.counts(d.record) == jc.PodCounts(pending=2, running=1)
    assert jc.task_counts(d.record)["worker"].pending == 2


def test_job_status_reports_phase_retries_and_counts():
    d = Driver(admitted(task("worker", 2), task("ps", 1)))
    d.start()
    d.run("job1-ps-0")
    status = jc.job_status(d.record)
    assert (status.phase, status.version, status.retry_count, status.min_available) == ("Pending", 0, 0, 3)
    assert status.counts == jc.PodCounts(pending=2, running=1)
    assert status.task_status_count["ps"] == jc.PodCounts(running=1)


def _first_pod(*tasks, classes=None, **spec) -> jc.PodRecord:
    from tests.unit.jobcore.jobcore_builders import QUEUES, job

    record = jc.admit(job(*tasks, **spec), QUEUES, 0.0, classes or {})
    record, _ = jc.decide(record, jc.PodGroupAdmitted(), 0.0)
    return next(iter(record.pods.values()))


def test_task_priority_defaults_to_one():
    assert _first_pod(task("w")).scheduling.priority == 1


def test_task_priority_from_template_class_then_job_class():
    classes = {"high": 1000, "low": 10}
    assert (
        _first_pod(
            task("w", template_priorityClassName="low"), classes=classes, priorityClassName="high"
        ).scheduling.priority
        == 10
    )
    pod = _first_pod(task("w"), classes=classes, priorityClassName="high")
    assert (pod.scheduling.priority, pod.scheduling.priority_class_name) == (1000, "high")


def test_task_priority_annotation_overrides_pod_priority():
    pod = _first_pod(task("w", template_priority=5, annotations={"volcano.sh/task-priority": "7"}))
    assert pod.scheduling.priority == 7
    assert _first_pod(task("w", template_priority=5)).scheduling.priority == 5


def test_preemptable_opt_out():
    assert _first_pod(task("w")).scheduling.preemptable
    assert not _first_pod(task("w", annotations={"volcano.sh/preemptable": "false"})).scheduling.preemptable


def test_limits_stand_in_for_missing_requests():
    t = task("w")
    t["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "8", "cpu": "4"},
        "requests": {"cpu": "2"},
    }
    assert _first_pod(t).request == {"cpu": 2.0, "nvidia.com/gpu": 8.0, "pods": 1.0}


def test_a_pod_runs_with_its_containers_pull_policy_as_kubernetes_defaults_it():
    t = task("w")
    container = t["template"]["spec"]["containers"][0]
    container["image"] = "trainer:latest"
    assert _first_pod(t).run.image_pull_policy == "Always"
    container["imagePullPolicy"] = "Never"
    assert _first_pod(t).run.image_pull_policy == "Never"


@pytest.mark.parametrize("ended", [jc.PodSucceeded, jc.PodFailed], ids=["succeeded", "failed"])
def test_a_pod_that_ends_while_its_delete_is_on_the_way_is_gone(ended):
    # The launcher completes the job (CompleteJob kills the running worker), but the worker's own exit
    # reached the node first: the node has nothing to stop and never reports PodDeleted.
    launcher = task("launcher", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}])
    d = Driver(admitted(launcher, task("worker", 1)))
    d.start()
    d.run_all()
    d.send(jc.PodSucceeded(pod="job1-launcher-0", job_version=d.version_of("job1-launcher-0")))
    assert d.record.phase == "Completing" and d.pod("job1-worker-0").phase == "Terminating"
    version = d.version_of("job1-worker-0")
    d.send(ended(pod="job1-worker-0", job_version=version))
    assert d.record.phase == "Completed" and "job1-worker-0" not in d.record.pods
    d.send(jc.PodDeleted(pod="job1-worker-0", job_version=version))  # a late report changes nothing
    assert d.record.phase == "Completed"

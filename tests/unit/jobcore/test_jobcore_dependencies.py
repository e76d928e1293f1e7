"""Task start dependency (``tasks[].dependsOn``) and partition policies, as Volcano's job controller
runs them (``waitDependsOnTaskMeetCondition``, ``getMinTaskMember``, ``RestartPartition``)."""

from __future__ import annotations

import pytest

from hyperjob import api
from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import Driver, admitted, job, of_type, task


def created(effects: list) -> list[str]:
    return [p.name for create in of_type(effects, jc.CreatePods) for p in create.pods]


def test_dependent_task_waits_until_the_task_it_depends_on_runs():
    d = Driver(admitted(task("master", 1), task("worker", 2, dependsOn={"name": ["master"]}), minAvailable=1))
    assert created(d.start()) == ["job1-master-0"]
    v = d.version_of("job1-master-0")
    assert created(d.send(jc.PodBound(pod="job1-master-0", node="n1", job_version=v))) == []  # bound is not running
    assert created(d.send(jc.PodRunning(pod="job1-master-0", job_version=v))) == ["job1-worker-0", "job1-worker-1"]


def test_a_chain_starts_one_link_at_a_time():
    d = Driver(
        admitted(
            task("a", 1),
            task("b", 2, dependsOn={"name": ["a"]}),
            task("c", 1, dependsOn={"name": ["b"]}),
            minAvailable=1,
        )
    )
    assert created(d.start()) == ["job1-a-0"]
    d.run("job1-a-0")
    assert set(d.record.pods) == {"job1-a-0", "job1-b-0", "job1-b-1"}
    d.run("job1-b-0")
    assert "job1-c-0" not in d.record.pods  # b's minAvailable (its 2 replicas) are not all running
    d.run("job1-b-1")
    assert "job1-c-0" in d.record.pods


def test_dependency_counts_the_tasks_min_available_and_succeeded_pods():
    d = Driver(
        admitted(
            task("ps", 2, minAvailable=1, template_restartPolicy="Never"),
            task("worker", 1, dependsOn={"name": ["ps"]}),
            minAvailable=1,
        )
    )
    d.start()
    d.run("job1-ps-0")
    v = d.version_of("job1-ps-0")
    d.send(jc.PodSucceeded(pod="job1-ps-0", job_version=v))
    assert "job1-worker-0" in d.record.pods  # 1 Succeeded pod meets ps's minAvailable 1


@pytest.mark.parametrize(("iteration", "after_one"), [("any", True), ("all", False)])
def test_iteration_any_needs_one_named_task_all_needs_every_one(iteration, after_one):
    d = Driver(
        admitted(
            task("a", 1),
            task("b", 1),
            task("c", 1, dependsOn={"name": ["a", "b"], "iteration": iteration}),
            minAvailable=1,
        )
    )
    assert created(d.start()) == ["job1-a-0", "job1-b-0"]
    d.run("job1-a-0")
    assert ("job1-c-0" in d.record.pods) is after_one
    d.run("job1-b-0")
    assert "job1-c-0" in d.record.pods


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ([task("a", 1, dependsOn={"name": ["nope"]})], "'nope' is not a task of this job"),
        ([task("a", 1, dependsOn={"name": ["a"]})], "cannot depend on itself"),
        (
            [task("a", 1, dependsOn={"name": ["b"]}), task("b", 1, dependsOn={"name": ["a"]})],
            "directed acyclic graph (a -> b -> a)",
        ),
    ],
)
def test_dependencies_that_are_no_dag_are_refused(tasks, message):
    with pytest.raises(api.ManifestError) as caught:
        job(*tasks)
    assert message in str(caught.value)


def test_partition_policy_sets_the_task_minimum_and_restart_partition_restarts_one_partition():
    worker = task(
        "worker",
        4,
        partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1},
        policies=[{"event": "PodFailed", "action": "RestartPartition"}],
        template_restartPolicy="Never",
    )
    d = Driver(admitted(worker))
    assert d.record.spec.tasks[0].min_available == 2
    assert d.record.spec.min_available == 2
    d.start()
    d.run_all()
    v = d.version_of("job1-worker-3")
    d.send(jc.PodFailed(pod="job1-worker-3", exit_code=1, job_version=v))
    (delete,) = of_type(d.effects, jc.DeletePods)
    assert sorted(delete.names) == ["job1-worker-2", "job1-worker-3"]


@pytest.mark.parametrize(
    ("policy", "extra", "message"),
    [
        ({"totalPartitions": 3, "partitionSize": 2}, {}, "replicas (4) must equal totalPartitions × partitionSize"),
        ({"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}, {"minAvailable": 3}, "must equal minParti"),
        ({"totalPartitions": 2, "partitionSize": 2, "networkTopology": {"mode": "hard"}}, {}, "per-partition"),
        ({"totalPartitions": 0, "partitionSize": 4}, {}, ">= 1"),
    ],
)
def test_partition_policy_is_checked_as_volcanos_webhook_does(policy, extra, message):
    with pytest.raises(api.ManifestError) as caught:
        job(task("worker", 4, partitionPolicy=policy, **extra))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("resources", "policy", "expected"),
    [
        ({"limits": {"cpu": "2", "memory": "1Gi"}}, "single-numa-node", "single-numa-node"),
        ({"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}, "single-numa-node", ""),  # Burstable
        ({"requests": {"cpu": "2", "memory": "1Gi"}}, "best-effort", ""),  # no limits: Burstable
        ({"limits": {"cpu": "2", "memory": "1Gi"}}, "none", ""),
    ],
)
def test_topology_policy_reaches_the_scheduler_for_guaranteed_pods_only(resources, policy, expected):
    t = task("worker", 1, topologyPolicy=policy)
    t["template"]["spec"]["containers"][0]["resources"] = resources
    d = Driver(admitted(t))
    d.start()
    assert d.pod("job1-worker-0").scheduling.topology_policy == expected

"""PodGroup derivation: minMember, minTaskMember and minResources (Volcano calcPGMinResources)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hyperjob import api
from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import QUEUES, job, task

SEEDS = Path("/work/shared/scenarios/seed")
NGINX2 = dict(cpu="200m", memory="1000m")
NGINX = dict(cpu="100m", memory="500m")


@pytest.mark.parametrize(
    ("tasks", "min_available", "min_member", "resources"),
    [
        ([task("nginx2", 2, **NGINX2), task("nginx", 4, **NGINX)], 3, 3, {"cpu": 0.5, "memory": 2.5}),
        ([task("nginx2", 2, **NGINX2), task("nginx", 4, **NGINX)], 0, 6, {"cpu": 0.8, "memory": 4.0}),
        ([task("nginx", 4, **NGINX), task("nginx2", 2, **NGINX2)], 3, 3, {"cpu": 0.3, "memory": 1.5}),
        ([task("nginx", 3, **NGINX)], 3, 3, {"cpu": 0.3, "memory": 1.5}),
    ],
    ids=[
        "seed05-minavailable3-first-three-pods",
        "seed06-default-minavailable-all-six",
        "seed07-task-order-swapped",
        "seed08-nginx-job",
    ],
)
def test_podgroup_matches_seed_numbers(tasks, min_available, min_member, resources):
    spec = {"minAvailable": min_available} if min_available else {}
    pg = jc.derive_podgroup(jc.admit(job(*tasks, queue="weight", **spec), QUEUES, 0.0))
    assert pg.min_member == min_member
    assert pg.min_resources == resources  # exact: summed as decimals, not drifting floats
    assert pg.queue == "weight" and pg.name == "job1"


@pytest.mark.parametrize(
    "seed",
    [
        "seed-05-minresources-minavailable3",
        "seed-06-minresources-default-minavailable",
        "seed-07-minresources-task-order-swapped",
        "seed-08-nginx-job-minavailable3",
    ],
)
def test_podgroup_from_seed_file_matches_expectation(seed):
    scenario = yaml.safe_load((SEEDS / f"{seed}.yaml").read_text())
    expect = yaml.safe_load((SEEDS / f"{seed}.expect.json").read_text())
    manifest = api.decode(scenario["spec"]["events"][0]["create"])
    pg = jc.derive_podgroup(jc.admit(manifest, QUEUES, 0.0))
    for check in expect["checks"]:
        if "minMember" in check:
            assert pg.min_member == check["minMember"]
        if "minResources" in check:
            assert pg.min_resources == check["minResources"]


def test_min_task_member_is_each_tasks_min_available():
    pg = jc.derive_podgroup(jc.admit(job(task("a", 3, minAvailable=1), task("b", 2)), QUEUES, 0.0))
    assert pg.min_task_member == {"a": 1, "b": 2}
    assert pg.min_member == 3


def test_pods_resource_is_not_part_of_min_resources():
    pg = jc.derive_podgroup(jc.admit(job(task("a", 2, cpu="1", memory="1Gi")), QUEUES, 0.0))
    assert pg.min_resources == {"cpu": 2.0, "memory": 2.0 * 2**30}
    assert "pods" not in pg.min_resources


@pytest.mark.parametrize(
    ("min_available", "expected_cpu"),
    [(1, 10.0), (2, 11.0), (4, 31.0), (5, 32.0)],
    ids=[
        "below-task-minimums-takes-high-priority-first",
        "exactly-task-minimums",
        "task-minimums-then-fill-high-priority-first",
        "fill-spills-into-low-priority",
    ],
)
def test_min_resources_orders_tasks_by_priority_class_highest_first(min_available, expected_cpu):
    low = task("low", 3, cpu="1", minAvailable=1, template_priorityClassName="low")
    high = task("high", 3, cpu="10", minAvailable=1, template_priorityClassName="high")
    record = jc.admit(job(low, high, minAvailable=min_available), QUEUES, 0.0, {"low": 10, "high": 100})
    assert jc.derive_podgroup(record).min_resources["cpu"] == expected_cpu


def test_equal_priorities_keep_task_order():
    record = jc.admit(job(task("a", 2, cpu="1"), task("b", 2, cpu="5"), minAvailable=1), QUEUES, 0.0)
    assert [(t.name, n) for t, n in jc.minimum_pods(record)] == [("a", 1)]


def test_init_container_larger_than_containers_sets_the_request():
    t = task("a", 1, cpu="1")
    t["template"]["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "4"}}}]
    pg = jc.derive_podgroup(jc.admit(job(t), QUEUES, 0.0))
    assert pg.min_resources["cpu"] == 4.0


def test_podgroup_carries_priority_class_and_version():
    record = jc.admit(job(task("a"), priorityClassName="high"), QUEUES, 0.0, {"high": 1000})
    pg = jc.derive_podgroup(record)
    assert (pg.priority_class_name, pg.priority, pg.job_version) == ("high", 1000, 0)

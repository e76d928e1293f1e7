"""child_jobs and diff_children: labels, template hash stability, scale up and down."""

from __future__ import annotations

import pytest

from hyperjob.fleetcore import (
    HYPERJOB_NAME_LABEL,
    REPLICATED_JOB_LABEL,
    TEMPLATE_HASH_LABEL,
    ChildJob,
    SplitPlan,
    child_jobs,
    diff_children,
    plan_split,
)
from tests.unit.fleetcore.fleet_builders import ABC_CLUSTERS, job_spec, rjob, task, upstream


def children(hj, current: SplitPlan | None = None) -> list[ChildJob]:
    plan = plan_split(hj, ABC_CLUSTERS, current=current)
    assert isinstance(plan, SplitPlan), plan
    return child_jobs(hj, plan)


def fan_out(replicas: int, image: str = "x"):
    template = job_spec(task("w", 8))
    template["tasks"][0]["template"]["spec"]["containers"][0]["image"] = image
    return upstream("hj", rjob("w", template, replicas=replicas))


def split(total: int, plugins: dict | None = None):
    spec = {"plugins": plugins} if plugins else {}
    template = job_spec(task("w", total), min_available=total, plugins={"pytorch": ["--master=w"], "svc": []})
    return upstream("hj", rjob("w", template, split={"mode": "static"}), **spec)


def test_children_carry_labels_hash_and_rank_annotations() -> None:
    kids = children(split(64))
    assert [(c.name, c.cluster, c.replicas, c.rank_offset) for c in kids] == [
        ("hj-w-0", "a", 22, 0),
        ("hj-w-1", "b", 21, 22),
        ("hj-w-2", "c", 21, 43),
    ]
    job = kids[1].job
    assert job.metadata.name == "hj-w-1"
    assert job.metadata.labels == {
        HYPERJOB_NAME_LABEL: "hj",
        REPLICATED_JOB_LABEL: "w",
        TEMPLATE_HASH_LABEL: kids[1].template_hash,
    }
    assert job.metadata.annotations["hyperjob.io/rank-offset"] == "22"
    assert job.metadata.annotations["hyperjob.io/world-size"] == "64"
    assert job.spec.tasks[0].replicas == 21 and job.spec.min_available == 21


def test_template_hash_is_stable_for_the_same_manifest() -> None:
    assert [c.template_hash for c in children(fan_out(2))] == [c.template_hash for c in children(fan_out(2))]


def test_template_hash_changes_with_the_template() -> None:
    assert children(fan_out(1))[0].template_hash != children(fan_out(1, image="y"))[0].template_hash


def test_hyperjob_pytorch_plugin_replaces_the_childs_own() -> None:
    assert children(split(64))[0].job.spec.plugins == {"pytorch": ["--master=w"], "svc": []}
    assert children(split(64, plugins={"pytorch": ["--master=w"]}))[0].job.spec.plugins == {"svc": []}


def index(kids: list[ChildJob]) -> dict[str, ChildJob]:
    return {c.name: c for c in kids}


def test_an_update_that_changes_nothing_does_nothing() -> None:
    existing = index(children(fan_out(3)))
    changes = diff_children(existing, children(fan_out(3)))
    assert changes.empty and changes.unchanged == ("hj-w-0", "hj-w-1", "hj-w-2")


@pytest.mark.parametrize(
    ("before", "after", "created", "deleted"),
    [
        pytest.param(2, 4, ["hj-w-2", "hj-w-3"], [], id="scale-up-adds-children"),
        pytest.param(4, 1, [], ["hj-w-1", "hj-w-2", "hj-w-3"], id="scale-down-deletes-children"),
    ],
)
def test_fan_out_scaling(before: int, after: int, created: list, deleted: list) -> None:
    old = children(fan_out(before))
    plan = plan_split(fan_out(before), ABC_CLUSTERS)
    assert isinstance(plan, SplitPlan)
    changes = diff_children(index(old), children(fan_out(after), current=plan))
    assert [c.name for c in changes.create] == created and list(changes.delete) == deleted
    assert not changes.update


def test_scaling_a_split_job_updates_replicas_in_place() -> None:
    old = children(split(48))
    plan = plan_split(split(48), ABC_CLUSTERS)
    changes = diff_children(index(old), children(split(60), current=plan))
    assert [(c.name, c.replicas) for c in changes.update] == [("hj-w-0", 20), ("hj-w-1", 20), ("hj-w-2", 20)]
    assert not changes.create and not changes.delete


def test_a_changed_task_set_recreates_the_child() -> None:
    old = index(children(fan_out(1)))
    template = job_spec(task("w", 8), task("extra", 1, gpus=0))
    new = children(upstream("hj", rjob("w", template, replicas=1)))
    changes = diff_children(old, new)
    assert changes.delete == ("hj-w-0",) and [c.name for c in changes.create] == ["hj-w-0"]


def test_template_hash_ignores_map_key_order() -> None:
    def with_plugins(plugins: dict) -> str:
        return children(upstream("hj", rjob("w", job_spec(task("w", 8), plugins=plugins), replicas=1)))[0].template_hash

    assert with_plugins({"svc": [], "env": []}) == with_plugins({"env": [], "svc": []})


def test_split_children_keep_their_own_task_dependencies_and_whole_partitions() -> None:
    master = task("master", 1, gpus=0)
    workers = task("worker", 8)
    workers["dependsOn"] = {"name": ["master"]}
    workers["partitionPolicy"] = {"totalPartitions": 4, "partitionSize": 2, "minPartitions": 4}
    hj = upstream(
        "hj",
        rjob(
            "w",
            job_spec(master, workers, min_available=9),
            split={"mode": "static", "clusters": [{"name": "a", "replicas": 5}, {"name": "b", "replicas": 4}]},
        ),
    )
    first, second = children(hj)
    assert [t.name for t in first.job.spec.tasks] == ["master", "worker"]
    assert first.job.spec.tasks[1].depends_on is not None  # the master is in this child
    worker = second.job.spec.tasks[0]  # no master here: nothing to wait for in this cluster
    assert (worker.name, worker.replicas, worker.depends_on) == ("worker", 4, None)
    assert worker.partition_policy is not None
    assert (worker.partition_policy.total_partitions, worker.partition_policy.min_partitions) == (2, 2)
    assert worker.min_available == 4

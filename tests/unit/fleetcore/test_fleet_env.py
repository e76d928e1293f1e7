"""The cross-cluster training env: one WORLD_SIZE, global ranks, one master."""

from __future__ import annotations

import pytest

from hyperjob.fleetcore import SplitPlan, plan_split, training_env
from tests.unit.fleetcore.fleet_builders import ABC_CLUSTERS, job_spec, rjob, task, upstream

TEMPLATE = job_spec(task("trainer", 1), task("worker", 63), min_available=64)
SPLIT = {"clusters": [{"name": "a", "replicas": 32}, {"name": "b", "replicas": 32}]}
HJ = upstream("llm", rjob("job", TEMPLATE, split=SPLIT), plugins={"pytorch": ["--master=trainer", "--port=23456"]})


def plan() -> SplitPlan:
    result = plan_split(HJ, ABC_CLUSTERS)
    assert isinstance(result, SplitPlan), result
    return result


@pytest.mark.parametrize(
    ("child", "task_name", "index", "rank", "cluster", "child_index"),
    [
        pytest.param("llm-job-0", "trainer", 0, 0, "a", 0, id="master-is-rank-0"),
        pytest.param("llm-job-0", "worker", 0, 1, "a", 0, id="first-worker-after-master"),
        pytest.param("llm-job-0", "worker", 30, 31, "a", 0, id="last-pod-of-child-0"),
        pytest.param("llm-job-1", "worker", 0, 32, "b", 1, id="child-1-starts-at-its-offset"),
        pytest.param("llm-job-1", "worker", 31, 63, "b", 1, id="last-rank"),
    ],
)
def test_global_ranks(child: str, task_name: str, index: int, rank: int, cluster: str, child_index: int) -> None:
    env = training_env(HJ, plan(), child, task_name, index)
    assert env == {
        "HYPERJOB_NAME": "llm",
        "HYPERJOB_WORLD_SIZE": "64",
        "HYPERJOB_CHILD_INDEX": str(child_index),
        "HYPERJOB_CLUSTER": cluster,
        "HYPERJOB_RANK": str(rank),
        "MASTER_ADDR": "llm-job-0-trainer-0.llm-job-0",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "64",
        "RANK": str(rank),
    }


def test_without_the_pytorch_plugin_only_hyperjob_entries() -> None:
    hj = upstream("llm", rjob("job", TEMPLATE, split=SPLIT))
    result = plan_split(hj, ABC_CLUSTERS)
    assert isinstance(result, SplitPlan)
    env = training_env(hj, result, "llm-job-1", "worker", 0)
    assert "MASTER_ADDR" not in env and env["HYPERJOB_RANK"] == "32"


def test_fan_out_children_get_consecutive_offsets() -> None:
    hj = upstream("hj", rjob("w", job_spec(task("w", 4)), replicas=3), plugins={"pytorch": ["--master=w"]})
    result = plan_split(hj, ABC_CLUSTERS)
    assert isinstance(result, SplitPlan)
    assert [training_env(hj, result, f"hj-w-{i}", "w", 1)["RANK"] for i in range(3)] == ["1", "5", "9"]
    assert training_env(hj, result, "hj-w-2", "w", 0)["MASTER_ADDR"] == "hj-w-0-w-0.hj-w-0"

"""Node health in the cluster-scheduler (pure parts): sick GPUs and downed InfiniBand ports taint a
node against the pods they concern; schedcore then places around them; capacity stops counting
the accelerators of a sick-GPU node as free."""

from __future__ import annotations

import pytest

import api
import hwprobe
import jobcore as jc
import records
import schedcore
from cluster_scheduler import domain
from cluster_scheduler.summary import summarize

QUEUES = {"default": "Open"}
SICK_GPU = hwprobe.NodeHealth(sick_gpus=[3], reasons=["gpu3: fatal Xid 79"])
IB_DOWN = hwprobe.NodeHealth(down_ports=["mlx5_1/1"], reasons=["ib mlx5_1/1: DOWN"])


def record(name: str, replicas: int, gpus: int) -> jc.JobRecord:
    requests = {"cpu": "1", "memory": "1Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    manifest = api.decode({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
                           "spec": {"minAvailable": replicas, "tasks": [{"name": "w", "replicas": replicas, "template": {
                               "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}}]}})
    admitted, _ = jc.decide(jc.admit(manifest, QUEUES, 0.0), jc.PodGroupAdmitted(), 0.0)  # type: ignore[arg-type]
    return admitted


def node(name: str, health: hwprobe.NodeHealth | None = None) -> records.NodeDoc:
    return records.NodeDoc(name=name, allocatable={"cpu": 64.0, "memory": 2.0 ** 40, "nvidia.com/gpu": 8.0, "pods": 110.0},
                           taints=domain.health_taints(health) if health else [])


def placements(nodes: list[records.NodeDoc], job: jc.JobRecord) -> set[str]:
    state = domain.ClusterState(nodes={n.name: n for n in nodes}, queues={},
                                podgroups={job.name: jc.derive_podgroup(job)}, jobs={job.name: job},
                                phases={job.name: "Inqueue"}, bound={})
    decision = schedcore.Scheduler(schedcore.DEFAULT_CONF).cycle(domain.snapshot(state, now=1.0))
    return {b.node for b in decision.binds}


def test_health_becomes_named_no_schedule_taints():
    assert domain.health_taints(SICK_GPU) == [{"key": "hyperjob.io/gpu-unhealthy", "value": "gpu3", "effect": "NoSchedule"}]
    assert domain.health_taints(IB_DOWN) == [{"key": "hyperjob.io/fabric-unhealthy", "value": "mlx5_1.p1",
                                              "effect": "NoSchedule"}]
    assert domain.health_taints(hwprobe.NodeHealth()) == []


@pytest.mark.parametrize(("health", "replicas", "gpus", "lands_on_sick"), [
    (SICK_GPU, 1, 1, False), (SICK_GPU, 1, 0, True), (SICK_GPU, 4, 0, True),
    (IB_DOWN, 4, 1, False), (IB_DOWN, 4, 0, False), (IB_DOWN, 1, 1, True),
], ids=["sick-gpu-gpu-pod", "sick-gpu-cpu-pod", "sick-gpu-cpu-gang", "ib-down-gpu-gang", "ib-down-cpu-gang",
        "ib-down-single-gpu-pod"])
def test_a_sick_node_gets_only_the_pods_its_fault_does_not_concern(health, replicas, gpus, lands_on_sick):
    # Only the sick node has room: the pods either land there or stay pending.
    job = record("j", replicas, gpus)
    nodes = [node("sick", health), node("full")]
    nodes[1] = records.NodeDoc(name="full", allocatable={"cpu": 0.5, "memory": 1.0, "pods": 110.0})
    assert placements(nodes, job) == ({"sick"} if lands_on_sick else set())


def test_a_gang_goes_around_the_sick_node_when_healthy_ones_have_room():
    assert placements([node("n0", SICK_GPU), node("n1"), node("n2")], record("j", 16, 1)) == {"n1", "n2"}


def test_capacity_does_not_count_a_sick_gpu_nodes_accelerators_as_free():
    summary = summarize("c1", {}, {"n0": node("n0", SICK_GPU), "n1": node("n1", IB_DOWN)}, {}, now=1.0)
    assert summary.allocatable["nvidia.com/gpu"] == 16.0
    assert summary.free["nvidia.com/gpu"] == 8.0 and summary.free["cpu"] == 128.0


def test_capacity_summary_reports_free_accelerators_by_model_common_gangs_and_health():
    a100 = records.NodeDoc(name="n2", allocatable={"cpu": 64.0, "nvidia.com/gpu": 4.0, "pods": 110.0},
                           labels={"nvidia.com/gpu.product": "A100"})
    nodes = {"n0": node("n0", SICK_GPU), "n1": node("n1", IB_DOWN), "n2": a100}
    summary = summarize("c1", {}, nodes, {"n1": {"nvidia.com/gpu": 2.0, "cpu": 2.0}}, now=1.0)
    assert summary.free_accelerators == {"A100": 4.0}  # n0 and n1 carry no GPU model label
    assert summary.gangs["1-gpu"] == 6 + 4  # n1's 6 free GPUs and n2's 4; the sick n0 offers none
    assert summary.gangs["8-gpu"] == 0
    assert (summary.gpu_healthy_nodes, summary.fabric_healthy_nodes) == (2, 2)
    assert [n.name for n in summary.node_free] == ["n0", "n1", "n2"]

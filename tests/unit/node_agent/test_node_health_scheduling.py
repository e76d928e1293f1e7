"""Node health in the cluster-scheduler (pure parts): the agent's verdict on its GPUs and fabric
(``events.NodeStatus``: ``gpu_ok``, ``sick_gpus``, ``fabric_ok``, ``down_ports``) becomes two named
``NoSchedule`` taints on the node's view, against the pods they concern; schedcore then places
around them; the capacity summary stops counting a sick-GPU node's accelerators as free.

Jobs reach the scheduler as the job-controller describes them (``job_state_parts`` → ``JobState``
→ ``assemble``), so these tests also hold the two services' shared description of a job."""

from __future__ import annotations

import pytest

from hyperjob import api, events, hwprobe, records, schedcore
from hyperjob import jobcore as jc
from hyperjob.services.cluster_scheduler import domain
from hyperjob.services.cluster_scheduler.summary import NodeRoom, summarize
from hyperjob.services.job_controller.domain import job_state_parts

QUEUES = {"default": "Open"}
SICK_GPU = hwprobe.NodeHealth(sick_gpus=[3], reasons=["gpu3: fatal Xid 79"])
IB_DOWN = hwprobe.NodeHealth(down_ports=["mlx5_1/1"], reasons=["ib mlx5_1/1: DOWN"])
GPU_NODE = {"cpu": 64.0, "memory": 2.0**40, "nvidia.com/gpu": 8.0, "pods": 110.0}


def job_view(name: str, replicas: int, gpus: int) -> domain.JobView:
    """A job admitted by its podgroup, its pods created, as the cluster-scheduler receives it."""
    requests = {"cpu": "1", "memory": "1Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    manifest = api.decode(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "minAvailable": replicas,
                "tasks": [
                    {
                        "name": "w",
                        "replicas": replicas,
                        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}},
                    }
                ],
            },
        }
    )
    record, _ = jc.decide(jc.admit(manifest, QUEUES, 0.0), jc.PodGroupAdmitted(), 0.0)  # type: ignore[arg-type]
    assert len(record.pods) == replicas
    parts = {
        fields["part"]: events.JobState(event_id=f"{name}/{fields['part']}", **fields)
        for fields in job_state_parts(record, records.ChildInfo(), "c1")
    }
    view = domain.assemble(parts)
    assert view is not None
    return view


def node(
    name: str, health: hwprobe.NodeHealth | None = None, allocatable: dict[str, float] | None = None
) -> domain.NodeView:
    """A node as the scheduler keeps it from the agent's ``NodeStatus`` (its verdict included)."""
    verdict = health or hwprobe.NodeHealth()
    return domain.NodeView(
        name=name,
        allocatable=allocatable or dict(GPU_NODE),
        gpu_ok=verdict.gpu_ok,
        fabric_ok=verdict.fabric_ok,
        sick_gpus=list(verdict.sick_gpus),
        down_ports=list(verdict.down_ports),
    )


def placements(nodes: list[domain.NodeView], job: domain.JobView) -> set[str]:
    state = domain.ClusterView(
        nodes={n.name: n for n in nodes},
        queues={},
        jobs={job.name: job},
        bound={},
        phases={job.name: "Inqueue"},
        reservations={},
    )
    decision = schedcore.Scheduler(schedcore.DEFAULT_CONF).cycle(domain.snapshot(state, now=1.0))
    return {b.node for b in decision.binds}


def test_the_verdict_becomes_named_no_schedule_taints():
    assert node("n", SICK_GPU).all_taints() == [
        {"key": "hyperjob.io/gpu-unhealthy", "value": "gpu3", "effect": "NoSchedule"}
    ]
    assert node("n", IB_DOWN).all_taints() == [
        {"key": "hyperjob.io/fabric-unhealthy", "value": "mlx5_1.p1", "effect": "NoSchedule"}
    ]
    assert node("n").all_taints() == []
    declared = domain.NodeView(
        name="n", allocatable=GPU_NODE, taints=[{"key": "k", "effect": "NoSchedule"}], gpu_ok=False, sick_gpus=[0, 2]
    )
    assert [t["key"] for t in declared.all_taints()] == ["k", "hyperjob.io/gpu-unhealthy"]
    assert declared.all_taints()[1]["value"] == "gpu0-gpu2"


def test_a_node_is_ready_only_while_it_says_so_and_its_agent_names_it_alive():
    assert node("n").ready
    assert not domain.NodeView(name="n", allocatable=GPU_NODE, reported_ready=False).ready
    assert not domain.NodeView(name="n", allocatable=GPU_NODE, stale=True).ready


@pytest.mark.parametrize(
    ("health", "replicas", "gpus", "lands_on_sick"),
    [
        (SICK_GPU, 1, 1, False),
        (SICK_GPU, 1, 0, True),
        (SICK_GPU, 4, 0, True),
        (IB_DOWN, 4, 1, False),
        (IB_DOWN, 4, 0, False),
        (IB_DOWN, 1, 1, True),
    ],
    ids=[
        "sick-gpu-gpu-pod",
        "sick-gpu-cpu-pod",
        "sick-gpu-cpu-gang",
        "ib-down-gpu-gang",
        "ib-down-cpu-gang",
        "ib-down-single-gpu-pod",
    ],
)
def test_a_sick_node_gets_only_the_pods_its_fault_does_not_concern(health, replicas, gpus, lands_on_sick):
    # Only the sick node has room: the pods either land there or stay pending.
    job = job_view("j", replicas, gpus)
    nodes = [node("sick", health), node("full", allocatable={"cpu": 0.5, "memory": 1.0, "pods": 110.0})]
    assert placements(nodes, job) == ({"sick"} if lands_on_sick else set())


def test_a_gang_goes_around_the_sick_node_when_healthy_ones_have_room():
    assert placements([node("n0", SICK_GPU), node("n1"), node("n2")], job_view("j", 16, 1)) == {"n1", "n2"}


def test_a_node_that_is_not_ready_gets_nothing():
    down = domain.NodeView(name="n0", allocatable=GPU_NODE, reported_ready=False)
    assert placements([down, node("n1")], job_view("j", 2, 1)) == {"n1"}
    assert placements([down], job_view("j", 2, 1)) == set()


def room(n: domain.NodeView, used: dict[str, float] | None = None) -> NodeRoom:
    """A node as the summary sees it, built as ``report_capacity`` builds it."""
    free = {r: a - (used or {}).get(r, 0.0) for r, a in n.allocatable.items()}
    return NodeRoom(
        name=n.name,
        allocatable=n.allocatable,
        free=free,
        labels=n.labels,
        taints=n.all_taints(),
        schedulable=n.ready and not n.unschedulable,
    )


def test_capacity_does_not_count_a_sick_gpu_nodes_accelerators_as_free():
    summary = summarize("c1", {}, [room(node("n0", SICK_GPU)), room(node("n1", IB_DOWN))], 2)
    assert summary["allocatable"]["nvidia.com/gpu"] == 16.0
    assert summary["free"]["nvidia.com/gpu"] == 8.0 and summary["free"]["cpu"] == 128.0


def test_capacity_summary_reports_free_accelerators_by_model_common_gangs_health_and_classes():
    a100 = domain.NodeView(
        name="n2",
        allocatable={"cpu": 64.0, "nvidia.com/gpu": 4.0, "pods": 110.0},
        labels={"nvidia.com/gpu.product": "A100"},
    )
    down = domain.NodeView(name="n3", allocatable=GPU_NODE, reported_ready=False)
    rooms = [
        room(node("n0", SICK_GPU)),
        room(node("n1", IB_DOWN), {"nvidia.com/gpu": 2.0, "cpu": 2.0}),
        room(a100),
        room(down),
    ]
    summary = summarize("c1", {"region": "eu"}, rooms, 4)
    msg = events.ClusterCapacityReported(event_id="x", **summary)  # the fields are the message's
    assert (msg.nodes, msg.ready_nodes, msg.labels) == (4, 3, {"region": "eu"})
    assert msg.free_accelerators == {"A100": 4.0}  # n0 and n1 carry no GPU model label; n3 is down
    assert msg.gangs["1-gpu"] == 6 + 4  # n1's 6 free GPUs and n2's 4; the sick n0 offers none
    assert msg.gangs["8-gpu"] == 0
    assert (msg.gpu_healthy_nodes, msg.fabric_healthy_nodes) == (2, 2)
    assert [(c.name, c.count) for c in msg.node_classes] == [("n0", 1), ("n1", 1), ("n2", 1)]


def test_alike_nodes_form_one_class_with_a_count():
    rooms = [room(node(f"n{i}")) for i in range(5)] + [room(node("n5"), {"cpu": 1.0})]
    summary = summarize("c1", {}, rooms, 6)
    assert [(c.name, c.count) for c in summary["node_classes"]] == [("n0", 5), ("n5", 1)]
    assert summary["free"]["cpu"] == 6 * 64.0 - 1.0

"""The global scheduler's side of coordinated preemption (ADR 0011): what runs on the fleet, from
its placement documents, and the orders it sends each cluster of a plan."""

from __future__ import annotations

from typing import Any

from hyperjob import api, fleetcore, records
from hyperjob.services.global_scheduler import domain

GPU = "nvidia.com/gpu"


def cluster(name: str, used_gpus: int) -> fleetcore.ClusterCapacity:
    alloc = {"cpu": 64.0, GPU: 8.0, "pods": 110.0}
    free = {"cpu": 64.0 - used_gpus, GPU: 8.0 - used_gpus, "pods": 110.0 - used_gpus}
    node = fleetcore.NodeCapacity(name=f"{name}-n0", free=free, allocatable=alloc)
    return fleetcore.ClusterCapacity(name=name, free=free, allocatable=alloc, nodes=(node,))


def job(pods: int, min_available: int = 0, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    container = {"name": "t", "image": "x", "resources": {"requests": {"cpu": "1", GPU: "1"}}}
    template: dict[str, Any] = {"spec": {"containers": [container]}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    manifest = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"minAvailable": min_available, "tasks": [{"name": "w", "replicas": pods, "template": template}]},
    }
    decoded = api.decode(manifest)
    return api.encode(decoded)


def running(child: str, on: str, **kw: Any) -> records.PlacementDoc:
    return records.PlacementDoc(
        child=child, owner=child, plain=True, job=job(8, **kw), state="Dispatched", cluster=on, running=True
    )


def waiting(child: str, on: str) -> records.PlacementDoc:
    return records.PlacementDoc(child=child, owner="urgent", job=job(6), clusters=[on])


def owner(name: str, priority: int) -> records.OwnerDoc:
    return records.OwnerDoc(name=name, queue="default", priority=priority, request={}, created=0.0, admitted=True)


OWNERS = {"urgent": owner("urgent", 1000), "batch-a": owner("batch-a", 10), "batch-b": owner("batch-b", 10)}
FULL = {"a": cluster("a", 8), "b": cluster("b", 8)}
GANG = [waiting("urgent-0", "a"), waiting("urgent-1", "b")]


def test_a_gang_pinned_to_two_full_clusters_gets_one_order_per_cluster() -> None:
    placements = [running("batch-a", "a", min_available=2), running("batch-b", "b", min_available=2)]
    plan = domain.preemption(OWNERS["urgent"], GANG, placements, OWNERS, {}, dict(FULL), 100.0)
    assert isinstance(plan, fleetcore.PreemptionPlan)
    orders = domain.preempt_orders(plan)
    assert [(c, child, [(v.job, len(v.pods)) for v in victims]) for c, child, victims in orders] == [
        ("a", "urgent-0", [("batch-a", 6)]),
        ("b", "urgent-1", [("batch-b", 6)]),
    ]
    assert all(p.startswith("batch-a-w-") for p in orders[0][2][0].pods)  # the pods' names on the cluster


def test_work_that_opts_out_of_preemption_leaves_the_whole_gang_waiting() -> None:
    placements = [
        running("batch-a", "a", min_available=2),
        running("batch-b", "b", min_available=2, annotations={"volcano.sh/preemptable": "false"}),
    ]
    plan = domain.preemption(OWNERS["urgent"], GANG, placements, OWNERS, {}, dict(FULL), 100.0)
    assert isinstance(plan, str)


def test_a_queue_that_is_not_reclaimable_keeps_its_work() -> None:
    other = records.OwnerDoc(name="batch-b", queue="other", priority=10, request={}, created=0.0, admitted=True)
    placements = [running("batch-a", "a", min_available=2), running("batch-b", "b", min_available=2)]
    placements[1] = records.PlacementDoc(**{**{f: getattr(placements[1], f) for f in placements[1].__struct_fields__},
                                            "job": _in_queue(placements[1].job, "other")})  # fmt: skip
    queues = {"other": fleetcore.FleetQueue(name="other", reclaimable=False)}
    owners = {**OWNERS, "batch-b": other}
    assert isinstance(domain.preemption(OWNERS["urgent"], GANG, placements, owners, queues, dict(FULL), 1.0), str)
    queues = {"other": fleetcore.FleetQueue(name="other")}
    assert not isinstance(domain.preemption(OWNERS["urgent"], GANG, placements, owners, queues, dict(FULL), 1.0), str)


def _in_queue(manifest: dict[str, Any], queue: str) -> dict[str, Any]:
    return {**manifest, "spec": {**manifest["spec"], "queue": queue}}


def test_a_job_without_min_available_is_a_whole_gang_and_gives_nothing() -> None:
    """Volcano defaults minAvailable to every replica: such a job is never broken at all."""
    placements = [running("batch-a", "a"), running("batch-b", "b", min_available=2)]
    assert isinstance(domain.preemption(OWNERS["urgent"], GANG, placements, OWNERS, {}, dict(FULL), 1.0), str)

"""Coordinated preemption across clusters (``fleetcore.plan_preemption``): a gang that free room
cannot hold runs on what lower-priority work gives back by Volcano's rules, all or nothing across
clusters, destroying the least GPU-seconds, never breaking a gang below its minAvailable."""

from __future__ import annotations

import pytest

from hyperjob.fleetcore import PodShape, PreemptionPlan, Preemptor, RunningJob, RunningPod, plan_preemption
from tests.unit.fleetcore.fleet_builders import cluster, fleet

GPU = "nvidia.com/gpu"
ONE_GPU = {"cpu": 8.0, GPU: 1.0, "pods": 1.0}
NOW = 1000.0


def running(
    name: str,
    on: str,
    pods: int = 8,
    *,
    priority: int = 1,
    queue: str = "default",
    min_available: int = 0,
    since: float = 0.0,
    preemptable: bool = True,
) -> RunningJob:
    """``pods`` one-GPU pods of ``name`` on the first node of cluster ``on`` (as ``cluster(on,
    nodes=1, used_gpus=pods)`` counts them)."""
    return RunningJob(
        name=name,
        cluster=on,
        queue=queue,
        priority=priority,
        min_available=min_available,
        running_since=since,
        pods=tuple(
            RunningPod(name=f"{name}-{i}", node=f"{on}-n0", request=ONE_GPU, preemptable=preemptable)
            for i in range(pods)
        ),
    )


def gang(
    *gpus: int, priority: int = 10, queue: str = "default", reclaimable: dict[str, bool] | None = None
) -> Preemptor:
    """A gang of one child per entry, each of that many one-GPU pods."""
    return Preemptor(
        name="urgent",
        queue=queue,
        priority=priority,
        children={f"urgent-{i}": [PodShape(request=ONE_GPU)] * n for i, n in enumerate(gpus)},
        reclaimable=reclaimable or {},
    )


FULL = fleet(cluster("a", nodes=1, used_gpus=8), cluster("b", nodes=1, used_gpus=8))


def evicted(plan: PreemptionPlan | str) -> dict[tuple[str, str], int]:
    assert isinstance(plan, PreemptionPlan), plan
    return {(e.cluster, e.job): len(e.pods) for e in plan.evictions}


def test_a_gang_over_two_full_clusters_evicts_in_both_and_places_every_child() -> None:
    plan = plan_preemption(gang(8, 8), FULL, [running("lo-a", "a"), running("lo-b", "b")], NOW)
    assert isinstance(plan, PreemptionPlan)
    assert plan.placements == {"urgent-0": "a", "urgent-1": "b"}
    assert evicted(plan) == {("a", "lo-a"): 8, ("b", "lo-b"): 8}
    assert plan.gpu_seconds == 16 * NOW
    assert "urgent-0 on a" in plan.explain() and "lo-b on b: 8 pod(s), 8000 GPU-s" in plan.explain()


@pytest.mark.parametrize(
    "guarded",
    [
        running("lo-b", "b", min_available=8),  # its gang's minAvailable protects every pod
        running("lo-b", "b", preemptable=False),  # volcano.sh/preemptable: "false"
        running("lo-b", "b", priority=10),  # not of lower priority
        running("lo-b", "b", queue="other"),  # another queue, not reclaimable (below)
    ],
    ids=["min-available", "not-preemptable", "same-priority", "queue-not-reclaimable"],
)
def test_nothing_is_evicted_anywhere_when_one_child_could_not_run(guarded: RunningJob) -> None:
    """All or nothing: cluster a alone could be emptied, but the second child has nowhere to go."""
    plan = plan_preemption(gang(8, 8, reclaimable={"other": False}), FULL, [running("lo-a", "a"), guarded], NOW)
    assert plan == "child urgent-1 fits no cluster even with every pod Volcano's rules let it preempt"


def test_another_queue_that_is_reclaimable_gives_its_pods_back() -> None:
    plan = plan_preemption(gang(8, 8), FULL, [running("lo-a", "a"), running("lo-b", "b", queue="other")], NOW)
    assert evicted(plan) == {("a", "lo-a"): 8, ("b", "lo-b"): 8}


def test_the_victims_are_those_that_lose_the_least_work() -> None:
    """lo-a has run 1000 s, lo-b 100 s: the one child goes to b, where 800 GPU-s are lost, not 8000."""
    jobs = [running("lo-a", "a", since=0.0), running("lo-b", "b", since=900.0)]
    plan = plan_preemption(gang(8), FULL, jobs, NOW)
    assert isinstance(plan, PreemptionPlan)
    assert plan.placements == {"urgent-0": "b"} and evicted(plan) == {("b", "lo-b"): 8}
    assert plan.gpu_seconds == 800.0


def test_a_gang_is_never_broken_below_its_min_available() -> None:
    """lo-a runs 8 pods with minAvailable 4: a child of 4 GPUs takes 4 of them; one of 5 cannot run."""
    clusters = fleet(cluster("a", nodes=1, used_gpus=8))
    plan = plan_preemption(gang(4), clusters, [running("lo-a", "a", min_available=4)], NOW)
    assert evicted(plan) == {("a", "lo-a"): 4}
    assert isinstance(plan_preemption(gang(5), clusters, [running("lo-a", "a", min_available=4)], NOW), str)


def test_only_the_pods_a_child_needs_are_evicted_and_free_room_is_used_first() -> None:
    """Cluster a has 4 GPUs free and lo-a on the other 4: a child of 6 evicts 2 pods; a child that
    fits cluster b's free room evicts nothing there or anywhere."""
    clusters = fleet(cluster("a", nodes=1, used_gpus=4), cluster("b", nodes=1, used_gpus=0))
    plan = plan_preemption(gang(6, 8), clusters, [running("lo-a", "a", pods=4)], NOW)
    assert isinstance(plan, PreemptionPlan)
    assert plan.placements == {"urgent-0": "a", "urgent-1": "b"}
    assert evicted(plan) == {("a", "lo-a"): 2}


def test_two_children_on_one_cluster_take_distinct_pods_and_respect_min_available_together() -> None:
    """One cluster of two 8-GPU nodes, both full of lo (16 pods, minAvailable 8): two children of
    4 GPUs evict 8 pods in all, no pod twice; a third child of 1 GPU could not run."""
    clusters = fleet(cluster("a", nodes=2, used_gpus=16))
    job = running("lo", "a", pods=16, min_available=8)
    job = RunningJob(
        **{
            **{f: getattr(job, f) for f in job.__struct_fields__},
            "pods": tuple(RunningPod(name=f"lo-{i}", node=f"a-n{i // 8}", request=ONE_GPU) for i in range(16)),
        }
    )
    plan = plan_preemption(gang(4, 4), clusters, [job], NOW)
    assert isinstance(plan, PreemptionPlan)
    (eviction,) = plan.evictions
    assert len(eviction.pods) == len(set(eviction.pods)) == 8
    assert isinstance(plan_preemption(gang(4, 4, 1), clusters, [job], NOW), str)


def test_pods_whose_node_is_not_known_give_their_room_back_where_it_is_taken() -> None:
    """The global scheduler knows the cluster a job runs on, not the node: the room comes back on
    a node that has that much taken (here the full one, not the empty one of another shape)."""
    clusters = fleet(cluster("a", nodes=2, used_gpus=8))
    job = running("lo-a", "a")
    job = RunningJob(
        **{
            **{f: getattr(job, f) for f in job.__struct_fields__},
            "pods": tuple(RunningPod(name=p.name, node="", request=p.request) for p in job.pods),
        }
    )
    plan = plan_preemption(gang(8, 8), clusters, [job], NOW)
    assert isinstance(plan, PreemptionPlan)
    assert evicted(plan) == {("a", "lo-a"): 8}  # a-n1 is free; a-n0's 8 GPUs come back


def test_a_child_pinned_to_a_cluster_is_placed_there_or_not_at_all() -> None:
    pinned = Preemptor(
        name="urgent",
        queue="default",
        priority=10,
        children={"urgent-0": [PodShape(request=ONE_GPU)] * 8},
        clusters={"urgent-0": ["a"]},
    )
    jobs = [running("lo-a", "a", since=0.0), running("lo-b", "b", since=900.0)]  # b would lose less
    plan = plan_preemption(pinned, FULL, jobs, NOW)
    assert isinstance(plan, PreemptionPlan) and plan.placements == {"urgent-0": "a"}
    guarded = [running("lo-a", "a", min_available=8), running("lo-b", "b")]
    assert isinstance(plan_preemption(pinned, FULL, guarded, NOW), str)

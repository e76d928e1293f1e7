"""plan_split: every split policy, rounding, granularity, maxDomains, eligibility, fan-out."""

from __future__ import annotations

import pytest

from hyperjob.fleetcore import SplitPlan, Waiting, apportion, plan_split
from tests.unit.fleetcore.fleet_builders import GPU, cluster, conceptual, fleet, job_spec, rjob, task, upstream


def layout(plan: SplitPlan | Waiting) -> list[tuple[str, str, int]]:
    assert isinstance(plan, SplitPlan), plan
    return [(c.name, c.cluster, c.replicas) for c in plan.children]


ABC = fleet(cluster("a"), cluster("b"), cluster("c"))  # 32 GPUs each


def split_job(split: dict, replicas: int = 64, clusters: list[str] | None = None, **spec: object):
    return upstream("hj", rjob("w", job_spec(task("w", replicas)), clusters=clusters, split=split), **spec)


def test_conceptual_64_replicas_by_cluster_32_32() -> None:
    hj = conceptual(
        "llm",
        job_spec(task("trainer", 64), min_available=64),
        {
            "strategy": "ByCluster",
            "clusters": [{"name": "cluster-a", "replicas": 32}, {"name": "cluster-b", "replicas": 32}],
        },
    )
    plan = plan_split(hj, fleet(cluster("cluster-a"), cluster("cluster-b")))
    assert layout(plan) == [("llm-job-0", "cluster-a", 32), ("llm-job-1", "cluster-b", 32)]
    assert isinstance(plan, SplitPlan)
    assert [c.min_available for c in plan.children] == [32, 32]
    assert [c.rank_offset for c in plan.children] == [0, 32]
    assert plan.world_size == 64 and plan.placement == {"cluster-a": 32, "cluster-b": 32}


CASES = [
    pytest.param(
        {"clusters": [{"name": "b", "replicas": 40}, {"name": "a", "replicas": 24}]},
        ABC | fleet(cluster("b", nodes=5)),
        [("hj-w-0", "b", 40), ("hj-w-1", "a", 24)],
        id="explicit-counts-keep-manifest-order",
    ),
    pytest.param(
        {"mode": "static", "accelerators": 64, "acceleratorType": GPU},
        ABC,
        [("hj-w-0", "a", 22), ("hj-w-1", "b", 21), ("hj-w-2", "c", 21)],
        id="static-accelerators-evenly-rounded",
    ),
    pytest.param(
        {"mode": "static", "granularity": 8},
        ABC,
        [("hj-w-0", "a", 24), ("hj-w-1", "b", 24), ("hj-w-2", "c", 16)],
        id="static-granularity-8",
    ),
    pytest.param(
        {"mode": "static", "weights": {"b": 3, "a": 1}},
        fleet(cluster("a"), cluster("b", nodes=6)),
        [("hj-w-0", "b", 48), ("hj-w-1", "a", 16)],
        id="static-weights-3-to-1",
    ),
    pytest.param(
        {"mode": "static", "weights": {"a": 1, "b": 1, "c": 0}},
        ABC,
        [("hj-w-0", "a", 32), ("hj-w-1", "b", 32)],
        id="static-weight-zero-excluded",
    ),
    pytest.param(
        {"mode": "auto"},
        fleet(cluster("a"), cluster("big", nodes=10)),
        [("hj-w-0", "big", 64)],
        id="auto-one-cluster-holds-all",
    ),
    pytest.param(
        {"mode": "auto"},
        fleet(cluster("small", nodes=3), cluster("big", nodes=6)),
        [("hj-w-0", "big", 43), ("hj-w-1", "small", 21)],
        id="auto-spills-in-proportion-to-room",
    ),
    pytest.param(
        {"mode": "auto", "granularity": 8},
        fleet(cluster("a", nodes=5), cluster("b", nodes=4)),
        [("hj-w-0", "a", 32), ("hj-w-1", "b", 32)],
        id="auto-granularity-8",
    ),
    pytest.param(
        {"mode": "auto"},
        fleet(cluster("a", used_gpus=24), cluster("b"), cluster("c")),
        [("hj-w-0", "b", 32), ("hj-w-1", "c", 32)],
        id="auto-skips-busy-cluster",
    ),
]


@pytest.mark.parametrize(("split", "clusters", "expected"), CASES)
def test_split_policies(split: dict, clusters: dict, expected: list) -> None:
    assert layout(plan_split(split_job(split), clusters)) == expected


def test_static_max_domains_caps_clusters() -> None:
    plan = plan_split(split_job({"mode": "static"}, maxDomains=2), ABC)
    assert layout(plan) == [("hj-w-0", "a", 32), ("hj-w-1", "b", 32)]


def test_auto_max_domains_1_waits_when_no_single_cluster_fits() -> None:
    plan = plan_split(split_job({"mode": "auto"}, maxDomains=1), ABC)
    assert isinstance(plan, Waiting)
    assert "at most 1 cluster" in plan.reason and plan.replicated_job == "w"


def test_static_max_domains_1_waits_when_the_cluster_lacks_gpus() -> None:
    plan = plan_split(split_job({"mode": "static"}, maxDomains=1), ABC)
    assert isinstance(plan, Waiting)
    # No cluster has 64 GPUs at all: said at once, as Kueue's inadmissible.
    assert "inadmissible: cluster a can never hold it: nvidia.com/gpu: needs 64, allocatable 32" in plan.reason


def test_explicit_counts_wait_for_a_cluster_that_lacks_room() -> None:
    hj = split_job({"clusters": [{"name": "a", "replicas": 32}, {"name": "b", "replicas": 32}]})
    plan = plan_split(hj, fleet(cluster("a"), cluster("b", used_gpus=8)))
    assert isinstance(plan, Waiting) and "cluster b lacks nvidia.com/gpu" in plan.reason
    assert layout(plan_split(hj, fleet(cluster("a"), cluster("b", used_gpus=8)), check_fit=False)) == [
        ("hj-w-0", "a", 32),
        ("hj-w-1", "b", 32),
    ]


def test_explicit_counts_wait_for_a_cluster_that_stopped_reporting() -> None:
    hj = split_job({"clusters": [{"name": "a", "replicas": 32}, {"name": "b", "replicas": 32}]})
    plan = plan_split(hj, fleet(cluster("a", last_report=100.0), cluster("b", last_report=60.0)), now=100.0)
    assert isinstance(plan, Waiting) and "cluster b is not reporting" in plan.reason


def test_cluster_names_are_the_eligible_set() -> None:
    plan = plan_split(split_job({"mode": "static"}, clusters=["c", "a"]), ABC)
    assert layout(plan) == [("hj-w-0", "c", 32), ("hj-w-1", "a", 32)]


def test_gpu_model_from_node_selector_decides_eligibility() -> None:
    template = job_spec(task("w", 16, node_selector={"nvidia.com/gpu.product": "H100"}))
    hj = upstream("hj", rjob("w", template, split={"mode": "auto"}))
    clusters = fleet(
        cluster("a", nodes=8, node_labels={"nvidia.com/gpu.product": "A100"}),
        cluster("b", node_labels={"nvidia.com/gpu.product": "H100"}),
    )
    assert layout(plan_split(hj, clusters)) == [("hj-w-0", "b", 16)]


def test_cluster_selector_annotation_filters_by_cluster_labels() -> None:
    hj = upstream(
        "hj",
        rjob("w", job_spec(task("w", 8)), split={"mode": "auto"}),
        annotations={"hyperjob.io/cluster-selector": "region=eu"},
    )
    clusters = fleet(cluster("a", nodes=8, labels={"region": "us"}), cluster("b", labels={"region": "eu"}))
    assert layout(plan_split(hj, clusters)) == [("hj-w-0", "b", 8)]


def test_multi_task_template_is_cut_in_task_order() -> None:
    template = job_spec(task("master", 1, gpus=0), task("worker", 63), min_available=64)
    hj = upstream(
        "hj", rjob("w", template, split={"clusters": [{"name": "a", "replicas": 32}, {"name": "b", "replicas": 32}]})
    )
    plan = plan_split(hj, ABC)
    assert isinstance(plan, SplitPlan)
    assert [c.tasks for c in plan.children] == [{"master": 1, "worker": 31}, {"worker": 32}]


def test_child_min_available_is_its_ceiled_share() -> None:
    hj = upstream("hj", rjob("w", job_spec(task("w", 64), min_available=48), split={"mode": "static"}))
    plan = plan_split(hj, ABC)
    assert isinstance(plan, SplitPlan)
    assert [(c.replicas, c.min_available) for c in plan.children] == [(22, 17), (21, 16), (21, 16)]


FAN_OUT = [
    pytest.param(3, ABC, [("hj-w-0", "a", 8), ("hj-w-1", "a", 8), ("hj-w-2", "a", 8)], id="packs-one-cluster"),
    pytest.param(
        5,
        ABC,
        [("hj-w-0", "a", 8), ("hj-w-1", "a", 8), ("hj-w-2", "a", 8), ("hj-w-3", "a", 8), ("hj-w-4", "b", 8)],
        id="spills-when-full",
    ),
    pytest.param(
        2,
        fleet(cluster("a", used_gpus=28), cluster("b")),
        [("hj-w-0", "b", 8), ("hj-w-1", "b", 8)],
        id="most-room-first",
    ),
]


@pytest.mark.parametrize(("replicas", "clusters", "expected"), FAN_OUT)
def test_fan_out_without_split_policy(replicas: int, clusters: dict, expected: list) -> None:
    hj = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=replicas))
    assert layout(plan_split(hj, clusters)) == expected


def test_fan_out_waits_when_max_domains_is_reached() -> None:
    hj = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=5), maxDomains=1)
    plan = plan_split(hj, ABC)
    assert isinstance(plan, Waiting) and "child 4" in plan.reason


def test_a_child_never_lands_where_its_gang_does_not_fit_whole() -> None:
    # 4 GPUs free on each of two nodes: 8 free in sum, but an 8-GPU pod fits nowhere.
    hj = upstream("hj", rjob("w", job_spec(task("w", 1, gpus=8)), replicas=1))
    fragmented = cluster("a", nodes=2, gpus=8, used_gpus=0)
    fragmented = fragmented.__class__(
        name="a",
        nodes=tuple(
            n.__class__(name=n.name, free={**n.free, GPU: 4.0}, allocatable=n.allocatable) for n in fragmented.nodes
        ),
        free={GPU: 8.0},
    )
    plan = plan_split(hj, fleet(fragmented))
    assert isinstance(plan, Waiting) and "lacks nvidia.com/gpu" not in plan.reason


@pytest.mark.parametrize(
    ("total", "weights", "caps", "expected"),
    [
        pytest.param(64, [1, 1, 1], None, [22, 21, 21], id="even-remainder-to-first"),
        pytest.param(10, [3, 1], None, [8, 2], id="largest-remainder"),
        pytest.param(64, [48, 24], [48, 24], [43, 21], id="proportional-with-caps"),
        pytest.param(7, [5, 2], [5, 2], [5, 2], id="caps-exactly-met"),
        pytest.param(0, [1, 1], None, [0, 0], id="nothing-to-split"),
    ],
)
def test_apportion(total: int, weights: list, caps: list | None, expected: list) -> None:
    assert apportion(total, weights, caps) == expected


def test_auto_rescale_keeps_room_held_by_the_current_children() -> None:
    hj = split_job({"mode": "auto"}, replicas=48)
    plan = plan_split(hj, fleet(cluster("a", nodes=6), cluster("b", nodes=2)))
    assert layout(plan) == [("hj-w-0", "a", 48)]
    assert isinstance(plan, SplitPlan)
    # a is now full of this very HyperJob: its 48 replicas count as room for the new split.
    grown = plan_split(
        split_job({"mode": "auto"}, replicas=56),
        fleet(cluster("a", nodes=6, used_gpus=48), cluster("b", nodes=2)),
        current=plan,
    )
    assert layout(grown) == [("hj-w-0", "a", 42), ("hj-w-1", "b", 14)]


def test_explicit_scale_up_only_needs_room_for_the_added_replicas() -> None:
    small = split_job({"clusters": [{"name": "a", "replicas": 24}, {"name": "b", "replicas": 24}]}, replicas=48)
    plan = plan_split(small, ABC)
    assert isinstance(plan, SplitPlan)
    busy = fleet(cluster("a", used_gpus=24), cluster("b", used_gpus=24), cluster("c"))
    big = split_job({"clusters": [{"name": "a", "replicas": 32}, {"name": "b", "replicas": 32}]})
    assert layout(plan_split(big, busy, current=plan)) == [("hj-w-0", "a", 32), ("hj-w-1", "b", 32)]
    assert isinstance(plan_split(big, busy), Waiting)


def test_fan_out_children_keep_their_cluster_on_update() -> None:
    hj = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=2))
    plan = plan_split(hj, ABC)
    assert isinstance(plan, SplitPlan)
    full = fleet(cluster("a", used_gpus=32), cluster("b"), cluster("c"))
    grown = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=3))
    assert layout(plan_split(grown, full, current=plan)) == [("hj-w-0", "a", 8), ("hj-w-1", "a", 8), ("hj-w-2", "b", 8)]


def test_two_replicated_jobs_share_the_capacity_and_ranks_continue() -> None:
    hj = upstream(
        "hj",
        rjob("ps", job_spec(task("ps", 2, gpus=0)), replicas=1),
        rjob("w", job_spec(task("w", 40)), split={"mode": "auto"}),
    )
    plan = plan_split(hj, fleet(cluster("a", nodes=4), cluster("b", nodes=2)))
    assert layout(plan) == [("hj-ps-0", "a", 2), ("hj-w-0", "a", 27), ("hj-w-1", "b", 13)]
    assert isinstance(plan, SplitPlan)
    assert [c.rank_offset for c in plan.children] == [0, 2, 29] and plan.world_size == 42


def test_auto_replan_keeps_child_names_on_their_clusters() -> None:
    first = plan_split(split_job({"mode": "auto"}), fleet(cluster("a", nodes=5), cluster("b", nodes=3)))
    assert layout(first) == [("hj-w-0", "a", 40), ("hj-w-1", "b", 24)]
    assert isinstance(first, SplitPlan)
    # b gained nodes and now has the most room; hj-w-0 still stays on a, only the added replicas must fit.
    later = fleet(cluster("a", nodes=5, used_gpus=40), cluster("b", nodes=6, used_gpus=24))
    again = plan_split(split_job({"mode": "auto"}, replicas=80), later, current=first)
    assert layout(again) == [("hj-w-0", "a", 36), ("hj-w-1", "b", 44)]


def test_auto_replan_onto_one_cluster_credits_what_runs_there() -> None:
    first = plan_split(split_job({"mode": "auto"}), fleet(cluster("a", nodes=5), cluster("b", nodes=3)))
    assert isinstance(first, SplitPlan)
    later = fleet(cluster("a", nodes=5, used_gpus=40), cluster("b", nodes=9, used_gpus=24))
    assert layout(plan_split(split_job({"mode": "auto"}, replicas=72), later, current=first)) == [("hj-w-0", "b", 72)]


def test_the_order_clusters_are_given_in_does_not_matter() -> None:
    clusters = [cluster("c", nodes=3), cluster("a", nodes=5), cluster("b", nodes=5)]
    forward = plan_split(split_job({"mode": "auto"}, replicas=72), fleet(*clusters))
    backward = plan_split(split_job({"mode": "auto"}, replicas=72), fleet(*reversed(clusters)))
    assert forward == backward and layout(forward) == [("hj-w-0", "a", 36), ("hj-w-1", "b", 36)]


def test_static_accelerators_divide_in_whole_replicas_and_skip_clusters_without_them() -> None:
    template = job_spec(task("w", 16, gpus=4))
    split = {"mode": "static", "accelerators": 64, "acceleratorType": GPU}
    hj = upstream("hj", rjob("w", template, split=split))
    plan = plan_split(hj, ABC | fleet(cluster("cpu-only", gpus=0)))
    assert layout(plan) == [("hj-w-0", "a", 6), ("hj-w-1", "b", 5), ("hj-w-2", "c", 5)]


def _linked(capacity, **links: float):
    import msgspec

    return msgspec.structs.replace(capacity, links=links)


@pytest.mark.parametrize(
    ("links", "expected"),
    [
        pytest.param({}, [("hj-w-0", "a", 40), ("hj-w-1", "b", 24)], id="no-links-roomiest-then-name"),
        pytest.param({"b": 100.0, "c": 400.0}, [("hj-w-0", "a", 40), ("hj-w-1", "c", 24)], id="best-link-to-the-first"),
        pytest.param({"b": 400.0, "c": 100.0}, [("hj-w-0", "a", 40), ("hj-w-1", "b", 24)], id="best-link-is-b"),
    ],
)
def test_auto_spills_to_the_best_connected_cluster(links, expected) -> None:
    clusters = fleet(_linked(cluster("a", nodes=5), **links), cluster("b", nodes=3), cluster("c", nodes=3))
    assert layout(plan_split(split_job({"mode": "auto"}), clusters)) == expected


def test_the_best_connected_set_yields_when_it_cannot_hold_the_job() -> None:
    # c is best connected to a but too small; the roomier b is taken rather than a third cluster.
    clusters = fleet(_linked(cluster("a", nodes=5), b=10.0, c=400.0), cluster("b", nodes=4), cluster("c", nodes=1))
    assert layout(plan_split(split_job({"mode": "auto"}, replicas=72), clusters)) == [
        ("hj-w-0", "a", 40),
        ("hj-w-1", "b", 32),
    ]


def test_fan_out_children_prefer_the_cluster_best_linked_to_those_used() -> None:
    clusters = fleet(_linked(cluster("a", nodes=1), c=400.0), cluster("b", nodes=2), cluster("c", nodes=2))
    hj = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=2))
    assert [c for _, c, _ in layout(plan_split(hj, clusters))] == ["b", "b"]  # fewest clusters first
    tight = fleet(_linked(cluster("a", nodes=1), c=400.0), cluster("b", nodes=1), cluster("c", nodes=1))
    assert [c for _, c, _ in layout(plan_split(hj, tight))] == ["a", "c"]  # then the best link to a


def test_a_gang_larger_than_every_cluster_is_inadmissible_at_once() -> None:
    # One child of 40 single-GPU pods; every cluster has 32 GPUs in all, 8 of them in use.
    hj = upstream("hj", rjob("w", job_spec(task("w", 40)), replicas=1))
    plan = plan_split(hj, fleet(cluster("a", used_gpus=8), cluster("b")))
    assert isinstance(plan, Waiting)
    assert plan.reason.startswith("replicatedJob w: child 0: inadmissible: no cluster can ever hold it: ")
    assert "cluster a can never hold it: nvidia.com/gpu: needs 40, allocatable 32" in plan.reason
    # 24 asked of a cluster with 24 free now but 32 in all: it waits for room, not inadmissible.
    room = plan_split(upstream("hj", rjob("w", job_spec(task("w", 28)), replicas=1)), fleet(cluster("a", used_gpus=8)))
    assert isinstance(room, Waiting) and "inadmissible" not in room.reason
    assert "cluster a lacks nvidia.com/gpu: needs 28, free 24" in room.reason

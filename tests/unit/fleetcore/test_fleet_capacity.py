"""Whole-gang fit checks keep a capacity's node classes few: a working copy that takes gang after
gang (the global-scheduler's round, a burst of HyperJobs) merges the classes left alike."""

from __future__ import annotations

import msgspec

from hyperjob import api
from hyperjob.fleetcore.capacity import PodShape, merge_classes, place_gang
from hyperjob.fleetcore.model import ClusterCapacity, NodeCapacity

GPU = "nvidia.com/gpu"
ROOM = {GPU: 8.0, "cpu": 96.0, "pods": 110.0}
ONE_GPU = PodShape(request={GPU: 1.0, "cpu": 1.0, "pods": 1.0})


def one_class(count: int, **fields: object) -> ClusterCapacity:
    total = {k: v * count for k, v in ROOM.items()}
    node = NodeCapacity(name="n0", free=dict(ROOM), allocatable=dict(ROOM), count=count, **fields)  # type: ignore[arg-type]
    return ClusterCapacity(name="c", free=dict(total), allocatable=dict(total), nodes=(node,))


def placed(cluster: ClusterCapacity, pods: list[PodShape]) -> ClusterCapacity:
    result = place_gang(cluster, pods)
    assert not isinstance(result, str), result
    return result


def test_gang_after_gang_leaves_a_filled_class_and_an_empty_one_not_one_class_per_gang() -> None:
    cluster = one_class(2000)
    for _ in range(100):
        cluster = placed(cluster, [ONE_GPU] * 32)  # four whole nodes each
    assert [(n.count, n.free[GPU]) for n in cluster.nodes] == [(400, 0.0), (1600, 8.0)]
    assert cluster.free[GPU] == 16_000 - 3200


def test_half_filled_nodes_of_equal_room_merge_and_the_counts_add_up() -> None:
    cluster = one_class(10)
    for _ in range(4):
        cluster = placed(cluster, [ONE_GPU] * 4)  # half a node each: two half-filled, then one full
    free_by_count = sorted((n.free[GPU], n.count) for n in cluster.nodes)
    assert free_by_count == [(0.0, 2), (8.0, 8)]
    assert sum(n.count for n in cluster.nodes) == 10


def test_merging_keeps_the_first_class_where_it_was_and_apart_what_differs() -> None:
    tainted = (api.Taint(key="gpu", effect="NoSchedule"),)
    a = NodeCapacity(name="a", free=dict(ROOM), allocatable=dict(ROOM), count=2)
    b = msgspec.structs.replace(a, name="b", free={**ROOM, GPU: 0.0})
    c = msgspec.structs.replace(a, name="c", count=3)
    d = msgspec.structs.replace(a, name="d", taints=tainted)
    e = msgspec.structs.replace(a, name="e", labels={"zone": "x"})
    f = msgspec.structs.replace(a, name="f", ready=False)
    merged = merge_classes([a, b, c, d, e, f])
    assert [(n.name, n.count) for n in merged] == [("a", 5), ("b", 2), ("d", 2), ("e", 2), ("f", 2)]


def test_a_gang_that_does_not_fit_after_merging_still_says_why() -> None:
    cluster = placed(one_class(4), [ONE_GPU] * 24)
    assert isinstance(place_gang(cluster, [ONE_GPU] * 9), str)
    assert not isinstance(place_gang(cluster, [ONE_GPU] * 8), str)


def test_a_vanishing_request_bounds_nothing_instead_of_overflowing() -> None:
    """``cpu: 1e-320`` divides the free room to infinity (found by tests/fuzz): such a dimension
    counts as no bound; the others still decide."""
    from hyperjob.fleetcore.capacity import could_ever_host, max_replicas

    tiny = PodShape(request={GPU: 1.0, "cpu": 1e-320, "pods": 1.0})
    assert max_replicas(one_class(2), tiny) == 16
    assert could_ever_host(one_class(2), tiny)

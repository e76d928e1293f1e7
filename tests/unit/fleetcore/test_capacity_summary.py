"""A cluster's capacity summary stays small on a big fleet whose nodes carry labels of their own
(a node's NVLink domain, its leaf switch), and placement still matches selectors on those labels."""

from __future__ import annotations

import msgspec

from hyperjob import events
from hyperjob.fleetcore.capacity import PodShape, node_matches
from hyperjob.services.cluster_scheduler.summary import MAX_LABEL_VALUES, ClassCache, NodeRoom, summarize

GPU = "nvidia.com/gpu"
ROOM = {GPU: 8.0, "cpu": 96.0, "pods": 110.0}


def fleet(size: int) -> list[NodeRoom]:
    return [
        NodeRoom(
            name=f"n{i:05d}",
            allocatable=dict(ROOM),
            free=dict(ROOM),
            labels={"nvlink-domain": f"d{i}", "leaf": f"leaf-{i // 32}", "nvidia.com/gpu.product": "H100"},
            taints=[],
        )
        for i in range(size)
    ]


def test_ten_thousand_nodes_each_with_its_own_domain_summarize_as_one_class_far_below_the_message_limit() -> None:
    summary = summarize("c1", {}, fleet(10_000), 10_000)
    [only] = summary["node_classes"]
    assert only.count == 10_000
    assert only.labels == {
        "nvlink-domain": events.VARIED_LABEL,
        "leaf": events.VARIED_LABEL,
        "nvidia.com/gpu.product": "H100",
    }
    message = events.ClusterCapacityReported(event_id="e", occurred_at=0.0, producer="test", **summary)
    assert len(events.encode(message)) < 4096
    assert summary["free"][GPU] == 80_000.0 and summary["ready_nodes"] == 10_000


def test_a_label_with_few_values_still_splits_classes() -> None:
    nodes = fleet(MAX_LABEL_VALUES * 32)  # exactly MAX_LABEL_VALUES leaves
    classes = summarize("c1", {}, nodes, len(nodes))["node_classes"]
    assert sorted(c.labels["leaf"] for c in classes) == sorted(f"leaf-{i}" for i in range(MAX_LABEL_VALUES))
    assert {c.labels["nvlink-domain"] for c in classes} == {events.VARIED_LABEL}


def test_a_selector_on_a_varied_label_may_match_and_one_on_a_kept_label_must() -> None:
    labels = {"nvlink-domain": events.VARIED_LABEL, "nvidia.com/gpu.product": "H100"}
    on_domain = PodShape(request={GPU: 1.0}, node_selector={"nvlink-domain": "d7"})
    assert node_matches(on_domain, labels)
    assert node_matches(PodShape(request={GPU: 1.0}, node_selector={"nvidia.com/gpu.product": "H100"}), labels)
    assert not node_matches(PodShape(request={GPU: 1.0}, node_selector={"nvidia.com/gpu.product": "A100"}), labels)


def test_a_summary_cache_gives_the_summary_without_it_as_nodes_change() -> None:
    """``ClassCache`` keeps each node's class while its room is the same object: a room that is
    replaced (a pod bound there, a label added), a node gone and the label values passing
    ``MAX_LABEL_VALUES`` all show at once."""
    cache = ClassCache()
    nodes = fleet(MAX_LABEL_VALUES * 32)[:40]  # 2 leaves, 40 domains: only the domain varies
    steps = [
        lambda ns: ns,
        lambda ns: [msgspec.structs.replace(ns[0], free={**ns[0].free, GPU: 3.0}), *ns[1:]],
        lambda ns: [*ns[:5], msgspec.structs.replace(ns[5], labels={**ns[5].labels, "zone": "b"}), *ns[6:]],
        lambda ns: ns[:-3],
        lambda ns: [msgspec.structs.replace(n, labels={**n.labels, "leaf": f"own-{i}"}) for i, n in enumerate(ns)],
    ]
    for step in steps:
        nodes = step(nodes)
        assert summarize("c1", {}, nodes, len(nodes), cache=cache) == summarize("c1", {}, nodes, len(nodes))

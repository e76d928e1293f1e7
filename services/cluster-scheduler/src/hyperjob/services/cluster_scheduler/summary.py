"""The cluster's capacity summary, which the global-scheduler and the splitter place by (pure).

Nodes alike in what they have free, what they can ever give, their labels and their taints form
one class with a count: a summary of 10,000 identical empty nodes is one class, and it grows only
as the cluster's nodes come to differ. A label with more than ``MAX_LABEL_VALUES`` values in the
cluster (a node's own NVLink domain, its leaf switch) does not split classes: its value in a class
is ``events.VARIED_LABEL``. Without that, every node would be its own class and the summary of a
5,000-node fleet would pass the bus's 1 MB message limit.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import TypedDict, TypeVar

import msgspec

from hyperjob import events

GPU = "nvidia.com/gpu"
GPU_MODEL_LABEL = "nvidia.com/gpu.product"
GPU_UNHEALTHY = "hyperjob.io/gpu-unhealthy"
FABRIC_UNHEALTHY = "hyperjob.io/fabric-unhealthy"
DEFAULT_PODS = 110.0
# Pod shapes common enough that "how many would fit now" is worth reporting for each.
SHAPES: dict[str, dict[str, float]] = {"1-gpu": {GPU: 1.0}, "8-gpu": {GPU: 8.0}, "1-cpu": {"cpu": 1.0}}
MAX_LABEL_VALUES = 32


def is_accelerator(resource: str) -> bool:
    return resource.endswith("/gpu") or resource.startswith("volcano.sh/vgpu")


class CapacityFields(TypedDict):
    """``events.ClusterCapacityReported``'s own fields (what ``summarize`` computes)."""

    cluster: str
    labels: dict[str, str]
    allocatable: dict[str, float]
    free: dict[str, float]
    nodes: int
    ready_nodes: int
    largest_node_free: dict[str, float]
    free_accelerators: dict[str, float]
    gangs: dict[str, int]
    gpu_healthy_nodes: int
    fabric_healthy_nodes: int
    node_classes: list[events.NodeClass]
    links: dict[str, float]
    prices: dict[str, float]
    data_sets: list[str]
    data_links: dict[str, float]


class NodeRoom(msgspec.Struct, frozen=True, kw_only=True):
    """One Ready node as the summary sees it."""

    name: str
    allocatable: dict[str, float]
    free: dict[str, float]
    labels: dict[str, str]
    taints: list[dict[str, str]]
    schedulable: bool = True


def summarize(
    cluster: str,
    labels: Mapping[str, str],
    nodes: list[NodeRoom],
    node_count: int,
    links: Mapping[str, float] | None = None,
    prices: Mapping[str, float] | None = None,
    data_sets: Sequence[str] = (),
    data_links: Mapping[str, float] | None = None,
    cache: ClassCache | None = None,
) -> CapacityFields:
    """The fields of ``events.ClusterCapacityReported``: sums over Ready, schedulable nodes (a
    node with a sick GPU has no free GPU) and their classes. Every sum is taken over the classes
    (nodes alike counted once, times their number), so its cost follows how varied the cluster
    is, not how big. ``cache`` keeps what each node's room makes of it from one summary to the
    next (the same result, without sorting every node's maps again)."""
    ready = sorted((n for n in nodes if n.schedulable), key=lambda n: n.name)
    groups = (cache or ClassCache()).classes(ready)
    free: dict[str, float] = {}
    allocatable: dict[str, float] = {}
    accelerators: dict[str, float] = {}
    for c in groups:
        for r, a in c.free.items():
            free[r] = free.get(r, 0.0) + a * c.count
        for r, a in c.allocatable.items():
            allocatable[r] = allocatable.get(r, 0.0) + a * c.count
        model = c.labels.get(GPU_MODEL_LABEL)
        if model and c.free.get(GPU, 0.0) > 0:
            accelerators[model] = accelerators.get(model, 0.0) + c.free[GPU] * c.count
    return {
        "cluster": cluster,
        "labels": dict(labels),
        "allocatable": allocatable,
        "free": free,
        "nodes": node_count,
        "ready_nodes": len(ready),
        "largest_node_free": {r: max(c.free.get(r, 0.0) for c in groups) for r in free},
        "free_accelerators": accelerators,
        "gangs": {shape: sum(_fits(c.free, request) * c.count for c in groups) for shape, request in SHAPES.items()},
        "gpu_healthy_nodes": sum(c.count for c in groups if not _tainted(c.taints, GPU_UNHEALTHY)),
        "fabric_healthy_nodes": sum(c.count for c in groups if not _tainted(c.taints, FABRIC_UNHEALTHY)),
        "node_classes": groups,
        "links": dict(links or {}),
        "prices": dict(prices or {}),
        "data_sets": list(data_sets),
        "data_links": dict(data_links or {}),
    }


def varied_labels(nodes: list[NodeRoom]) -> frozenset[str]:
    """Label keys with more than ``MAX_LABEL_VALUES`` values among ``nodes``."""
    values: dict[str, set[str]] = {}
    for node in nodes:
        for key, value in node.labels.items():
            values.setdefault(key, set()).add(value)
    return frozenset(k for k, v in values.items() if len(v) > MAX_LABEL_VALUES)


def classes(
    nodes: list[NodeRoom], frees: list[dict[str, float]], varied: frozenset[str] = frozenset()
) -> list[events.NodeClass]:
    """Nodes grouped by (free, allocatable, labels, taints), in the order of each class's first
    node; the labels of ``varied`` keys count as ``events.VARIED_LABEL``."""
    found: dict[tuple[object, ...], events.NodeClass] = {}
    for node, free in zip(nodes, frees, strict=True):
        _add(found, node, *_class_key(node, free, varied))
    return list(found.values())


class ClassCache:
    """``classes`` of one cluster's nodes, summary after summary: each node's class key is kept
    while its ``NodeRoom`` is the same object (its owner builds a new one when the node or what is
    bound to it changes), and the varied labels while every node's labels are the same. Keys are
    numbered once, so grouping a node costs one small lookup (a key tuple is hashed anew each time)."""

    def __init__(self) -> None:
        self._labels: list[dict[str, str]] = []
        self._varied: frozenset[str] = frozenset()
        self._numbers: dict[tuple[object, ...], int] = {}
        self._keys: dict[str, tuple[NodeRoom, int, dict[str, float], dict[str, str]]] = {}

    def classes(self, nodes: list[NodeRoom]) -> list[events.NodeClass]:
        """``classes(nodes, [_free(n) for n in nodes], varied_labels(nodes))``."""
        labels = [n.labels for n in nodes]
        if len(labels) != len(self._labels) or not all(map(operator.is_, labels, self._labels)):
            varied = varied_labels(nodes)
            if varied != self._varied:
                self._keys = {}
            self._labels, self._varied = labels, varied
        if len(self._keys) > 2 * len(nodes) or len(self._numbers) > 4 * len(nodes):  # nodes that left
            self._keys, self._numbers = {}, {}
        found: dict[int, events.NodeClass] = {}
        keys, numbers = self._keys, self._numbers
        for node in nodes:
            known = keys.get(node.name)
            if known is None or known[0] is not node:
                key, free, node_labels = _class_key(node, _free(node), self._varied)
                number = numbers.setdefault(key, len(numbers))
                known = keys[node.name] = (node, number, free, node_labels)
            _add(found, node, *known[1:])
        return list(found.values())


_K = TypeVar("_K", int, tuple[object, ...])


def _class_key(
    node: NodeRoom, free: dict[str, float], varied: frozenset[str]
) -> tuple[tuple[object, ...], dict[str, float], dict[str, str]]:
    labels = {k: events.VARIED_LABEL if k in varied else v for k, v in node.labels.items()}
    key = (
        tuple(sorted(free.items())),
        tuple(sorted(node.allocatable.items())),
        tuple(sorted(labels.items())),
        tuple(tuple(sorted(t.items())) for t in node.taints),
    )
    return key, free, labels


def _add(
    found: dict[_K, events.NodeClass],
    node: NodeRoom,
    key: _K,
    free: dict[str, float],
    labels: dict[str, str],
) -> None:
    known = found.get(key)
    if known is None:
        found[key] = events.NodeClass(
            name=node.name,
            free=dict(free),
            allocatable=dict(node.allocatable),
            labels=dict(labels),
            taints=list(node.taints),
        )
    else:
        found[key] = msgspec.structs.replace(known, count=known.count + 1)


def _free(node: NodeRoom) -> dict[str, float]:
    free = dict(node.free)
    if _tainted(node.taints, GPU_UNHEALTHY):
        # A sick GPU node takes no new GPU work: its accelerators are not free to plan with.
        free = {r: 0.0 if is_accelerator(r) else f for r, f in free.items()}
    return free


def _fits(free: Mapping[str, float], request: Mapping[str, float]) -> int:
    """How many pods of ``request`` (plus their pod slot) fit in ``free``."""
    counts = [free.get(r, 0.0) // amount for r, amount in request.items()]
    counts.append(free.get("pods", DEFAULT_PODS) // 1.0)
    return int(max(0.0, min(counts)))


def _tainted(taints: list[dict[str, str]], key: str) -> bool:
    return any(t.get("key") == key for t in taints)

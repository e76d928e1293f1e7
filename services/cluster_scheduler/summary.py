"""The cluster's capacity summary, which the global-scheduler and the splitter place by (pure)."""

from __future__ import annotations

from collections.abc import Mapping

import records
from api.quantity import add

GPU = "nvidia.com/gpu"
GPU_MODEL_LABEL = "nvidia.com/gpu.product"
GPU_UNHEALTHY = "hyperjob.io/gpu-unhealthy"
FABRIC_UNHEALTHY = "hyperjob.io/fabric-unhealthy"
DEFAULT_PODS = 110.0
# Pod shapes common enough that "how many would fit now" is worth reporting for each.
SHAPES: dict[str, dict[str, float]] = {"1-gpu": {GPU: 1.0}, "8-gpu": {GPU: 8.0}, "1-cpu": {"cpu": 1.0}}


def is_accelerator(resource: str) -> bool:
    return resource.endswith("/gpu") or resource.startswith("volcano.sh/vgpu")


def summarize(cluster: str, labels: Mapping[str, str], nodes: Mapping[str, records.NodeDoc],
              used: Mapping[str, Mapping[str, float]], now: float,
              links: Mapping[str, float] | None = None) -> records.ClusterDoc:
    """Allocatable and free over Ready, schedulable nodes; a node with a sick GPU has no free GPU."""
    ready = sorted((n for n in nodes.values() if n.ready and not n.unschedulable), key=lambda n: n.name)
    free_nodes = [records.NodeFree(name=n.name, free=_free(n, used.get(n.name, {})), allocatable=dict(n.allocatable),
                                   labels=dict(n.labels)) for n in ready]
    allocatable = add(*(n.allocatable for n in free_nodes))
    free = add(*(n.free for n in free_nodes))
    largest = {r: max(n.free.get(r, 0.0) for n in free_nodes) for r in free}
    accelerators: dict[str, float] = {}
    for node in free_nodes:
        model = node.labels.get(GPU_MODEL_LABEL)
        if model and node.free.get(GPU, 0.0) > 0:
            accelerators[model] = accelerators.get(model, 0.0) + node.free[GPU]
    return records.ClusterDoc(
        name=cluster, labels=dict(labels), allocatable=allocatable, free=free, nodes=len(nodes), ready_nodes=len(ready),
        largest_node_free=largest, reported_at=now, free_accelerators=accelerators,
        gangs={shape: sum(_fits(n.free, request) for n in free_nodes) for shape, request in SHAPES.items()},
        gpu_healthy_nodes=sum(1 for n in ready if not _tainted(n, GPU_UNHEALTHY)),
        fabric_healthy_nodes=sum(1 for n in ready if not _tainted(n, FABRIC_UNHEALTHY)),
        node_free=free_nodes, links=dict(links or {}))


def _free(node: records.NodeDoc, used: Mapping[str, float]) -> dict[str, float]:
    free = {r: a - used.get(r, 0.0) for r, a in node.allocatable.items()}
    if _tainted(node, GPU_UNHEALTHY):
        # A sick GPU node takes no new GPU work: its accelerators are not free to plan with.
        free = {r: 0.0 if is_accelerator(r) else f for r, f in free.items()}
    return free


def _fits(free: Mapping[str, float], request: Mapping[str, float]) -> int:
    """How many pods of ``request`` (plus their pod slot) fit in ``free``."""
    counts = [free.get(r, 0.0) // amount for r, amount in request.items()]
    counts.append(free.get("pods", DEFAULT_PODS) // 1.0)
    return int(max(0.0, min(counts)))


def _tainted(node: records.NodeDoc, key: str) -> bool:
    return any(t.get("key") == key for t in node.taints)

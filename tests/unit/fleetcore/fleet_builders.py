"""Small builders for fleetcore tests: HyperJobs from dicts, clusters of identical GPU nodes."""

from __future__ import annotations

from typing import Any

from hyperjob import api
from hyperjob.fleetcore import ClusterCapacity, NodeCapacity

GPU = "nvidia.com/gpu"
GI = 2.0**30


def task(
    name: str,
    replicas: int,
    gpus: int = 1,
    cpu: str = "8",
    memory: str = "64Gi",
    node_selector: dict[str, str] | None = None,
    min_available: int | None = None,
) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpus:
        requests[GPU] = str(gpus)
    pod: dict[str, Any] = {"containers": [{"name": name, "image": "x", "resources": {"requests": requests}}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    spec: dict[str, Any] = {"name": name, "replicas": replicas, "template": {"spec": pod}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    return spec


def job_spec(
    *tasks: dict[str, Any], min_available: int = 0, queue: str = "default", plugins: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"queue": queue, "tasks": list(tasks)}
    if min_available:
        spec["minAvailable"] = min_available
    if plugins:
        spec["plugins"] = plugins
    return spec


def upstream(
    name: str, *replicated: dict[str, Any], annotations: dict[str, str] | None = None, generation: int = 1, **spec: Any
) -> api.HyperJob:
    """The upstream form; ``replicated`` are replicatedJobs entries (camelCase dicts)."""
    meta: dict[str, Any] = {"name": name, "generation": generation}
    if annotations:
        meta["annotations"] = annotations
    doc = {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": meta,
        "spec": {"replicatedJobs": list(replicated), **spec},
    }
    hyperjob = api.decode(doc)
    assert isinstance(hyperjob, api.HyperJob)
    return hyperjob


def rjob(
    name: str,
    template: dict[str, Any],
    replicas: int | None = None,
    clusters: list[str] | None = None,
    split: dict[str, Any] | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "templateSpec": template}
    if replicas is not None:
        entry["replicas"] = replicas
    if clusters:
        entry["clusterNames"] = clusters
    if split is not None:
        entry["splitPolicy"] = split
    return entry


def conceptual(name: str, template: dict[str, Any], split: dict[str, Any], **spec: Any) -> api.HyperJob:
    doc = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": template},
            "splitPolicy": split,
            **spec,
        },
    }
    hyperjob = api.decode(doc)
    assert isinstance(hyperjob, api.HyperJob)
    return hyperjob


def cluster(
    name: str,
    nodes: int = 4,
    gpus: int = 8,
    used_gpus: int = 0,
    labels: dict[str, str] | None = None,
    node_labels: dict[str, str] | None = None,
    last_report: float = 0.0,
    ready: bool = True,
) -> ClusterCapacity:
    """``nodes`` nodes of 96 cpu / 1Ti / ``gpus`` GPUs; ``used_gpus`` are taken from the first nodes."""
    built = []
    left = used_gpus
    for i in range(nodes):
        take = min(left, gpus)
        left -= take
        alloc = {"cpu": 96.0, "memory": 1024 * GI, GPU: float(gpus), "pods": 110.0}
        free = {**alloc, GPU: float(gpus - take), "cpu": 96.0 - 8.0 * take, "pods": 110.0 - take}
        built.append(NodeCapacity(name=f"{name}-n{i}", free=free, allocatable=alloc, labels=dict(node_labels or {})))
    total_free = {k: sum(n.free[k] for n in built) for k in ("cpu", "memory", GPU)} if built else {}
    total_alloc = {k: sum(n.allocatable[k] for n in built) for k in ("cpu", "memory", GPU)} if built else {}
    return ClusterCapacity(
        name=name,
        labels=dict(labels or {}),
        free=total_free,
        allocatable=total_alloc,
        nodes=tuple(built),
        last_report=last_report,
        ready=ready,
    )


def fleet(*clusters: ClusterCapacity) -> dict[str, ClusterCapacity]:
    return {c.name: c for c in clusters}


ABC_CLUSTERS = fleet(cluster("a"), cluster("b"), cluster("c"))  # 4 nodes × 8 GPUs each

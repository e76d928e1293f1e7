"""Facts from a cluster's scheduler: podgroup phases, bindings, evictions and capacity."""

from __future__ import annotations

from .base import Message


class PodGroupPhaseChanged(Message, frozen=True, kw_only=True, tag="sched.podgroup.phase.v1"):
    cluster: str
    job: str
    phase: str
    reason: str = ""


class PodBound(Message, frozen=True, kw_only=True, tag="sched.pod.bound.v1"):
    cluster: str
    job: str
    pod: str
    node: str
    job_version: int
    pod_uid: str = ""  # the pod incarnation; a report about an older one is ignored


class PodEvicted(Message, frozen=True, kw_only=True, tag="sched.pod.evicted.v1"):
    """The scheduler took a pod off its node: ``reason`` is preempt, reclaim or nodeDown."""

    cluster: str
    job: str
    pod: str
    node: str
    reason: str
    job_version: int
    pod_uid: str = ""  # the pod incarnation; a report about an older one is ignored


class ClusterCapacityReported(Message, frozen=True, kw_only=True, tag="sched.cluster.capacity.v1"):
    """A cluster's summary for global placement; kept as the latest value per cluster."""

    cluster: str
    labels: dict[str, str] = {}
    allocatable: dict[str, float]
    free: dict[str, float]
    nodes: int
    ready_nodes: int
    largest_node_free: dict[str, float] = {}
    free_accelerators: dict[str, float] = {}  # GPU model -> free GPUs
    gangs: dict[str, int] = {}  # common pod shape (1-gpu, 8-gpu, 1-cpu) -> pods that fit now
    gpu_healthy_nodes: int = 0
    fabric_healthy_nodes: int = 0

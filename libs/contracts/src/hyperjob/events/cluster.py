"""Facts from a cluster's scheduler: podgroup phases, bindings, evictions and capacity.

Bindings and evictions travel one message per job and cycle (a whole gang at once), not per pod.
"""

from __future__ import annotations

import msgspec

from .base import Message


class PodGroupPhaseChanged(Message, frozen=True, kw_only=True, tag="sched.podgroup.phase.v2"):
    """The podgroup of one incarnation of a job (``job_uid``/``job_version``) reached ``phase``."""

    cluster: str
    job: str
    job_uid: str = ""
    job_version: int = 0
    phase: str
    reason: str = ""


class PodRef(msgspec.Struct, frozen=True, kw_only=True):
    """One pod incarnation (``uid``) on ``node``; ``reason`` for evictions and rejections;
    ``devices`` the GPU device indexes its binding holds there (bound pods)."""

    pod: str
    uid: str
    node: str
    reason: str = ""
    devices: tuple[int, ...] = ()


class PodsBound(Message, frozen=True, kw_only=True, tag="sched.pods.bound.v1"):
    """These pods of ``job`` are bound to their nodes and may start."""

    cluster: str
    job: str
    pods: list[PodRef]


class PodsEvicted(Message, frozen=True, kw_only=True, tag="sched.pods.evicted.v1"):
    """The scheduler took these pods off their nodes (``reason``: preempt, reclaim, nodeDown)."""

    cluster: str
    job: str
    pods: list[PodRef]


class PodsRejected(Message, frozen=True, kw_only=True, tag="sched.pods.rejected.v1"):
    """Pods that name their node (``spec.nodeName``) which cannot admit them: they fail with
    Kubernetes' reason (``OutOfcpu``, ``OutOfnvidia.com/gpu``, ``NodeNotFound`` ...)."""

    cluster: str
    job: str
    pods: list[PodRef]


class NodeClass(msgspec.Struct, frozen=True, kw_only=True):
    """``count`` Ready nodes alike in what is free now, allocatable, labels and taints
    (``name``: the first of them). A summary lists classes, not every node."""

    name: str
    count: int = 1
    free: dict[str, float]
    allocatable: dict[str, float]
    labels: dict[str, str] = {}
    taints: list[dict[str, str]] = []


VARIED_LABEL = "*"
"""A node class's value for a label whose values vary too much across the cluster to keep apart
(a node's own NVLink domain, its leaf switch on a big fleet): the class stands for nodes with many
values of it, so a selector on it may match (the cluster-scheduler decides node by node)."""


class ClusterCapacityReported(Message, frozen=True, kw_only=True, tag="sched.cluster.capacity.v2"):
    """A cluster's summary for global placement; kept as the latest value per cluster.

    ``free_accelerators`` maps a GPU model to its free GPUs; ``gangs`` maps a common pod shape
    (``1-gpu``, ``8-gpu``, ``1-cpu``) to how many such pods fit now, node by node."""

    cluster: str
    labels: dict[str, str] = {}
    allocatable: dict[str, float]
    free: dict[str, float]
    nodes: int
    ready_nodes: int
    largest_node_free: dict[str, float] = {}
    free_accelerators: dict[str, float] = {}
    gangs: dict[str, int] = {}
    gpu_healthy_nodes: int = 0
    fabric_healthy_nodes: int = 0
    node_classes: list[NodeClass] = []
    links: dict[str, float] = {}
    prices: dict[str, float] = {}  # declared price per resource-hour (cpu per core, memory per GiB)
    data_sets: list[str] = []  # data sets the cluster holds: a HyperJob reading them prefers it
    # Bandwidth (Gb/s) from the cluster to where a data set it does not hold lives, by data set:
    # of clusters holding as many of a HyperJob's data sets, it prefers the better linked.
    data_links: dict[str, float] = {}

"""The snapshot a cycle reads and the decision it returns: frozen msgspec structs, snake_case.

Field sets follow ADR 0001; fields may be added with defaults, never removed or renamed.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from hyperjob.api.job import NetworkTopology
from hyperjob.api.pod import Affinity, Taint, Toleration
from hyperjob.api.quantity import ResourceList
from hyperjob.api.queue import QueueAffinity

TaskStatus = Literal["Pending", "Bound", "Running", "Releasing", "Succeeded", "Failed"]
PodGroupPhase = Literal["Pending", "Inqueue", "Running", "Unknown", "Completed"]
QueueState = Literal["Open", "Closed", "Closing", "Unknown"]


class NodeInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One node as the cluster reports it. A node without ``pods`` in ``allocatable`` has 110."""

    name: str
    allocatable: ResourceList
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    unschedulable: bool = False
    ready: bool = True


class QueueInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A Volcano queue. An empty ``capability`` means unlimited; ``parent`` "" means root.

    ``affinity`` is the queue's ``spec.affinity`` (node groups), read by the ``nodegroup`` plugin.
    """

    name: str
    weight: float = 1.0
    capability: ResourceList = {}
    deserved: ResourceList = {}
    guarantee: ResourceList = {}
    reclaimable: bool = True
    priority: int = 0
    parent: str = ""
    state: QueueState = "Open"
    created: float = 0.0
    affinity: QueueAffinity | None = None


class TaskInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One pod. ``request`` excludes the implicit ``pods: 1`` slot (the core adds it).

    ``node`` is set for Bound/Running/Releasing pods (and for finished pods that still hold one);
    ``nominated_node`` is the node an earlier preempt/reclaim pipelined this pod onto.
    ``devices`` are the GPU device indexes a placed GPU pod holds on its node (from its
    ``Bind.devices``); empty means "not recorded", and the session then picks them best-fit.
    ``topology_policy`` is the task's NUMA policy (``tasks[].topologyPolicy``) for a Guaranteed pod,
    "" otherwise (Volcano's numa-aware plugin looks at Guaranteed pods only).
    """

    name: str
    job: str
    role: str = ""
    index: int = 0
    request: ResourceList = {}
    status: TaskStatus = "Pending"
    node: str | None = None
    priority: int = 1
    preemptable: bool = True
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    node_name: str = ""
    preemption_policy: str = ""
    namespace: str = "default"
    priority_class: str = ""
    created: float = 0.0
    gated: bool = False
    nominated_node: str = ""
    devices: tuple[int, ...] = ()
    topology_policy: str = ""


class JobInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A job as its podgroup sees it. ``min_resources`` None means "no minimum declared"."""

    name: str
    queue: str
    priority: int = 0
    min_member: int = 1
    min_task_member: dict[str, int] = {}
    min_resources: ResourceList | None = None
    phase: PodGroupPhase = "Pending"
    created: float = 0.0
    network_topology: NetworkTopology | None = None
    tasks: list[TaskInfo] = []
    namespace: str = "default"


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one cycle may read. The core never assumes queues that are not listed here."""

    nodes: list[NodeInfo] = []
    queues: list[QueueInfo] = []
    jobs: list[JobInfo] = []
    now: float = 0.0


class Bind(msgspec.Struct, frozen=True, kw_only=True):
    """``devices``: the GPU device indexes chosen on ``node`` for a GPU pod (whole GPUs or vGPU
    shares), to record with the pod and pass back as ``TaskInfo.devices``; empty for other pods."""

    task: str
    job: str
    node: str
    devices: tuple[int, ...] = ()


class Evict(msgspec.Struct, frozen=True, kw_only=True):
    task: str
    job: str
    node: str
    reason: Literal["preempt", "reclaim"]


class QueueUsage(msgspec.Struct, frozen=True, kw_only=True):
    """Base units; ``pods`` and zero dimensions are left out."""

    allocated: ResourceList = {}
    deserved: ResourceList = {}


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What a cycle decided.

    ``binds``: pods to bind now. ``evictions``: pods to delete (reason preempt|reclaim); the
    driver recreates them per the job's policies. ``pipelined``: pods that will fit once the
    evicted pods are gone; the driver keeps them Pending and passes the node back as
    ``TaskInfo.nominated_node``. ``podgroup_phases``: every job's phase at session close.
    ``unschedulable``: job -> reason, for jobs that could not get what they need this cycle.
    """

    binds: list[Bind] = []
    evictions: list[Evict] = []
    podgroup_phases: dict[str, PodGroupPhase] = {}
    unschedulable: dict[str, str] = {}
    queues: dict[str, QueueUsage] = {}
    pipelined: list[Bind] = []

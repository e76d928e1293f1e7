"""The documents the services keep in the store, and who writes each (one writer per kind).

| kind                 | writer             | readers                                  |
|----------------------|--------------------|------------------------------------------|
| ``queue``            | splitter           | every scheduler, the CLI                 |
| ``priorityclass``    | splitter           | job-controller                           |
| ``hyperjob``         | splitter           | global-scheduler, status-aggregator, CLI |
| ``placement``        | global-scheduler   | splitter (deletes), status-aggregator, CLI |
| ``admission``        | global-scheduler   | status-aggregator                        |
| ``gang``             | global-scheduler   | (fleetcore.HyperJobGang: one reservation attempt) |
| ``gate@<cluster>``   | job-controller     | cluster-scheduler (the job is a gang member) |
| ``reservation@<cluster>`` | cluster-scheduler | (its state: Reserving, Held, Released, Started) |
| ``job@<cluster>``    | job-controller     | cluster-scheduler, CLI                   |
| ``podgroup@<cluster>`` | job-controller   | cluster-scheduler                        |
| ``podenv@<cluster>`` | job-controller     | job-controller (the HyperJob env per pod) |
| ``pgphase@<cluster>``  | cluster-scheduler | CLI                                     |
| ``node@<cluster>``   | cluster-scheduler  | CLI                                      |
| ``cluster``          | cluster-scheduler  | splitter, global-scheduler, CLI          |
| ``hjstatus``         | status-aggregator  | CLI                                      |

Documents are msgspec structs stored as JSON; manifests inside them are kept as the plain data
the user applied (``api.encode``), decoded again with ``api.decode`` by whoever needs the types.
Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import msgspec

import fleetcore

QUEUE = "queue"
PRIORITY_CLASS = "priorityclass"
HYPERJOB = "hyperjob"
PLACEMENT = "placement"
ADMISSION = "admission"
GANG = "gang"
CLUSTER = "cluster"
HYPERJOB_STATUS = "hjstatus"


def job_kind(cluster: str) -> str:
    return f"job@{cluster}"


def podgroup_kind(cluster: str) -> str:
    return f"podgroup@{cluster}"


def pgphase_kind(cluster: str) -> str:
    return f"pgphase@{cluster}"


def gate_kind(cluster: str) -> str:
    return f"gate@{cluster}"


def reservation_kind(cluster: str) -> str:
    return f"reservation@{cluster}"


def podenv_kind(cluster: str) -> str:
    return f"podenv@{cluster}"


def node_kind(cluster: str) -> str:
    return f"node@{cluster}"


class QueueDoc(msgspec.Struct, frozen=True, kw_only=True):
    manifest: dict[str, Any]
    state: str = "Open"
    created: float = 0.0


class PriorityClassDoc(msgspec.Struct, frozen=True, kw_only=True):
    manifest: dict[str, Any]
    value: int


class ChildRef(msgspec.Struct, frozen=True, kw_only=True):
    """One child job of a HyperJob as the split planned it (the cluster is the plan's, if any):
    enough to rebuild fleetcore's ``ChildPlan`` for failover."""

    name: str
    replicated_job: str
    index: int
    replicas: int
    cluster: str = ""
    template_hash: str = ""
    tasks: dict[str, int] = {}
    rank_offset: int = 0
    min_available: int = 0


class HyperJobDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A submitted HyperJob (or a plain Job: ``plain`` true, one child of the same name)."""

    name: str
    manifest: dict[str, Any]
    generation: int = 1
    created: float = 0.0
    plain: bool = False
    children: list[ChildRef] = []
    deleting: bool = False
    waiting_reason: str = ""
    # What the owner is doing with the HyperJob as a whole (fleetcore.Lifecycle): Active,
    # Suspended or Restarting; ``restarts`` counts restart commands, so the status starts over.
    lifecycle: str = "Active"
    restarts: int = 0
    world_size: int = 0


class PlacementDoc(msgspec.Struct, frozen=True, kw_only=True):
    """Where a child job runs (``cluster``), or why it waits (``reason``)."""

    child: str
    hyperjob: str = ""
    replicated_job: str = ""
    cluster: str = ""
    # Waiting | Dispatched | Unplaced (failover found no room) | Removing | Replacing (a changed
    # child waits for its predecessor of the same name to be gone from its cluster)
    state: str = "Waiting"
    reason: str = ""
    job: dict[str, Any] = {}
    env: dict[str, str] = {}
    env_by_pod: dict[str, dict[str, str]] = {}
    rank_offset: int = 0
    world_size: int | None = None
    clusters: list[str] = []
    requested_at: float = 0.0
    finished: bool = False  # the child's Job reached a terminal phase

    @property
    def owner(self) -> str:
        """The HyperJob this child belongs to (a plain Job is its own owner)."""
        return self.hyperjob or self.child


class AdmissionDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A HyperJob (or plain Job) its global queue admitted; its request counts against the queue
    until every child has finished or is gone."""

    owner: str
    queue: str
    request: dict[str, float]
    admitted_at: float = 0.0


class GateDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A child of a cross-cluster gang: its pods are held, not started, until told to start."""

    gang: str


class ReservationDoc(msgspec.Struct, frozen=True, kw_only=True):
    state: str = "Reserving"  # Reserving | Held | Released | Started
    attempt: int = 1


class PodGroupPhaseDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A podgroup's phase, for one incarnation of it (``<job uid>/<job version>``): a phase left
    by an earlier job of the same name, or by the podgroup before a restart, is not this one's."""

    phase: str
    reason: str = ""
    incarnation: str = ""


class NodeDoc(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    allocatable: dict[str, float]
    labels: dict[str, str] = {}
    taints: list[dict[str, str]] = []
    unschedulable: bool = False
    ready: bool = True
    last_heartbeat: float = 0.0


class NodeFree(msgspec.Struct, frozen=True, kw_only=True):
    """One schedulable node in a capacity summary, so placement can check a gang node by node."""

    name: str
    free: dict[str, float]
    allocatable: dict[str, float]
    labels: dict[str, str] = {}


class ClusterDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A cluster as its scheduler last summarized it (Ready nodes only; a sick GPU is not free).

    ``free_accelerators`` maps a GPU model to its free GPUs; ``gangs`` maps a common pod shape
    (``1-gpu``, ``8-gpu``, ``1-cpu``) to how many such pods fit now, node by node; the health
    counts say how many Ready nodes have healthy GPUs and fabric.
    """

    name: str
    labels: dict[str, str] = {}
    allocatable: dict[str, float] = {}
    free: dict[str, float] = {}
    nodes: int = 0
    ready_nodes: int = 0
    largest_node_free: dict[str, float] = {}
    reported_at: float = 0.0
    free_accelerators: dict[str, float] = {}
    gangs: dict[str, int] = {}
    gpu_healthy_nodes: int = 0
    fabric_healthy_nodes: int = 0
    node_free: list[NodeFree] = []
    links: dict[str, float] = {}  # declared bandwidth (Gb/s) to other clusters


class HyperJobStatusDoc(msgspec.Struct, frozen=True, kw_only=True):
    """The aggregated status; ``children`` is the latest news of each child (its ``phase`` at least)."""

    name: str
    phase: str
    status: dict[str, Any]
    updated_at: float = 0.0
    children: dict[str, dict[str, Any]] = {}

    def child_phases(self, names: list[str]) -> dict[str, str]:
        """Each named child's Volcano Job phase; a child nobody heard of yet is Pending."""
        return {name: str(self.children.get(name, {}).get("phase", "Pending")) for name in names}


class PodEnvDoc(msgspec.Struct, frozen=True, kw_only=True):
    """The HyperJob-level environment of a child's pods, as dispatched (pod name -> env)."""

    env_by_pod: dict[str, dict[str, str]] = {}


def cluster_capacity(doc: ClusterDoc) -> fleetcore.ClusterCapacity:
    """A cluster summary as fleetcore's ``ClusterCapacity`` (splitter and global-scheduler place by it)."""
    nodes = tuple(fleetcore.NodeCapacity(name=n.name, free=dict(n.free), allocatable=dict(n.allocatable),
                                         labels=dict(n.labels)) for n in doc.node_free)
    return fleetcore.ClusterCapacity(name=doc.name, labels=dict(doc.labels), free=dict(doc.free),
                                     allocatable=dict(doc.allocatable), nodes=nodes, last_report=doc.reported_at,
                                     ready=doc.ready_nodes > 0, links=dict(doc.links))

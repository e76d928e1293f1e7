"""The values fleetcore exchanges with its drivers: capacity summaries, split plans and child jobs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from hyperjob import api, events
from hyperjob.api.quantity import ResourceList

from .liveness import FLEET_LEASE, LEASE_MARGIN, move_after

HYPERJOB_NAME_LABEL = "volcano.sh/hyperjob-name"
REPLICATED_JOB_LABEL = "volcano.sh/replicatedjob-name"
TEMPLATE_HASH_LABEL = "volcano.sh/vcjob-template-spec-hash"
# Project annotations on a child Job: what the job-controller needs to wire the training env.
CHILD_INDEX_ANNOTATION = "hyperjob.io/child-index"
RANK_OFFSET_ANNOTATION = "hyperjob.io/rank-offset"
WORLD_SIZE_ANNOTATION = "hyperjob.io/world-size"
CLUSTER_ANNOTATION = "hyperjob.io/cluster"
# On a HyperJob: cluster labels a cluster must carry, "k=v,k2=v2" (Karmada-style cluster affinity).
CLUSTER_SELECTOR_ANNOTATION = "hyperjob.io/cluster-selector"

CLUSTER_SILENCE_TIMEOUT = move_after(FLEET_LEASE, LEASE_MARGIN)
"""Seconds without a capacity summary after which a cluster is lost (scenario-format.md): its fleet
lease has surely lapsed, so its job-controller has stopped its children's pods (``liveness``)."""
DEFAULT_PODS_PER_NODE = 110.0


class NodeCapacity(msgspec.Struct, frozen=True, kw_only=True):
    """``count`` alike nodes of a capacity summary (one, or a class of them; ``name`` is the
    first): what each has free now and what each can ever give."""

    name: str
    free: ResourceList
    allocatable: ResourceList
    labels: dict[str, str] = {}
    taints: tuple[api.Taint, ...] = ()
    ready: bool = True
    count: int = 1


class ClusterCapacity(msgspec.Struct, frozen=True, kw_only=True):
    """A cluster's capacity summary as the cluster-scheduler reports it.

    ``free`` and ``allocatable`` are sums over the cluster's Ready nodes. ``nodes`` is optional:
    with it, fit checks place every pod of a gang on a node (no fragmentation surprises); without
    it, fit checks compare sums and match node selectors against the cluster ``labels``.
    ``last_report`` is the driver's time of the latest summary that showed at least one Ready
    node: the cluster is *lost* (its children fail over) once that is more than 30 s ago.
    ``ready`` is False as soon as the cluster is known to be down or has no Ready node: it then
    gets no new work, but its children only move once it is lost.
    """

    name: str
    labels: dict[str, str] = {}
    free: ResourceList = {}
    allocatable: ResourceList = {}
    nodes: tuple[NodeCapacity, ...] = ()
    last_report: float = 0.0
    ready: bool = True
    last_summary: float = 0.0  # the driver's time of the latest summary, Ready nodes or not
    links: dict[str, float] = {}  # declared bandwidth (Gb/s) to other clusters, by name
    prices: dict[str, float] = {}  # declared price per resource-hour (cpu per core, memory per GiB)
    data_sets: tuple[str, ...] = ()  # data sets the cluster holds (a HyperJob's ``dataSets`` prefer it)
    data_links: dict[str, float] = {}  # bandwidth (Gb/s) to data sets it does not hold, by data set


def link(clusters: Mapping[str, ClusterCapacity], a: str, b: str) -> float:
    """The declared bandwidth between two clusters (either side may declare it; 0 when unknown)."""
    first, second = clusters.get(a), clusters.get(b)
    return max(first.links.get(b, 0.0) if first else 0.0, second.links.get(a, 0.0) if second else 0.0)


class ChildPlan(msgspec.Struct, frozen=True, kw_only=True):
    """One child job of a split: where it goes and how many replicas of each task it runs.

    ``tasks`` maps task name → replicas in the template's task order; tasks with no replica in
    this child are absent. ``rank_offset`` is the global rank of the child's first pod.
    """

    name: str
    replicated_job: str
    index: int
    cluster: str
    tasks: dict[str, int]
    replicas: int
    rank_offset: int
    min_available: int


class SplitPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Every child of a HyperJob, in order (replicated jobs in spec order, then index)."""

    hyperjob: str
    children: tuple[ChildPlan, ...]
    world_size: int
    generation: int = 0

    @property
    def placement(self) -> dict[str, int]:
        """cluster → replicas placed there (all tasks summed), sorted by cluster name."""
        result: dict[str, int] = {}
        for child in sorted(self.children, key=lambda c: c.cluster):
            result[child.cluster] = result.get(child.cluster, 0) + child.replicas
        return result

    def child(self, name: str) -> ChildPlan | None:
        return next((c for c in self.children if c.name == name), None)


def child_ref(child: ChildPlan, template_hash: str) -> events.ChildRef:
    """A child of a plan as the splitter records it and a child's ``World`` carries it
    (``plan_in_force`` reads it back), with the hash of the template it was made from."""
    return events.ChildRef(
        name=child.name,
        replicated_job=child.replicated_job,
        index=child.index,
        cluster=child.cluster,
        replicas=child.replicas,
        tasks=dict(child.tasks),
        rank_offset=child.rank_offset,
        min_available=child.min_available,
        template_hash=template_hash,
    )


def plan_in_force(
    hyperjob: str, children: Iterable[events.ChildRef], world_size: int, generation: int = 0
) -> SplitPlan:
    """The plan a HyperJob's children stand for, as the splitter records them
    (``HyperJobDoc.children``, with its ``generation``) and a child's ``World.plan`` carries them
    to the job-controller: the same plan on both sides, so both compute the same training world."""
    plans = tuple(
        ChildPlan(
            name=ref.name,
            replicated_job=ref.replicated_job,
            index=ref.index,
            cluster=ref.cluster,
            tasks=dict(ref.tasks),
            replicas=ref.replicas,
            rank_offset=ref.rank_offset,
            min_available=ref.min_available,
        )
        for ref in children
    )
    return SplitPlan(hyperjob=hyperjob, children=plans, world_size=world_size, generation=generation)


class Waiting(msgspec.Struct, frozen=True, kw_only=True):
    """No plan now; ``reason`` says which cluster lacks what (shown as the HyperJob's waitingReason)."""

    reason: str
    replicated_job: str = ""


class ChildJob(msgspec.Struct, frozen=True, kw_only=True):
    """A child Volcano Job ready to dispatch to ``cluster`` (``job`` is the full manifest)."""

    name: str
    hyperjob: str
    replicated_job: str
    index: int
    cluster: str
    replicas: int
    job: api.Job
    template_hash: str
    rank_offset: int
    world_size: int = 0


def cluster_lost(cluster: ClusterCapacity, now: float, timeout: float = CLUSTER_SILENCE_TIMEOUT) -> bool:
    """True when the cluster has not reported (with a Ready node) for more than ``timeout`` seconds."""
    return now - cluster.last_report > timeout


def control_plane_hung(
    cluster: ClusterCapacity, nodes_heard: float | None, now: float, timeout: float = CLUSTER_SILENCE_TIMEOUT
) -> bool:
    """True when the cluster is silent (``cluster_lost``, and no summary at all for ``timeout``) but
    its nodes still report (an agent's beat with a live node arrived at ``nodes_heard``, within
    ``timeout``): its control plane hung,
    its pods run on. Its children must not move: nothing on that cluster could stop their pods, so
    a copy elsewhere would run beside them."""
    return (
        cluster_lost(cluster, now, timeout)
        and now - cluster.last_summary > timeout  # a control plane that reports (no Ready node) is not hung
        and nodes_heard is not None
        and now - nodes_heard <= timeout
    )


def live_clusters(
    clusters: Mapping[str, ClusterCapacity], now: float | None, timeout: float = CLUSTER_SILENCE_TIMEOUT
) -> dict[str, ClusterCapacity]:
    """The clusters that may receive work, sorted by name; with ``now`` None only ``ready`` counts."""
    result: dict[str, ClusterCapacity] = {}
    for name in sorted(clusters):
        cap = clusters[name]
        if cap.ready and (now is None or not cluster_lost(cap, now, timeout)):
            result[name] = cap
    return result

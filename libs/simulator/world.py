"""The simulated world: clusters, nodes, queues, priority classes, jobs, pods and the timeline.

This is the driver's own bookkeeping (what the live system keeps in Redis), mutable because one
engine owns it for one run. Every decision about it is taken by a core; the world only records
the outcome and the facts of the timeline. Maps are insertion-ordered and iterated in sorted or
creation order only, so nothing depends on hashing.
"""

from __future__ import annotations

from typing import Any

import msgspec

import api

from . import output
from .scenario import Scenario

ROOT_QUEUE = "root"


class Node(msgspec.Struct, kw_only=True):
    name: str
    cluster: str
    allocatable: api.ResourceList
    labels: dict[str, str]
    taints: list[api.Taint]
    ready: bool = True
    info: Any = None  # the schedcore NodeInfo last built for it (see ClusterDriver.snapshot)


class Cluster(msgspec.Struct, kw_only=True):
    name: str
    labels: dict[str, str]
    nodes: dict[str, Node]
    up: bool = True
    silent_since: float | None = None  # when it stopped reporting (clusterDown)


class Queue(msgspec.Struct, kw_only=True):
    name: str
    manifest: api.Queue
    state: str
    created: float
    declared: bool = True  # False for the implicit default and root queues


class Pod(msgspec.Struct, kw_only=True):
    """One pod, in its latest incarnation; ``restarts`` counts the earlier ones."""

    name: str
    job: str
    task: str
    index: int
    cluster: str
    record: Any  # the job core's PodRecord: request, restart policy, sim duration/exit code
    node: str | None = None
    phase: str = "Pending"
    started_at: float | None = None
    finished_at: float | None = None
    restarts: int = 0
    container_restarts: int = 0  # in-place restarts of this incarnation (what TaskFailed counts)
    reserved: bool = False  # holds ``node`` for a cross-cluster gang's reservation, not started
    nominated: str | None = None  # node an earlier preempt/reclaim pipelined this pod onto
    incarnation: int = 0  # bumps on every recreation and in-place restart; stale completions are ignored
    created: float = 0.0
    info: Any = None  # (key, TaskInfo) last built for it; rebuilt when the key changes
    held_on: tuple[str, str] | None = None  # (cluster, node) whose ``node_used`` counts it (World.account)


class Job(msgspec.Struct, kw_only=True):
    """One Volcano Job: a plain one, or a child of a HyperJob."""

    name: str
    manifest: api.Job
    created: float
    hyperjob: str | None = None
    cluster: str | None = None
    record: Any = None  # jobcore.JobRecord once dispatched to a cluster
    podgroup: Any = None  # jobcore PodGroupInfo, None once deleted
    pg_phase: str = "Pending"
    placement: Any = None  # fleet-level bookkeeping of this job (a ChildJob for children)
    reserving: bool = False  # its binds are held for a cross-cluster gang (fleetcore Reserve)


class HyperJob(msgspec.Struct, kw_only=True):
    name: str
    manifest: api.HyperJob
    created: float
    phase: str = ""  # "" until the first status pass, which announces Pending with the reason
    children: list[str] = []
    placement: dict[str, int] = {}


class World:
    """Everything the run knows at the current virtual time."""

    def __init__(self, scenario: Scenario) -> None:
        self.name = scenario.name
        self.now = 0.0
        self.clusters: dict[str, Cluster] = {}
        for spec in scenario.clusters:
            nodes = {n.name: Node(name=n.name, cluster=spec.name, allocatable=dict(n.allocatable),
                                  labels=dict(n.labels), taints=list(n.taints)) for n in spec.nodes}
            self.clusters[spec.name] = Cluster(name=spec.name, labels=dict(spec.labels), nodes=nodes)
        self.queues: dict[str, Queue] = {}
        self.priority_classes: dict[str, api.PriorityClass] = {p.metadata.name: p for p in scenario.priority_classes}
        self.jobs: dict[str, Job] = {}
        self.hyperjobs: dict[str, HyperJob] = {}
        self.pods: dict[str, Pod] = {}
        self._job_pods: dict[str, dict[str, Pod]] = {}  # index of ``pods`` by job, kept by add/remove_pod
        self._sorted_pods: dict[str, list[Pod]] = {}  # pods_of's answer, dropped when the job's pods change
        self.node_used: dict[tuple[str, str], dict[str, float]] = {}  # requests of the pods holding a node
        self.carried_restarts: dict[str, dict[str, int]] = {}  # job -> pod -> incarnations before it moved
        self.timeline: list[dict[str, Any]] = []
        self.queue_usage: dict[tuple[str, str], tuple[api.ResourceList, api.ResourceList]] = {}
        self.add_queue(_implicit_queue(api.DEFAULT_QUEUE), declared=False)
        for queue in scenario.queues:
            self.add_queue(queue)

    # -- queues -------------------------------------------------------------------------------

    def add_queue(self, manifest: api.Queue, declared: bool = True) -> None:
        """Create or replace a queue; a parent that does not exist yet is the implicit root."""
        name = manifest.metadata.name
        state = (manifest.status.state if manifest.status else None) or manifest.spec.state or "Open"
        created = self.queues[name].created if name in self.queues else self.now
        self.queues[name] = Queue(name=name, manifest=manifest, state=state, created=created, declared=declared)
        # With a hierarchy, root exists implicitly, and so does a parent not declared (yet).
        for parent in (manifest.spec.parent, ROOT_QUEUE) if manifest.spec.parent else ():
            if parent not in self.queues:
                self.queues[parent] = Queue(name=parent, manifest=_implicit_queue(parent), state="Open",
                                            created=self.now, declared=False)

    def queue_states(self) -> dict[str, str]:
        return {name: q.state for name, q in self.queues.items()}

    def is_leaf(self, queue: str) -> bool:
        """A queue is a leaf unless another queue names it as parent (root always has children)."""
        if queue == ROOT_QUEUE and any(q.manifest.spec.parent for q in self.queues.values()):
            return False
        return not any(q.manifest.spec.parent == queue for q in self.queues.values())

    def hierarchical(self) -> bool:
        return any(q.manifest.spec.parent for q in self.queues.values())

    # -- priorities ----------------------------------------------------------------------------

    def priority_value(self, class_name: str) -> int:
        """A PriorityClass's value; no class means the global default class, else 0."""
        if class_name and class_name in self.priority_classes:
            return self.priority_classes[class_name].value
        for pc in sorted(self.priority_classes.values(), key=lambda p: p.metadata.name):
            if pc.global_default:
                return pc.value
        return 0

    # -- timeline ------------------------------------------------------------------------------

    def emit(self, type_: str, obj: str, *, cluster: str | None = None, node: str | None = None,
             reason: str = "", phase: str = "") -> None:
        self.timeline.append(output.event(self.now, type_, obj, cluster=cluster, node=node, reason=reason, phase=phase))

    # -- pods --------------------------------------------------------------------------------

    def pods_of(self, job: str) -> list[Pod]:
        """A job's pods in the job's task order, then by index (Volcano's creation order)."""
        cached = self._sorted_pods.get(job)
        if cached is None:
            owner = self.jobs.get(job)
            order = {t.name: i for i, t in enumerate(owner.record.job.spec.tasks)} if owner and owner.record else {}
            cached = sorted(self._job_pods.get(job, {}).values(),
                            key=lambda p: (order.get(p.task, len(order)), p.task, p.index))
            self._sorted_pods[job] = cached
        return list(cached)

    def pod_count(self, job: str) -> int:
        return len(self._job_pods.get(job, ()))

    def add_pod(self, pod: Pod) -> None:
        self.remove_pod(pod.name)
        self.pods[pod.name] = pod
        self._job_pods.setdefault(pod.job, {})[pod.name] = pod
        self._sorted_pods.pop(pod.job, None)

    def remove_pod(self, name: str) -> Pod | None:
        pod = self.pods.pop(name, None)
        if pod is not None:
            self._job_pods.get(pod.job, {}).pop(name, None)
            self._sorted_pods.pop(pod.job, None)
            self._release(pod)
        return pod

    def account(self, pod: Pod) -> None:
        """Keep ``node_used`` right after anything that may change whether ``pod`` holds its node:
        a pod holds it while Running, and while reserved for a cross-cluster gang."""
        holds = (pod.phase == "Running" or pod.reserved) and pod.node is not None
        if holds and pod.held_on is None:
            pod.held_on = (pod.cluster, pod.node or "")
            slot = self.node_used.setdefault(pod.held_on, {})
            for name, amount in pod.record.scheduling.request.items():
                slot[name] = slot.get(name, 0.0) + amount
        elif not holds:
            self._release(pod)

    def _release(self, pod: Pod) -> None:
        if pod.held_on is not None:
            slot = self.node_used[pod.held_on]
            for name, amount in pod.record.scheduling.request.items():
                slot[name] = slot.get(name, 0.0) - amount
            pod.held_on = None


def _implicit_queue(name: str) -> api.Queue:
    return api.Queue(metadata=api.ObjectMeta(name=name), spec=api.QueueSpec(weight=1))

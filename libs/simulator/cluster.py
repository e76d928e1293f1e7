"""The cluster-scheduler's part, driven through schedcore: one Volcano session per cluster and round.

Session open is ``snapshot()``: the cluster's nodes, every queue (queues exist in every cluster),
and every job whose podgroup lives here with its pods as tasks. ``Scheduler(conf).cycle`` decides;
session close is ``_apply``: binds start pods, evictions delete them (the job's policies decide
what follows), podgroup phase changes are announced and an admitted podgroup lets the job
controller create its pods. Queue usage of the last session is kept for the output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

import api
import schedcore
import snapshots
from api.quantity import parse_resource_list

from . import gang, output
from .world import Job, Pod

if TYPE_CHECKING:
    from .engine import Engine

ADMITTED = ("Inqueue", "Running", "Unknown", "Completed")
FINISHED = frozenset({"Completed", "Failed", "Terminated", "Aborted"})


class BarePodGroup:
    """A PodGroup created on its own (no job): it is admitted and scheduled like any other, with no pods."""

    def __init__(self, manifest: api.PodGroup, cluster: str, created: float) -> None:
        self.manifest = manifest
        self.cluster = cluster
        self.created = created
        self.phase = "Pending"


class ClusterDriver:
    def __init__(self, engine: Engine, conf: Any) -> None:
        self.engine = engine
        self.scheduler = schedcore.Scheduler(conf)
        self.bare: dict[str, BarePodGroup] = {}
        self.usage: dict[str, dict[str, Any]] = {}  # cluster -> queue -> QueueUsage
        self.previous: dict[str, schedcore.Snapshot] = {}  # cluster -> last session's input (now=0)

    @property
    def world(self) -> Any:
        return self.engine.world

    # -- one session --------------------------------------------------------------------------

    def cycle(self, cluster: str) -> None:
        snapshot = self.snapshot(cluster)
        # The core is a pure function of the snapshot and ignores ``now``: an input equal to the
        # previous session's means that session's decision changed nothing, and so would this one.
        key = msgspec.structs.replace(snapshot, now=0.0)
        if self.previous.get(cluster) == key:
            return
        self.previous[cluster] = key
        self._apply(cluster, self.scheduler.cycle(snapshot))

    def snapshot(self, cluster: str) -> schedcore.Snapshot:
        w = self.world
        nodes = [self._node(n) for n in w.clusters[cluster].nodes.values()]
        queues = [self._queue(q) for q in sorted(w.queues.values(), key=lambda q: (q.created, q.name))]
        jobs = [self._job(j) for j in self._jobs_here(cluster)]
        jobs += [self._bare(name, pg) for name, pg in sorted(self.bare.items()) if pg.cluster == cluster]
        return schedcore.Snapshot(nodes=nodes, queues=queues, jobs=jobs, now=w.now)

    def _jobs_here(self, cluster: str) -> list[Job]:
        jobs = [j for j in self.world.jobs.values()
                if j.cluster == cluster and j.podgroup is not None and not self._settled(j)]
        return sorted(jobs, key=lambda j: (j.created, j.name))

    def _settled(self, job: Job) -> bool:
        """A finished job whose podgroup is Completed and whose pods hold nothing: no session can
        change it, so leaving it out keeps sessions small (long traces finish thousands of jobs)."""
        return job.pg_phase == "Completed" and job.record is not None and job.record.phase in FINISHED and \
            all(p.phase in ("Succeeded", "Failed") for p in self.world.pods_of(job.name))

    @staticmethod
    def _node(node: Any) -> schedcore.NodeInfo:
        # Only readiness changes during a run; the frozen NodeInfo is reused until it does.
        if node.info is None or node.info.ready != node.ready:
            node.info = schedcore.NodeInfo(name=node.name, allocatable=dict(node.allocatable), labels=dict(node.labels),
                                           taints=list(node.taints), ready=node.ready)
        return node.info

    @staticmethod
    def _queue(q: Any) -> schedcore.QueueInfo:
        return snapshots.queue_info(q.manifest, q.state, q.created)

    def _job(self, job: Job) -> schedcore.JobInfo:
        tasks = [self._task(p) for p in self.world.pods_of(job.name)]
        return snapshots.job_info(job.podgroup, phase=job.pg_phase, created=job.created, tasks=tasks)

    @staticmethod
    def _task(pod: Pod) -> schedcore.TaskInfo:
        # What can change of a pod between sessions; the frozen TaskInfo is reused otherwise.
        key = (pod.phase, pod.node, pod.nominated, pod.reserved)
        if pod.info is None or pod.info[0] != key:
            pod.info = (key, ClusterDriver._build_task(pod))
        return pod.info[1]  # type: ignore[no-any-return]

    @staticmethod
    def _build_task(pod: Pod) -> schedcore.TaskInfo:
        # A pod held for a cross-cluster gang has its node but has not started: Bound.
        status = "Bound" if pod.reserved else snapshots.TASK_STATUS[pod.phase]
        return snapshots.task_info(pod.record, status=status, node=pod.node, created=pod.created,
                                   nominated=pod.nominated or "")

    def _bare(self, name: str, pg: BarePodGroup) -> schedcore.JobInfo:
        spec = pg.manifest.spec
        return schedcore.JobInfo(
            name=name, queue=spec.queue, priority=self.world.priority_value(spec.priority_class_name),
            min_member=spec.min_member, min_task_member=dict(spec.min_task_member),
            min_resources=parse_resource_list(spec.min_resources) if spec.min_resources is not None else None,
            phase=pg.phase, created=pg.created, network_topology=spec.network_topology)

    # -- session close ------------------------------------------------------------------------

    def _apply(self, cluster: str, decision: schedcore.Decision) -> None:
        w, e = self.world, self.engine
        for bind in decision.binds:
            pod = w.pods.get(bind.task)
            if pod is None or pod.phase != "Pending" or pod.reserved or pod.cluster != cluster:
                continue
            pod.nominated = None
            e.changed = True
            if w.jobs[pod.job].reserving:
                gang.hold(e.fleet, w.jobs[pod.job], pod, bind.node)
            else:
                e.kubelet.start(pod, bind.node)
                e.jobs.pod_bound(pod)
        for evict in decision.evictions:
            pod = w.pods.get(evict.task)
            if pod is not None and pod.reserved:
                gang.lost(e.fleet, w.jobs[pod.job], pod)
                e.changed = True
            elif pod is not None and pod.phase == "Running" and pod.cluster == cluster:
                e.kubelet.evict(pod, evict.reason)
                e.changed = True
        for pipelined in decision.pipelined:
            pod = w.pods.get(pipelined.task)
            if pod is not None and pod.phase == "Pending":
                pod.nominated = pipelined.node
        for name, phase in sorted(decision.podgroup_phases.items()):
            self._podgroup_phase(cluster, name, phase)
        self.usage[cluster] = dict(decision.queues)

    def _podgroup_phase(self, cluster: str, name: str, phase: str) -> None:
        w, e = self.world, self.engine
        if name in self.bare:
            if self.bare[name].phase != phase:
                self.bare[name].phase = phase
                w.emit("PodGroupPhaseChanged", name, cluster=cluster, phase=phase)
                e.changed = True
            return
        job = w.jobs.get(name)
        if job is None or job.podgroup is None or job.cluster != cluster or job.pg_phase == phase:
            return
        job.pg_phase = phase
        e.changed = True
        w.emit("PodGroupPhaseChanged", name, cluster=cluster, phase=phase)
        if phase in ADMITTED and not job.record.podgroup_admitted:
            e.jobs.podgroup_admitted(job)
        if phase == "Unknown":
            e.jobs.podgroup_unknown(job)

    # -- bare podgroups -----------------------------------------------------------------------

    def add_bare_podgroup(self, manifest: api.PodGroup) -> None:
        name = manifest.metadata.name
        try:
            parse_resource_list(manifest.spec.min_resources)
        except api.QuantityError as exc:
            raise api.ManifestError("$.spec.minResources", str(exc)) from None
        if name in self.bare or name in self.world.jobs:
            raise api.ManifestError("$.metadata.name", f"podgroup {name!r} already exists")
        cluster = next(iter(sorted(c for c, s in self.world.clusters.items() if s.up)), None)
        if cluster is None:
            raise api.ManifestError("$", "no cluster is reachable")
        self.bare[name] = BarePodGroup(manifest, cluster, self.world.now)

    def queue_in_use(self, queue: str) -> bool:
        """Whether a job or a podgroup still names the queue (Volcano refuses to delete it then)."""
        jobs = (j.record.job.spec.queue for j in self.world.jobs.values() if j.record is not None)
        return queue in jobs or any(pg.manifest.spec.queue == queue for pg in self.bare.values())

    def delete_bare_podgroup(self, name: str) -> None:
        self.bare.pop(name, None)

    # -- output -------------------------------------------------------------------------------

    def podgroups_output(self) -> list[dict[str, Any]]:
        items = []
        for job in self.world.jobs.values():
            pg = job.podgroup
            if pg is None or job.cluster is None:
                continue
            items.append({"name": job.name, "cluster": job.cluster, "queue": pg.queue, "phase": job.pg_phase,
                          "minMember": pg.min_member,
                          "minResources": output.resources(pg.min_resources, ("cpu", "memory"))})
        for name, bare in self.bare.items():
            spec = bare.manifest.spec
            items.append({"name": name, "cluster": bare.cluster, "queue": spec.queue, "phase": bare.phase,
                          "minMember": spec.min_member,
                          "minResources": output.resources(parse_resource_list(spec.min_resources or {}),
                                                           ("cpu", "memory"))})
        return items

    def queues_output(self) -> list[dict[str, Any]]:
        items = []
        for cluster in self.world.clusters:
            usage = self.usage.get(cluster, {})
            for name, queue in self.world.queues.items():
                u = usage.get(name)
                items.append({"name": name, "cluster": cluster, "state": queue.state,
                              "allocated": output.resources(u.allocated if u else {}),
                              "deserved": output.resources(u.deserved if u else {})})
        return items

"""The splitter, global-scheduler and status-aggregator's part, driven through fleetcore.

Each round, before the clusters schedule: plain jobs waiting for a cluster are placed
(``fleetcore.place_job``), lost clusters' children are re-placed (``fleetcore.failover``),
HyperJobs are admitted by their global queues (``fleetcore.admit``) and split
(``fleetcore.plan_split``) against capacity summaries built from the world; their children are
admitted by jobcore, dispatched, and reserve before they bind (``gang``). After the clusters
schedule, every HyperJob's status is folded by ``fleetcore.aggregate_status``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

import api
import fleetcore
from api.quantity import add
from fleetcore.model import ClusterCapacity, NodeCapacity
from jobcore.model import RankOverride

from . import gang
from .world import HyperJob, Job

if TYPE_CHECKING:
    from .engine import Engine

TERMINAL = frozenset(fleetcore.TERMINAL_CHILD_PHASES)


class FleetDriver:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.unplaced: list[str] = []  # plain jobs waiting for a cluster, in submission order
        self.statuses: dict[str, Any] = {}  # hyperjob -> latest HyperJobStatus
        self.plans: dict[str, Any] = {}  # hyperjob -> SplitPlan in force
        self.waiting: dict[str, str] = {}  # hyperjob -> why it is not placed
        self.lifecycle: dict[str, str] = {}  # hyperjob -> Active | Suspended | Restarting | Terminating
        self.admitted: set[str] = set()  # HyperJobs their global queue admitted
        self.gangs: dict[str, Any] = {}  # hyperjob -> HyperJobGang of the current attempt
        self.retry_at: dict[str, float] = {}  # hyperjob -> earliest re-plan after a released gang

    @property
    def world(self) -> Any:
        return self.engine.world

    # -- capacity summaries ---------------------------------------------------------------------

    def capacities(self) -> dict[str, ClusterCapacity]:
        """What each cluster-scheduler would report: free = allocatable − requests of pods holding a node."""
        w = self.world
        used = w.node_used
        result = {}
        for name, cluster in w.clusters.items():
            nodes = tuple(NodeCapacity(name=n.name, allocatable=dict(n.allocatable), labels=dict(n.labels),
                                       taints=tuple(n.taints), ready=n.ready,
                                       free=_minus(n.allocatable, used.get((name, n.name), {})))
                          for n in cluster.nodes.values())
            ready = [n for n in nodes if n.ready]
            result[name] = ClusterCapacity(
                name=name, labels=dict(cluster.labels), nodes=nodes,
                free=add(*(n.free for n in ready)), allocatable=add(*(n.allocatable for n in ready)),
                # A cluster that stopped reporting keeps its last summary; fleetcore decides when
                # the silence means lost. One with no Ready node reports ready=False.
                last_report=w.now if cluster.up else (cluster.silent_since or 0.0),
                ready=bool(ready))
        return result

    # -- plain jobs -----------------------------------------------------------------------------

    def submit_job(self, manifest: api.Job) -> None:
        record = self.engine.jobs.admit(manifest)
        job = Job(name=manifest.metadata.name, manifest=manifest, created=self.world.now, record=record)
        self.world.jobs[job.name] = job
        self.unplaced.append(job.name)

    def delete_job(self, name: str) -> None:
        job = self.world.jobs.pop(name)
        self.engine.jobs.withdraw(job)
        if name in self.unplaced:
            self.unplaced.remove(name)

    def _place_jobs(self, working: dict[str, ClusterCapacity]) -> None:
        for name in list(self.unplaced):
            job = self.world.jobs[name]
            cluster = fleetcore.place_job(job.record.job.spec, working, self.world.now)
            live = list(fleetcore.live_clusters(working, self.world.now))
            if not isinstance(cluster, str) and len(live) == 1:
                # GAP (fleetcore.place_job waits when no cluster could ever host a pod): the
                # contract says a plain job lands on the only cluster, where Volcano keeps its
                # pods Pending (and its PodPending policies apply), so do that.
                cluster = live[0]
            if isinstance(cluster, str):
                self.unplaced.remove(name)
                self.engine.jobs.dispatch(job, cluster)
                _take(working, cluster, job.record.job.spec)

    def _fail_over_jobs(self, working: dict[str, ClusterCapacity]) -> None:
        """GAP (fleetcore.failover covers HyperJob children only): a plain job on a lost cluster is
        placed again, keeping its name, by ``place_job`` over the other live clusters when its
        whole gang fits one now (as a child's would); otherwise it stays where it is and runs
        again when its cluster comes back."""
        w, now = self.world, self.world.now
        lost = {n for n, cap in working.items() if fleetcore.cluster_lost(cap, now)}
        if not lost:
            return
        others = {n: cap for n, cap in working.items() if n not in lost}
        for job in sorted(w.jobs.values(), key=lambda j: (j.created, j.name)):
            if job.hyperjob is not None or job.cluster not in lost or self.engine.jobs.phase(job) in TERMINAL:
                continue
            target = fleetcore.place_job(job.record.job.spec, others, now, wait_for_fit=True)
            record = self.engine.jobs.try_admit(job.manifest) if isinstance(target, str) else None
            if isinstance(target, str) and record is not None:
                self.engine.jobs.withdraw(job, moving=True)
                job.record = record
                self.engine.jobs.dispatch(job, target)

    # -- HyperJobs ------------------------------------------------------------------------------

    def submit_hyperjob(self, manifest: api.HyperJob) -> None:
        name = manifest.metadata.name
        self.world.hyperjobs[name] = HyperJob(name=name, manifest=manifest, created=self.world.now)
        self.lifecycle[name] = "Active"
        self.engine.changed = True

    def step(self) -> None:
        """The fleet's half of a round: placement of plain jobs, failover, admission, splits."""
        if not self._has_work():
            return
        working = self.capacities()
        self._fail_over_jobs(working)
        self._place_jobs(working)
        gang.failover(self, working)
        self._admit(working)
        for hj in self._by_creation():
            if hj.name in self.admitted and hj.name not in self.plans and self.lifecycle[hj.name] == "Active" \
                    and self.retry_at.get(hj.name, 0.0) <= self.world.now:
                self._plan(hj, working)

    def _has_work(self) -> bool:
        """Whether this round could place, admit, split or fail over anything (summaries cost)."""
        w = self.world
        if self.unplaced or any(not c.up or not any(n.ready for n in c.nodes.values()) for c in w.clusters.values()):
            return True
        if any(hj.name not in self.plans and self.lifecycle[hj.name] == "Active" for hj in w.hyperjobs.values()):
            return True
        return any(not c.cluster for plan in self.plans.values() for c in plan.children)

    def _by_creation(self) -> list[HyperJob]:
        return sorted(self.world.hyperjobs.values(), key=lambda h: (h.created, h.name))

    def _admit(self, working: dict[str, ClusterCapacity]) -> None:
        w = self.world
        pending = [fleetcore.Candidate(name=hj.name, queue=_queue_of(hj), priority=_priority(w, hj),
                                       request=fleetcore.hyperjob_request(hj.manifest), created=hj.created)
                   for hj in self._by_creation()
                   if hj.name not in self.admitted and self.lifecycle[hj.name] == "Active"]
        if not pending:
            return
        queues = {name: msgspec.structs.replace(fleetcore.fleet_queue(q.manifest, q.created), state=q.state)
                  for name, q in w.queues.items()}
        capacity = fleetcore.fleet_capacity(fleetcore.live_clusters(working, w.now).values())
        admission = fleetcore.admit(queues, self._allocated(), pending, capacity)
        for name in admission.admitted:
            self.admitted.add(name)
            self.waiting.pop(name, None)
            self.engine.changed = True
        self.waiting.update(admission.waiting)

    def _allocated(self) -> dict[str, dict[str, float]]:
        """Per global queue: what admitted, unfinished HyperJobs hold, plus plain jobs' bound pods."""
        w = self.world
        usage: dict[str, dict[str, float]] = {}
        for hj in self._by_creation():
            if hj.name in self.admitted and hj.phase not in ("Completed", "Failed"):
                queue = _queue_of(hj)
                usage[queue] = add(usage.get(queue, {}), fleetcore.hyperjob_request(hj.manifest))
        for pod in w.pods.values():
            job = w.jobs.get(pod.job)
            if job is not None and job.hyperjob is None and pod.phase == "Running":
                queue = job.record.job.spec.queue
                usage[queue] = add(usage.get(queue, {}), pod.record.scheduling.request)
        return usage

    def _plan(self, hj: HyperJob, working: dict[str, ClusterCapacity]) -> None:
        plan = fleetcore.plan_split(hj.manifest, working, now=self.world.now)
        if isinstance(plan, fleetcore.Waiting):
            self.waiting[hj.name] = plan.reason
            return
        self.plans[hj.name] = plan
        hj.children = [c.name for c in plan.children]
        for child in fleetcore.child_jobs(hj.manifest, plan):
            refused = self._create_child(hj, child)
            if refused:
                # The cluster's admission refuses the child (e.g. its queue closed since the
                # HyperJob was admitted): no child at all, and the HyperJob waits.
                self.drop_children(hj)
                self.waiting[hj.name] = refused
                return
            _take(working, child.cluster, child.job.spec)
        self.waiting.pop(hj.name, None)
        gang.start(self, hj, plan)
        self.engine.changed = True

    def _create_child(self, hj: HyperJob, child: Any) -> str:
        """Admit and dispatch one child; the rejection message when the cluster refuses it."""
        jobs = self.engine.jobs
        if child.name in self.world.jobs:
            return f"child {child.name}: a job of that name already exists"
        manifest = child.job
        try:
            record = jobs.admit(manifest, rank=RankOverride(rank_offset=child.rank_offset,
                                                            world_size=child.world_size))
        except api.ManifestError as exc:
            return f"child {child.name}: {exc}"
        job = Job(name=child.name, manifest=manifest, created=self.world.now, hyperjob=hj.name, record=record,
                  placement=child)
        self.world.jobs[child.name] = job
        jobs.dispatch(job, child.cluster)
        return ""

    def drop_children(self, hj: HyperJob) -> None:
        """Delete every child everywhere and forget the plan (delete, or a re-plan after a retry)."""
        for name in hj.children:
            job = self.world.jobs.get(name)
            if job is not None and job.hyperjob == hj.name:
                del self.world.jobs[name]
                self.engine.jobs.withdraw(job)
        self.plans.pop(hj.name, None)
        self.gangs.pop(hj.name, None)

    def delete_hyperjob(self, name: str) -> None:
        self.drop_children(self.world.hyperjobs[name])
        del self.world.hyperjobs[name]
        for table in (self.statuses, self.waiting, self.lifecycle, self.retry_at):
            table.pop(name, None)
        self.admitted.discard(name)

    def command(self, name: str, action: str) -> None:
        gang.command(self, self.world.hyperjobs[name], action)

    def job_phase_changed(self, job: Job) -> None:
        if job.hyperjob is not None and job.hyperjob in self.world.hyperjobs:
            gang.child_phase_changed(self, self.world.hyperjobs[job.hyperjob], job)

    def timer_fired(self, key: tuple[str, int]) -> None:
        gang.timer_fired(self, key)

    # -- status ---------------------------------------------------------------------------------

    def child_phases(self, hj: HyperJob) -> dict[str, str]:
        plan = self.plans.get(hj.name)
        return {c.name: self.engine.jobs.phase(self.world.jobs[c.name]) if c.name in self.world.jobs else "Pending"
                for c in (plan.children if plan else ())}

    def children_status(self, hj: HyperJob) -> list[fleetcore.ChildStatus]:
        result = []
        plan = self.plans.get(hj.name)
        for child in plan.children if plan else ():
            job = self.world.jobs.get(child.name)
            pods = self.world.pods_of(child.name) if job is not None and self.world.pod_count(child.name) else []
            count = {p: sum(1 for pod in pods if pod.phase == p) for p in ("Pending", "Running", "Succeeded", "Failed")}
            result.append(fleetcore.ChildStatus(
                name=child.name, replicated_job=child.replicated_job, cluster=child.cluster,
                phase=self.engine.jobs.phase(job) if job is not None else "Pending", replicas=child.replicas,
                pending=count["Pending"], running=count["Running"], succeeded=count["Succeeded"],
                failed=count["Failed"]))
        return result

    def status(self) -> None:
        """The status-aggregator's pass, after the clusters' sessions of the round."""
        for hj in self._by_creation():
            previous = self.statuses.get(hj.name)
            if previous is not None and previous.conditions and self.lifecycle[hj.name] == "Active":
                continue  # conditions are sticky: nothing but a command (which resets them) changes it
            self.lifecycle[hj.name] = fleetcore.settle_lifecycle(self.lifecycle[hj.name],  # type: ignore[arg-type]
                                                                 self.child_phases(hj))
            self.fold(hj)

    def fold(self, hj: HyperJob) -> None:
        """Fold the children into the HyperJob's status now; a new phase goes on the timeline.

        Also called right after a command, so a lifecycle the command sets (Restarting) shows even
        when the children pass through it within the instant (pods go at once in virtual time).
        """
        w = self.world
        status = fleetcore.aggregate_status(
            hj.manifest, self.children_status(hj), previous=self.statuses.get(hj.name),
            admitted=hj.name in self.admitted, lifecycle=self.lifecycle[hj.name],  # type: ignore[arg-type]
            waiting_reason=self.waiting.get(hj.name, ""), now=w.now)
        self.statuses[hj.name] = status
        hj.placement = dict(status.placement)
        if status.phase != hj.phase:
            hj.phase = status.phase
            w.emit("HyperJobPhaseChanged", hj.name, reason=status.waiting_reason, phase=status.phase)
            self.engine.changed = True

    def output(self) -> list[dict[str, Any]]:
        items = []
        for hj in self.world.hyperjobs.values():
            status = self.statuses.get(hj.name)
            conditions = [{"type": c.type, "status": c.status, "reason": c.reason} for c in status.conditions] \
                if status else []
            items.append({"name": hj.name, "phase": hj.phase or "Pending",
                          "splitCount": status.split_count if status else 0,
                          "placement": dict(hj.placement), "conditions": conditions})
        return items


def _take(working: dict[str, ClusterCapacity], cluster: str, spec: api.JobSpec) -> None:
    """Take a dispatched job's gang out of this round's summaries, so the next placement of the
    same round sees the room as taken (the next summaries will show it bound)."""
    placed = fleetcore.place_gang(working[cluster], fleetcore.gang_pods(spec, {t.name: t.replicas for t in spec.tasks}))
    if not isinstance(placed, str):
        working[cluster] = placed


def _queue_of(hj: HyperJob) -> str:
    return hj.manifest.spec.replicated_jobs[0].template_spec.queue or api.DEFAULT_QUEUE


def _priority(world: Any, hj: HyperJob) -> int:
    return int(world.priority_value(hj.manifest.spec.replicated_jobs[0].template_spec.priority_class_name))


def _minus(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: v - b.get(k, 0.0) for k, v in a.items()}

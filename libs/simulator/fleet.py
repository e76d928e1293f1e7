"""The splitter, global-scheduler and status-aggregator's part, driven through fleetcore.

Each round, before the clusters schedule: plain jobs waiting for a cluster are placed, HyperJobs
waiting for a plan are split (``fleetcore.plan_split`` against capacity summaries built from the
world), their children are admitted by jobcore and dispatched, and children on a lost cluster
are re-placed. After the clusters schedule, every HyperJob's status is folded by
``fleetcore.aggregate_status`` and phase changes go on the timeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import api
import fleetcore
from fleetcore import capacity as fcap
from fleetcore.model import ClusterCapacity, NodeCapacity
from fleetcore.status import ChildStatus
from jobcore.model import RankOverride

from . import gang
from .world import HyperJob, Job

if TYPE_CHECKING:
    from .engine import Engine

CHILD_TERMINAL = frozenset({"Completed", "Failed", "Aborted", "Terminated"})


class FleetDriver:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.unplaced: list[str] = []  # plain jobs waiting for a cluster, in submission order
        self.statuses: dict[str, Any] = {}  # hyperjob -> latest HyperJobStatus
        self.plans: dict[str, Any] = {}  # hyperjob -> SplitPlan in force
        self.waiting: dict[str, str] = {}  # hyperjob -> why it has no plan
        self.lifecycle: dict[str, str] = {}  # hyperjob -> Active | Suspended | Restarting | Terminating
        self.displaced: set[str] = set()  # children withdrawn from a lost cluster, waiting for another

    @property
    def world(self) -> Any:
        return self.engine.world

    # -- capacity summaries ---------------------------------------------------------------------

    def capacities(self) -> dict[str, ClusterCapacity]:
        """What each cluster-scheduler would report now: free = allocatable − bound pods' requests."""
        w = self.world
        used: dict[tuple[str, str], dict[str, float]] = {}
        for pod in w.pods.values():
            if pod.node is not None and pod.phase == "Running":
                slot = used.setdefault((pod.cluster, pod.node), {})
                for name, amount in pod.record.scheduling.request.items():
                    slot[name] = slot.get(name, 0.0) + amount
        result = {}
        for name, cluster in w.clusters.items():
            nodes = tuple(NodeCapacity(name=n.name, allocatable=dict(n.allocatable), labels=dict(n.labels),
                                       taints=tuple(n.taints), ready=n.ready,
                                       free=_minus(n.allocatable, used.get((name, n.name), {})))
                          for n in cluster.nodes.values())
            ready = [n for n in nodes if n.ready]
            result[name] = ClusterCapacity(
                name=name, labels=dict(cluster.labels), nodes=nodes,
                free=_sum(n.free for n in ready), allocatable=_sum(n.allocatable for n in ready),
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
            cluster = gang.choose_cluster_for_job(job.record.job.spec, working, self.world.now)
            if cluster is not None:
                self.unplaced.remove(name)
                self.engine.jobs.dispatch(job, cluster)

    # -- HyperJobs ------------------------------------------------------------------------------

    def submit_hyperjob(self, manifest: api.HyperJob) -> None:
        name = manifest.metadata.name
        self.world.hyperjobs[name] = HyperJob(name=name, manifest=manifest, created=self.world.now)
        self.lifecycle[name] = "Active"
        self.engine.changed = True

    def step(self) -> None:
        """The fleet's half of a round: failover, placement of plain jobs, splits and dispatch."""
        working = self.capacities()
        gang.failover(self, working)
        self._place_jobs(working)
        for hj in sorted(self.world.hyperjobs.values(), key=lambda h: (h.created, h.name)):
            if hj.name not in self.plans and self.lifecycle[hj.name] == "Active":
                self._plan(hj, working)

    def _plan(self, hj: HyperJob, working: dict[str, ClusterCapacity]) -> None:
        reason = gang.admission_blocker(self, hj)
        if reason:
            self.waiting[hj.name] = reason
            return
        plan = fleetcore.plan_split(hj.manifest, working, now=self.world.now)
        if isinstance(plan, fleetcore.Waiting):
            self.waiting[hj.name] = plan.reason
            return
        self.waiting.pop(hj.name, None)
        self.plans[hj.name] = plan
        hj.children = [c.name for c in plan.children]
        for child in fleetcore.child_jobs(hj.manifest, plan):
            self._create_child(hj, child)
        self.engine.changed = True

    def _create_child(self, hj: HyperJob, child: Any) -> None:
        jobs = self.engine.jobs
        record = jobs.admit(child.job, rank=RankOverride(rank_offset=child.rank_offset, world_size=child.world_size))
        job = Job(name=child.name, manifest=child.job, created=self.world.now, hyperjob=hj.name, record=record,
                  placement=child)
        self.world.jobs[child.name] = job
        jobs.dispatch(job, child.cluster)

    def delete_hyperjob(self, name: str) -> None:
        for child in self.world.hyperjobs[name].children:
            if child in self.world.jobs:
                self.engine.jobs.withdraw(self.world.jobs.pop(child))
        del self.world.hyperjobs[name]
        for table in (self.statuses, self.plans, self.waiting, self.lifecycle):
            table.pop(name, None)

    def command(self, name: str, action: str) -> None:
        gang.command(self, self.world.hyperjobs[name], action)

    def job_phase_changed(self, job: Job) -> None:
        """A child's phase moved: a child failed beyond its retries fails the HyperJob (policy)."""
        if job.hyperjob is not None and job.hyperjob in self.world.hyperjobs:
            gang.child_phase_changed(self, self.world.hyperjobs[job.hyperjob], job)

    # -- status ---------------------------------------------------------------------------------

    def children_status(self, hj: HyperJob) -> list[ChildStatus]:
        result = []
        plan = self.plans.get(hj.name)
        for child in plan.children if plan else ():
            job = self.world.jobs.get(child.name)
            phase = self.engine.jobs.phase(job) if job is not None else "Pending"
            pods = self.world.pods_of(child.name)
            count = {p: sum(1 for pod in pods if pod.phase == p) for p in ("Pending", "Running", "Succeeded", "Failed")}
            result.append(ChildStatus(name=child.name, replicated_job=child.replicated_job,
                                      cluster=(job.cluster or "") if job is not None else "", phase=phase,
                                      replicas=child.replicas, pending=count["Pending"], running=count["Running"],
                                      succeeded=count["Succeeded"], failed=count["Failed"]))
        return result

    def status(self) -> None:
        """The status-aggregator's pass, after the clusters' sessions of the round."""
        w = self.world
        for hj in sorted(w.hyperjobs.values(), key=lambda h: (h.created, h.name)):
            previous = self.statuses.get(hj.name)
            status = fleetcore.aggregate_status(
                hj.manifest, self.children_status(hj), previous=previous,
                admitted=hj.name in self.plans, lifecycle=self.lifecycle[hj.name],  # type: ignore[arg-type]
                waiting_reason=self.waiting.get(hj.name, ""), now=w.now)
            self.statuses[hj.name] = status
            if status.phase != hj.phase:
                hj.phase = status.phase
                w.emit("HyperJobPhaseChanged", hj.name, reason=status.waiting_reason, phase=status.phase)
                self.engine.changed = True
                gang.hyperjob_phase_changed(self, hj)

    def output(self) -> list[dict[str, Any]]:
        items = []
        for hj in self.world.hyperjobs.values():
            status = self.statuses.get(hj.name)
            plan = self.plans.get(hj.name)
            conditions = [{"type": c.type, "status": c.status, "reason": c.reason} for c in status.conditions] \
                if status else []
            items.append({"name": hj.name, "phase": hj.phase, "splitCount": len(plan.children) if plan else 0,
                          "placement": dict(status.placement) if status else {}, "conditions": conditions})
        return items


def _minus(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: v - b.get(k, 0.0) for k, v in a.items()}


def _sum(items: Any) -> dict[str, float]:
    total: dict[str, float] = {}
    for item in items:
        for k, v in item.items():
            total[k] = total.get(k, 0.0) + v
    return total

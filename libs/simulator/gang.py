"""Fleet-level steps the simulator drives between rounds: cluster choice for plain jobs, global
admission, failover, HyperJob commands and the child-failure policy.

ADAPTER: fleetcore's published API (``plan_split``, ``choose_cluster``, ``eligible_clusters``,
``cluster_lost``, ``aggregate_status``) has no entry point yet for global queue admission, the
cross-cluster gang's reservations, failover or commands. The thin glue below composes the
published pieces and makes no scheduling decision of its own beyond the order of calls; each
function names the gap it covers. The cross-cluster gang is honoured by dispatching a HyperJob's
children only when ``plan_split`` has placed every child's whole gang on free capacity in the
same instant (no reservation is held, so none needs releasing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

import api
import fleetcore
from fleetcore.model import ClusterCapacity

if TYPE_CHECKING:
    from .fleet import FleetDriver
    from .world import HyperJob, Job

HJ_CHILD_ACTIONS = {"suspend": "AbortJob", "resume": "ResumeJob", "abort": "AbortJob", "restart": "RestartJob"}


def choose_cluster_for_job(spec: api.JobSpec, working: dict[str, ClusterCapacity], now: float) -> str | None:
    """GAP (fleetcore has no plain-job placement): the cluster where the whole gang fits now, else
    the live cluster with the most room that could ever host it (the cluster's own enqueue then
    decides, so a job on a full cluster may still reclaim there). None: no live cluster."""
    live = fleetcore.live_clusters(working, now)
    pods = fleetcore.gang_pods(spec, {t.name: t.replicas for t in spec.tasks})
    eligible = list(live)
    chosen = fleetcore.choose_cluster(pods, eligible, working)
    if chosen is not None:
        return chosen
    hosts = [n for n in eligible if not pods or fleetcore.capacity.could_ever_host(working[n], pods[0])]
    return fleetcore.choose_cluster(pods, hosts or eligible, working, check_fit=False)


def admission_blocker(fleet: FleetDriver, hj: HyperJob) -> str:
    """GAP (no global admission in fleetcore): the queue must be Open, and a queue ``capability``
    applies to the whole fleet: what the queue's running pods use plus the HyperJob's request."""
    w = fleet.world
    for rj in hj.manifest.spec.replicated_jobs:
        queue = w.queues.get(rj.template_spec.queue or api.DEFAULT_QUEUE)
        if queue is None or queue.state != "Open":
            return f"queue {rj.template_spec.queue or api.DEFAULT_QUEUE!r} is not Open"
    queue_name = hj.manifest.spec.replicated_jobs[0].template_spec.queue or api.DEFAULT_QUEUE
    capability = api.parse_resource_list(w.queues[queue_name].manifest.spec.capability)
    if not capability:
        return ""
    used: dict[str, float] = {}
    for pod in w.pods.values():
        job = w.jobs.get(pod.job)
        if job is not None and pod.phase == "Running" and (job.record.job.spec.queue == queue_name):
            for k, v in pod.record.scheduling.request.items():
                used[k] = used.get(k, 0.0) + v
    need = fleetcore.hyperjob_request(hj.manifest)
    for name, cap in sorted(capability.items()):
        if cap > 0 and need.get(name, 0.0) > 0 and used.get(name, 0.0) + need[name] > cap + 1e-9:
            return f"queue {queue_name!r} capability {name}: {used.get(name, 0.0) + need[name]:g} > {cap:g}"
    return ""


def failover(fleet: FleetDriver, working: dict[str, ClusterCapacity]) -> None:
    """GAP (no failover entry point): jobs on a cluster silent for 30 s (or with no Ready node) are
    re-placed, keeping their names, on another eligible cluster where their gang fits; otherwise
    they wait without a cluster and are retried every round."""
    w, now = fleet.world, fleet.world.now
    lost = {n for n, cap in working.items() if fleetcore.cluster_lost(cap, now)}
    for job in sorted(w.jobs.values(), key=lambda j: (j.created, j.name)):
        if job.hyperjob is None or (job.cluster is not None and job.cluster not in lost):
            continue
        if job.cluster is None and job.name not in fleet.displaced:
            continue
        _replace_child(fleet, job, working, lost)


def _replace_child(fleet: FleetDriver, job: Job, working: dict[str, ClusterCapacity], lost: set[str]) -> None:
    w = fleet.world
    hj = w.hyperjobs[job.hyperjob or ""]
    child = job.placement
    rj = next(r for r in hj.manifest.spec.replicated_jobs if r.name == child.replicated_job)
    tasks = {t.name: t.replicas for t in child.job.spec.tasks}
    pods = fleetcore.gang_pods(child.job.spec, tasks)
    eligible = [n for n in fleetcore.eligible_clusters(hj.manifest, rj, working, w.now) if n not in lost]
    used = sorted({w.jobs[c].cluster for c in hj.children if c in w.jobs and c != job.name and w.jobs[c].cluster})
    target = fleetcore.choose_cluster(pods, eligible, working, used, hj.manifest.spec.max_domains)
    if job.cluster is not None:
        fleet.engine.jobs.withdraw(job)
        fleet.displaced.add(job.name)
    if target is None:
        return
    fleet.displaced.discard(job.name)
    moved = msgspec.structs.replace(child, cluster=target)
    job.placement = moved
    job.record = fleet.engine.jobs.admit(child.job, rank=job.record.rank)
    plan = fleet.plans[hj.name]
    fleet.plans[hj.name] = msgspec.structs.replace(
        plan, children=tuple(msgspec.structs.replace(c, cluster=target) if c.name == job.name else c
                             for c in plan.children))
    fleet.engine.jobs.dispatch(job, target)


def command(fleet: FleetDriver, hj: HyperJob, action: str) -> None:
    """GAP (no HyperJob command handling in fleetcore): suspend/abort abort every child, resume
    resumes them, restart restarts them; the lifecycle feeds ``aggregate_status``."""
    w = fleet.world
    if action == "suspend":
        fleet.lifecycle[hj.name] = "Suspended"
    elif action == "resume":
        fleet.lifecycle[hj.name] = "Active"
    elif action == "restart":
        fleet.lifecycle[hj.name] = "Restarting"
        fleet.statuses.pop(hj.name, None)  # conditions start over after a restart
    for name in hj.children:
        job = w.jobs.get(name)
        if job is not None:
            fleet.engine.jobs.command(job, HJ_CHILD_ACTIONS[action])
    fleet.engine.changed = True


def child_phase_changed(fleet: FleetDriver, hj: HyperJob, job: Job) -> None:
    """A child that failed beyond its own retries fails the HyperJob (default policy): the other
    children are aborted. GAP: the policy lives in fleetcore's status only as a phase."""
    w = fleet.world
    phase = fleet.engine.jobs.phase(job)
    if fleet.lifecycle.get(hj.name) == "Restarting" and phase in ("Pending", "Running"):
        if all(fleet.engine.jobs.phase(w.jobs[c]) not in ("Restarting",) for c in hj.children if c in w.jobs):
            fleet.lifecycle[hj.name] = "Active"
    if phase != "Failed":
        return
    policy = hj.manifest.spec.child_failure_policy
    action = "RestartJob" if policy == "RestartHyperJob" else "AbortJob"
    for name in hj.children:
        other = w.jobs.get(name)
        if other is not None and other is not job and fleet.engine.jobs.phase(other) not in (
                "Completed", "Failed", "Aborted", "Terminated", "Aborting"):
            fleet.engine.jobs.command(other, action)


def hyperjob_phase_changed(fleet: FleetDriver, hj: HyperJob) -> None:
    """Nothing follows a HyperJob phase change in the simulator yet (a hook for reservations)."""

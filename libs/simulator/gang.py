"""HyperJob decisions carried out on the world: the cross-cluster gang's reservations, failover,
the child-failure policy and commands. fleetcore decides each of them; this module delivers the
events (``ReservationHeld``, timers, phases) and applies the decisions (``Reserve``/``Bind``/
``Release``/``Retry``, ``ChildMove``/``ChildUnplaced``/``ChildCommand``/``SetLifecycle``).

ADAPTER (GAP in schedcore: no reservation mode). A child under ``Reserve`` is scheduled by its
cluster as usual, but the binds of its pods are held: the pods keep their node (``Bound`` in the
next snapshot, so the room stays taken) without starting and without any event. Once the child's
minMember pods hold a node, the cluster has "held the reservation" (``ReservationHeld``). ``Bind``
starts the held pods (``PodBound``); ``Release`` gives their nodes back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

import fleetcore
from fleetcore import gang as fg

from .events import Timer

if TYPE_CHECKING:
    from .fleet import FleetDriver
    from .world import HyperJob, Job, Pod


# -- the cross-cluster gang ----------------------------------------------------------------------

def start(fleet: FleetDriver, hj: HyperJob, plan: Any) -> None:
    """Open a reservation attempt for a freshly planned HyperJob."""
    attempt = fleet.gangs[hj.name].attempt + 1 if hj.name in fleet.gangs else 1
    gang, decisions = fleetcore.start_gang(hj.name, {c.name: c.cluster for c in plan.children},
                                           hj.manifest.spec.min_available, fleet.world.now, attempt=attempt)
    fleet.gangs[hj.name] = gang
    apply_gang(fleet, hj, decisions)


def apply_gang(fleet: FleetDriver, hj: HyperJob, decisions: list[Any]) -> None:
    w, e = fleet.world, fleet.engine
    for d in decisions:
        job = w.jobs.get(getattr(d, "child", ""))
        if isinstance(d, fg.Reserve) and job is not None:
            job.reserving = True
        elif isinstance(d, fg.Bind) and job is not None:
            job.reserving = False
            for pod in w.pods_of(job.name):
                if pod.reserved:
                    pod.reserved = False
                    e.kubelet.start(pod, pod.node or "")
                    e.jobs.pod_bound(pod)
        elif isinstance(d, fg.Release) and job is not None:
            job.reserving = False
            for pod in w.pods_of(job.name):
                unreserve(w, pod)
        elif isinstance(d, fg.StartTimer):
            e.agenda.push(d.at, Timer(fleet, (hj.name, d.attempt)), key=("gang", hj.name))
        elif isinstance(d, fg.Retry):
            # The attempt failed: the children go, and the HyperJob is split again from scratch.
            fleet.drop_children(hj)
            fleet.waiting[hj.name] = d.reason
            fleet.retry_at[hj.name] = d.at
            e.wake_after(d.at - 1e-6)
        e.changed = True


def unreserve(world: Any, pod: Pod) -> None:
    if pod.reserved:
        pod.reserved = False
        pod.node = None
        world.account(pod)


def hold(fleet: FleetDriver, job: Job, pod: Pod, node: str) -> None:
    """A bind of a reserving child's pod: keep the node, start nothing."""
    pod.reserved = True
    pod.node = node
    fleet.world.account(pod)
    if job.hyperjob is None or job.cluster is None:
        return
    # The gang is held once the child's minMember pods hold nodes (what its podgroup needs to run).
    held = sum(1 for p in fleet.world.pods_of(job.name) if p.reserved)
    if held and held >= (job.podgroup.min_member if job.podgroup is not None else 1):
        _gang_event(fleet, job.hyperjob, fg.ReservationHeld(child=job.name, cluster=job.cluster))


def lost(fleet: FleetDriver, job: Job, pod: Pod) -> None:
    """A held pod lost its node (evicted, node down): the child no longer holds its reservation."""
    unreserve(fleet.world, pod)
    if job.hyperjob is not None and job.cluster is not None:
        _gang_event(fleet, job.hyperjob, fg.ReservationLost(child=job.name, cluster=job.cluster))


def timer_fired(fleet: FleetDriver, key: tuple[str, int]) -> None:
    _gang_event(fleet, key[0], fg.GangTimer(attempt=key[1]))


def _gang_event(fleet: FleetDriver, name: str, event: Any) -> None:
    hj = fleet.world.hyperjobs.get(name)
    gang = fleet.gangs.get(name)
    if hj is None or gang is None:
        return
    fleet.gangs[name], decisions = fleetcore.gang_step(gang, event, fleet.world.now)
    apply_gang(fleet, hj, decisions)


# -- failover, child failure, commands -----------------------------------------------------------

def failover(fleet: FleetDriver, working: dict[str, Any]) -> None:
    """Children on a lost cluster (or waiting without one) are re-placed where fleetcore says."""
    for hj in fleet._by_creation():
        plan = fleet.plans.get(hj.name)
        if plan is None:
            continue
        phases = fleet.child_phases(hj)
        finished = [c for c, p in phases.items() if p in fleetcore.TERMINAL_CHILD_PHASES]
        fleet.plans[hj.name], decisions = fleetcore.failover(hj.manifest, plan, working, fleet.world.now,
                                                             finished=finished)
        apply_fleet(fleet, hj, decisions)


def child_phase_changed(fleet: FleetDriver, hj: HyperJob, job: Job) -> None:
    """A child failed beyond its own retries: the HyperJob's childFailurePolicy decides."""
    plan = fleet.plans.get(hj.name)
    if plan is None or fleet.engine.jobs.phase(job) != "Failed":
        return
    fleet.plans[hj.name], decisions = fleetcore.child_failed(
        hj.manifest, plan, job.name, fleet.capacities(), fleet.world.now, fleet.child_phases(hj))
    apply_fleet(fleet, hj, decisions)


def command(fleet: FleetDriver, hj: HyperJob, action: str) -> None:
    lifecycle, decisions = fleetcore.hyperjob_command(action, fleet.child_phases(hj),  # type: ignore[arg-type]
                                                      fleet.lifecycle[hj.name])  # type: ignore[arg-type]
    fleet.lifecycle[hj.name] = lifecycle
    if action == "restart":
        fleet.statuses.pop(hj.name, None)  # conditions start over after a restart
    if action in ("suspend", "abort") and hj.name in fleet.gangs:
        fleet.gangs[hj.name], released = fleetcore.release_gang(fleet.gangs[hj.name])
        apply_gang(fleet, hj, released)
    apply_fleet(fleet, hj, decisions)
    plan = fleet.plans.get(hj.name)
    if action in ("resume", "restart") and plan is not None:
        start(fleet, hj, plan)  # the children's new pods start together again, as at first
    fleet.fold(hj)  # the phase the command sets shows at once (Suspended, Restarting)
    fleet.engine.changed = True


def apply_fleet(fleet: FleetDriver, hj: HyperJob, decisions: list[Any]) -> None:
    w, e = fleet.world, fleet.engine
    for d in decisions:
        job = w.jobs.get(getattr(d, "child", ""))
        if isinstance(d, fleetcore.SetLifecycle):
            fleet.lifecycle[hj.name] = d.lifecycle
        elif isinstance(d, fleetcore.ChildCommand) and job is not None:
            e.jobs.command(job, d.action)
        elif isinstance(d, fleetcore.ChildMove) and job is not None:
            _move(fleet, hj, job, d.to_cluster)
        elif isinstance(d, fleetcore.ChildUnplaced) and job is not None:
            e.jobs.withdraw(job, moving=True)
        e.changed = True


def _move(fleet: FleetDriver, hj: HyperJob, job: Job, cluster: str) -> None:
    """Delete the child where it was and create it unchanged on ``cluster`` (same name)."""
    e = fleet.engine
    if job.cluster is not None:
        e.jobs.withdraw(job, moving=True)
    job.reserving = False
    record = e.jobs.try_admit(job.manifest, rank=job.record.rank)
    if record is None:
        # Refused by admission now (its queue closed): it waits without a cluster, and
        # fleetcore.failover retries it every round.
        plan = fleet.plans[hj.name]
        fleet.plans[hj.name] = msgspec.structs.replace(plan, children=tuple(
            msgspec.structs.replace(c, cluster="") if c.name == job.name else c for c in plan.children))
        return
    job.record = record
    e.jobs.dispatch(job, cluster)

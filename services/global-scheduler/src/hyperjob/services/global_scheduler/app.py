"""Wiring: the global-scheduler's consumers, its watches and its round."""

from __future__ import annotations

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.servicekit import Rank, Runtime

from .config import Settings
from .handlers import GlobalScheduler
from .leases import LEASE_RENEW_PERIOD, LeaseGrants


async def build(settings: Settings, runtime: Runtime) -> GlobalScheduler:
    scheduler = GlobalScheduler(runtime)
    runtime.watch(
        subjects.CONFIG_ALL, {events.QueueChanged: scheduler.on_queue, events.PriorityClassChanged: lambda msg: None}
    )
    runtime.watch(subjects.CAPACITY_ALL, {events.ClusterCapacityReported: scheduler.on_capacity})
    leases = LeaseGrants(runtime, scheduler.capacity, settings.fleet_lease)
    runtime.watch(subjects.heartbeats("*"), {events.AgentHeartbeat: leases.on_heartbeat})
    runtime.every(LEASE_RENEW_PERIOD, leases.grant, "leases", rank=Rank.REPORT, exclusive=False)
    runtime.subscribe(
        "global-scheduler",
        [
            subjects.OWNER_SUBMITTED,
            subjects.OWNER_WITHDRAWN,
            subjects.OWNER_LIFECYCLE,
            subjects.PLACE_CHILDREN,
            subjects.UNPLACE_CHILD,
            subjects.MOVE_CHILD,
            subjects.RESERVATION_HELD,
        ],
        {
            events.OwnerSubmitted: scheduler.on_submitted,
            events.OwnerWithdrawn: scheduler.on_withdrawn,
            events.OwnerLifecycle: scheduler.on_lifecycle,
            events.PlaceChildren: scheduler.on_place,
            events.RemoveChild: scheduler.on_unplace,
            events.MoveChild: scheduler.on_move,
            events.ReservationHeld: scheduler.on_reservation,
        },
    )
    runtime.subscribe(
        "global-scheduler-podgroups",
        [subjects.podgroup_phase("*")],
        {events.PodGroupPhaseChanged: scheduler.on_podgroup_phase},
    )
    runtime.subscribe(
        "global-scheduler-jobs",
        ["job.removed.*", "job.phase.*"],
        {
            events.JobRemoved: scheduler.on_removed,
            events.JobPhaseChanged: scheduler.on_job_phase,
        },
    )
    runtime.before_commit(lambda: scheduler.end_unit())
    runtime.every(settings.retry_period, scheduler.round, "round", rank=Rank.ADMIT)
    return scheduler

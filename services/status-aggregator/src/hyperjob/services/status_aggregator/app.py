"""Wiring: the status-aggregator's consumers and its flush."""

from __future__ import annotations

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.servicekit import Runtime

from .config import Settings
from .handlers import StatusAggregator
from .metrics import Tables


async def build(settings: Settings, runtime: Runtime) -> StatusAggregator:
    aggregator = StatusAggregator(runtime)
    Tables.aggregator = aggregator  # what its /metrics gauges read
    runtime.subscribe(
        "status-aggregator",
        [subjects.HYPERJOB_SPEC, subjects.HYPERJOB_DELETED],
        {
            events.HyperJobSpecChanged: aggregator.on_spec,
            events.HyperJobDeleted: aggregator.on_deleted,
        },
    )
    runtime.subscribe(
        "status-aggregator-sched",
        [subjects.OWNER_ADMITTED, subjects.CHILD_WAITING, subjects.RESERVATION_HELD, subjects.GANG_RETRY],
        {
            events.OwnerAdmitted: aggregator.on_admitted,
            events.ChildPlacementWaiting: aggregator.on_waiting,
            events.ReservationHeld: aggregator.on_reservation,
            events.GangRetry: aggregator.on_gang_retry,
        },
    )
    runtime.subscribe(
        "status-aggregator-podgroups",
        subjects.podgroup_phase("*"),
        {events.PodGroupPhaseChanged: aggregator.on_podgroup_phase},
    )
    runtime.subscribe("status-aggregator-jobs", "job.phase.*", {events.JobPhaseChanged: aggregator.on_job_phase})
    runtime.before_commit(aggregator.flush)
    return aggregator

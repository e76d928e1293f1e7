"""Wiring: the status-aggregator's consumers."""

from __future__ import annotations

import events
from events import subjects
from servicekit import Runtime

from .config import Settings
from .handlers import StatusAggregator


async def build(settings: Settings, runtime: Runtime) -> StatusAggregator:
    aggregator = StatusAggregator(runtime)
    await runtime.subscribe("status-aggregator-jobs", "job.phase.*", {events.JobPhaseChanged: aggregator.on_job_phase})
    await runtime.subscribe("status-aggregator-waiting", subjects.CHILD_WAITING,
                            {events.ChildPlacementWaiting: aggregator.on_waiting})
    await runtime.subscribe("status-aggregator-hyperjobs", subjects.HYPERJOB_DELETED,
                            {events.HyperJobDeleted: aggregator.on_deleted})
    await runtime.subscribe("status-aggregator-admissions", subjects.OWNER_ADMITTED,
                            {events.OwnerAdmitted: aggregator.on_admitted})
    return aggregator

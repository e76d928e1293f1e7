"""Wiring: the global-scheduler's consumers and its admission-and-placement round."""

from __future__ import annotations

import events
from events import subjects
from servicekit import Runtime

from .config import Settings
from .handlers import GlobalScheduler


async def build(settings: Settings, runtime: Runtime) -> GlobalScheduler:
    scheduler = GlobalScheduler(runtime)
    await runtime.subscribe("global-scheduler", [subjects.PLACE_CHILD, subjects.UNPLACE_CHILD, subjects.MOVE_CHILD], {
        events.PlaceChild: scheduler.on_place,
        events.RemoveChild: scheduler.on_unplace,
        events.MoveChild: scheduler.on_move,
    })
    await runtime.subscribe("global-scheduler-removed", "job.removed.*", {events.JobRemoved: scheduler.on_removed})
    await runtime.subscribe("global-scheduler-phases", "job.phase.*", {events.JobPhaseChanged: scheduler.on_job_phase})
    await runtime.subscribe("global-scheduler-reservations", subjects.RESERVATION_HELD,
                            {events.ReservationHeld: scheduler.on_reservation_held})
    runtime.spawn(lambda: scheduler.run_rounds(settings.retry_period), "admission-and-placement")
    return scheduler

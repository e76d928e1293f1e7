"""Wiring: the wake-up consumer and the cycle loop of one cluster's scheduler."""

from __future__ import annotations

import events
from events import subjects
from servicekit import Reaction, Runtime

from .config import Settings
from .handlers import ClusterScheduler


async def build(settings: Settings, runtime: Runtime) -> ClusterScheduler:
    scheduler = ClusterScheduler(runtime, settings)

    async def wake(msg: events.PodsReady) -> Reaction:
        await scheduler.on_pods_ready(msg)
        return Reaction()

    async def gang_control(msg: events.GangControl) -> Reaction:
        await scheduler.on_gang_control(msg)
        return Reaction()

    await runtime.subscribe(f"cluster-scheduler-{settings.cluster}-wake", subjects.pods_ready(settings.cluster),
                            {events.PodsReady: wake})
    await runtime.subscribe(f"cluster-scheduler-{settings.cluster}-gang", subjects.gang_control(settings.cluster),
                            {events.GangControl: gang_control})
    runtime.spawn(scheduler.run_cycles, "cycles")
    return scheduler

"""Wiring: the simulated fleet's commands, heartbeats and pod clock."""

from __future__ import annotations

import events
from events import subjects
from servicekit import Runtime

from .config import Settings
from .handlers import SimulatedFleet


async def build(settings: Settings, runtime: Runtime) -> SimulatedFleet:
    fleet = SimulatedFleet(runtime, settings)
    await fleet.load()
    await fleet.heartbeat()
    c = settings.cluster
    await runtime.subscribe(f"node-agent-{c}", [subjects.start_pod(c), subjects.stop_pod(c)], {
        events.StartPod: fleet.on_start,
        events.StopPod: fleet.on_stop,
    })
    runtime.every(settings.heartbeat_period, fleet.heartbeat, "heartbeat")
    runtime.every(settings.tick_period, fleet.advance, "pod-clock")
    return fleet

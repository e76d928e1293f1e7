"""Wiring: the consumers of one cluster's job-controller and its timer loop."""

from __future__ import annotations

import events
from events import subjects
from servicekit import Runtime

from .config import Settings
from .handlers import JobController


async def build(settings: Settings, runtime: Runtime) -> JobController:
    controller = JobController(runtime, settings.cluster)
    c = settings.cluster
    await runtime.subscribe(f"job-controller-{c}-sched", [subjects.dispatch(c), subjects.remove_child(c),
                                                         subjects.command_child(c), subjects.podgroup_phase(c),
                                                         subjects.pod_bound(c), subjects.pod_evicted(c)], {
        events.DispatchChild: controller.on_dispatch,
        events.RemoveChild: controller.on_remove,
        events.CommandChild: controller.on_command,
        events.PodGroupPhaseChanged: controller.on_podgroup_phase,
        events.PodBound: controller.on_bound,
        events.PodEvicted: controller.on_evicted,
    })
    await runtime.subscribe(f"job-controller-{c}-nodes", subjects.pod_phase(c),
                            {events.PodPhaseReported: controller.on_pod_phase})
    runtime.every(settings.timer_period, controller.fire_due_timers, "fire-due-timers")
    return controller

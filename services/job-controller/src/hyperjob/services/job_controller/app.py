"""Wiring: the consumers of one cluster's job-controller, its configuration watch, its flush."""

from __future__ import annotations

from hyperjob import events, fleetcore
from hyperjob.events import subjects
from hyperjob.servicekit import Runtime

from .config import Settings
from .handlers import JobController


async def build(settings: Settings, runtime: Runtime) -> JobController:
    controller = JobController(runtime, settings)
    c = settings.cluster
    runtime.watch(
        subjects.CONFIG_ALL,
        {events.QueueChanged: controller.on_queue, events.PriorityClassChanged: controller.on_priority_class},
    )
    runtime.subscribe(
        f"job-controller-{c}",
        [
            subjects.dispatch(c),
            subjects.remove_child(c),
            subjects.command_child(c),
            subjects.podgroup_phase(c),
            subjects.pods_bound(c),
            subjects.pods_evicted(c),
            subjects.pods_rejected(c),
            subjects.fleet_lease(c),  # in order with the removals: a moved child is gone before its lease returns
        ],
        {
            events.DispatchChild: controller.on_dispatch,
            events.RemoveChild: controller.on_remove,
            events.CommandChild: controller.on_command,
            events.PodGroupPhaseChanged: controller.on_podgroup_phase,
            events.PodsBound: controller.on_bound,
            events.PodsEvicted: controller.on_evicted,
            events.PodsRejected: controller.on_rejected,
            events.FleetLease: controller.on_lease,
        },
    )
    runtime.watch(subjects.FLEET_LEASES, {events.FleetLease: controller.on_any_lease})
    runtime.every(fleetcore.LEASE_CHECK_PERIOD, controller.check_lease, "lease")
    runtime.subscribe(
        f"job-controller-{c}-nodes", subjects.pod_phases(c), {events.PodPhasesReported: controller.on_pod_phases}
    )
    # Apart from the phases: an agent asks about its frozen pods only after a cut-off of its own.
    runtime.subscribe(
        f"job-controller-{c}-frozen", subjects.pods_frozen(c), {events.PodsFrozen: controller.on_pods_frozen}
    )
    runtime.before_commit(controller.flush)
    return controller

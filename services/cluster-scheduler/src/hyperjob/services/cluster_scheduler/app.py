"""Wiring: one cluster's views, its gang-control consumer, its cycle and its capacity summary."""

from __future__ import annotations

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.servicekit import Rank, Runtime

from .config import Settings
from .handlers import ClusterScheduler


async def build(settings: Settings, runtime: Runtime) -> ClusterScheduler:
    scheduler = ClusterScheduler(runtime, settings)
    c = settings.cluster
    runtime.own_bindings(c)
    runtime.watch(
        subjects.CONFIG_ALL, {events.QueueChanged: scheduler.on_queue, events.PriorityClassChanged: lambda msg: None}
    )
    runtime.watch(subjects.node_statuses(c), {events.NodeStatus: scheduler.on_node_status})
    runtime.watch(subjects.heartbeats(c), {events.AgentHeartbeat: scheduler.on_heartbeat})
    runtime.watch(subjects.job_states(c), {events.JobState: scheduler.on_job_state})
    runtime.subscribe(
        f"cluster-scheduler-{c}",
        subjects.gang_control(c),
        {events.GangControl: scheduler.on_gang_control, events.PreemptForGang: scheduler.on_preempt_for_gang},
    )
    # The summary is the cluster's liveness for the splitter and the global-scheduler (30 s of
    # silence and its children fail over elsewhere): it goes out even while a long cycle runs.
    runtime.every(scheduler.period, scheduler.report_capacity, "capacity", rank=Rank.REPORT, exclusive=False)
    runtime.every(scheduler.period, scheduler.cycle, "cycle", rank=Rank.SCHEDULE)
    return scheduler

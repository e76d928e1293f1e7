"""Wiring: each message the splitter consumes routed to the unit that handles it, its capacity
watch, its re-planning round and its flush."""

from __future__ import annotations

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.servicekit import Rank, Runtime

from .config import Settings
from .handlers import Splitter


async def build(settings: Settings, runtime: Runtime) -> Splitter:
    splitter = Splitter(runtime, settings)
    runtime.watch(subjects.CAPACITY_ALL, {events.ClusterCapacityReported: splitter.replanning.on_capacity})
    runtime.watch(subjects.heartbeats("*"), {events.AgentHeartbeat: splitter.replanning.on_heartbeat})
    runtime.subscribe(
        "splitter",
        [form for request in subjects.REQUESTS for form in (request, subjects.in_namespace(request, "*"))],
        {
            events.ApplyManifest: splitter.admission.on_apply,
            events.DeleteObject: splitter.deletion.on_delete,
            events.CommandHyperJob: splitter.commands.on_command,
            events.CommandObject: splitter.commands.on_object_command,
        },
        on_unreadable=splitter.admission.on_unreadable,
    )
    runtime.subscribe(
        "splitter-sched",
        [subjects.OWNER_ADMITTED, subjects.GANG_RETRY],
        {
            events.OwnerAdmitted: splitter.planner.on_admitted,
            events.GangRetry: splitter.planner.on_gang_retry,
        },
    )
    runtime.subscribe(
        "splitter-children",
        ["job.removed.*", "job.phase.*"],
        {
            events.JobRemoved: splitter.deletion.on_job_removed,
            events.JobPhaseChanged: splitter.planner.on_job_phase,
        },
    )
    runtime.every(settings.replan_period, splitter.replanning.replan, "replan", rank=Rank.PLAN)
    runtime.before_commit(splitter.announcer.flush)
    return splitter

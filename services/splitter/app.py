"""Wiring: the splitter's consumers and its re-planning loop."""

from __future__ import annotations

import events
from events import subjects
from servicekit import Runtime

from .config import Settings
from .handlers import Splitter


async def build(settings: Settings, runtime: Runtime) -> Splitter:
    splitter = Splitter(runtime)
    await runtime.subscribe("splitter", [subjects.APPLY, subjects.DELETE, subjects.HYPERJOB_COMMAND], {
        events.ApplyManifest: splitter.on_apply,
        events.DeleteObject: splitter.on_delete,
        events.CommandHyperJob: splitter.on_command,
    })
    await runtime.subscribe("splitter-children", ["job.removed.*", "job.phase.*"], {
        events.JobRemoved: splitter.on_job_removed,
        events.JobPhaseChanged: splitter.on_job_phase,
    })
    runtime.every(settings.replan_period, splitter.replan_waiting, "replan-waiting")
    runtime.every(settings.replan_period, splitter.failover_round, "failover")
    return splitter

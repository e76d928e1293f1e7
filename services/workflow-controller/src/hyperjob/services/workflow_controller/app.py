"""Wiring: the workflow-controller's requests, the news of the jobs it made, the splitter's answers."""

from __future__ import annotations

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.servicekit import Runtime

from .config import Settings
from .handlers import WorkflowController


async def build(settings: Settings, runtime: Runtime) -> WorkflowController:
    controller = WorkflowController(runtime)
    # One consumer of the front door's stream: the requests, the answers to the jobs it asked for and
    # the ends of jobs, in the order they happened.
    runtime.subscribe(
        "workflow-controller",
        [subjects.APPLY, subjects.DELETE, subjects.result("*"), subjects.HYPERJOB_DELETED, subjects.HYPERJOB_STATUS]
        + [subjects.in_namespace(request, "*") for request in (subjects.APPLY, subjects.DELETE)],  # contract v2
        {
            events.ApplyManifest: controller.on_apply,
            events.DeleteObject: controller.on_delete,
            events.RequestAccepted: controller.on_answer,
            events.RequestRejected: controller.on_answer,
            events.HyperJobDeleted: controller.on_job_deleted,
            events.HyperJobStatusChanged: controller.on_hyperjob_status,  # a flow's HyperJob step
        },
        concerns=controller.concerns,
    )
    runtime.subscribe(
        "workflow-controller-jobs",
        "job.phase.*",
        {events.JobPhaseChanged: controller.on_job_phase},
        concerns=controller.concerns,
    )
    return controller

"""A JobFlow's progression (Volcano's ``pkg/controllers/jobflow``, ed72c7c81), as a pure step.

``step(flow, jobs)`` takes the JobFlow and the phases of the jobs it created so far (job name →
Volcano Job phase) and says which jobs to create now, which to delete, and the JobFlow's status:

* a flow's job is ``<jobflow>-<flow>``, made from the JobTemplate named after the flow; a flow
  without ``dependsOn`` starts at once, one with targets once every target's job is Completed
  (``judge``); a job that exists is never created again;
* phase: Pending → Running once a job runs or completed and none failed; Succeed once every flow's
  job is Completed; Failed as soon as a job is Failed or Terminated. A Failed JobFlow creates
  nothing more (Volcano's failed state does not sync); a Succeeded one with
  ``jobRetainPolicy: delete`` deletes its jobs and does nothing else from then on (no job is made
  again, the status stays as it was: ``status`` None);
* status lists the jobs by phase as Volcano's ``getAllJobStatus`` does.

The workflow-controller service feeds ``step`` whenever a flow's job changes phase or goes, and
carries out ``create`` / ``delete``.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from hyperjob.api.flow import JobFlow

FlowPhase = str  # Pending | Running | Succeed | Failed


class FlowStatus(msgspec.Struct, frozen=True, kw_only=True):
    phase: FlowPhase
    pending_jobs: list[str] = []
    running_jobs: list[str] = []
    completed_jobs: list[str] = []
    failed_jobs: list[str] = []
    terminated_jobs: list[str] = []
    unknown_jobs: list[str] = []


class FlowStep(msgspec.Struct, frozen=True, kw_only=True):
    create: list[tuple[str, str]] = []  # (job name, JobTemplate name), in flow order
    delete: list[str] = []
    status: FlowStatus | None  # None: unchanged


_LISTED = {
    "Pending": "pending_jobs",
    "Running": "running_jobs",
    "Completed": "completed_jobs",
    "Failed": "failed_jobs",
    "Terminated": "terminated_jobs",
}


def job_name(flow: JobFlow, step_name: str) -> str:
    return f"{flow.metadata.name}-{step_name}"


def step(flow: JobFlow, jobs: Mapping[str, str], phase: FlowPhase = "Pending") -> FlowStep:
    """One sync of a JobFlow in ``phase`` whose jobs have the given phases."""
    if phase == "Failed":
        return FlowStep(status=_status(flow, jobs, phase))
    if phase == "Succeed" and flow.spec.job_retain_policy == "delete":
        return FlowStep(delete=[name for name in _made(flow) if name in jobs], status=None)
    create = [
        (job_name(flow, f.name), f.name)
        for f in flow.spec.flows
        if job_name(flow, f.name) not in jobs and _ready(flow, f.depends_on.targets if f.depends_on else [], jobs)
    ]
    status = _status(flow, jobs, _next_phase(flow, jobs, phase))
    delete = []
    if status.phase == "Succeed" and flow.spec.job_retain_policy == "delete":
        delete = [name for name in _made(flow) if name in jobs]
    return FlowStep(create=create, delete=delete, status=status)


def _made(flow: JobFlow) -> list[str]:
    return [job_name(flow, f.name) for f in flow.spec.flows]


def _ready(flow: JobFlow, targets: list[str], jobs: Mapping[str, str]) -> bool:
    return all(jobs.get(job_name(flow, target)) == "Completed" for target in targets)


def _next_phase(flow: JobFlow, jobs: Mapping[str, str], phase: FlowPhase) -> FlowPhase:
    phases = list(jobs.values())
    failed = any(p in ("Failed", "Terminated") for p in phases)
    if phase == "Succeed":
        return phase
    if phase == "Running":
        completed = sum(p == "Completed" for p in phases)
        if completed == len(flow.spec.flows):
            return "Succeed"
        return "Failed" if failed else phase
    if any(p in ("Running", "Completed") for p in phases) and not any(p == "Failed" for p in phases):
        return "Running"
    return "Failed" if failed else "Pending"


def _status(flow: JobFlow, jobs: Mapping[str, str], phase: FlowPhase) -> FlowStatus:
    lists: dict[str, list[str]] = {field: [] for field in [*_LISTED.values(), "unknown_jobs"]}
    for name in sorted(jobs):
        lists[_LISTED.get(jobs[name], "unknown_jobs")].append(name)
    return FlowStatus(phase=phase, **lists)

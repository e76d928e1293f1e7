"""priority: job and task order by priority, lower-priority victims, starving below #tasks."""

from __future__ import annotations

from ..framework import JobOrder, JobOrderKey, JobStarving, NoArgs, Plugin, Preemptable, TaskOrder
from ..state import JobState, TaskState


def _cmp(a: int, b: int) -> int:
    return (a < b) - (a > b)  # higher first


class PriorityPlugin(Plugin[NoArgs], JobOrder, TaskOrder, Preemptable, JobStarving, JobOrderKey):
    NAME = "priority"

    def task_order(self, a: TaskState, b: TaskState) -> int:
        return _cmp(a.priority, b.priority)

    def job_order(self, a: JobState, b: JobState) -> int:
        return _cmp(a.priority, b.priority)

    def job_order_key(self, job: JobState) -> int:
        """Sort key agreeing with ``job_order``."""
        return -job.priority

    def preemptable(self, preemptor: TaskState, candidates: list[TaskState]) -> list[TaskState] | None:
        pj = preemptor.job
        assert pj is not None
        victims = []
        for c in candidates:
            cj = c.job
            assert cj is not None
            # Across jobs only job priorities count; inside a job, task priorities do.
            if (cj is not pj and cj.priority < pj.priority) or (cj is pj and c.priority < preemptor.priority):
                victims.append(c)
        return victims

    def job_starving(self, job: JobState) -> bool:
        return job.ready_num() + job.waiting_num() < len(job.tasks)

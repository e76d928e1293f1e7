"""gang: all-or-nothing by minMember (and per-role minTaskMember), never breaks a gang by eviction."""

from __future__ import annotations

from ..framework import (
    JobOrder,
    JobOrderKey,
    JobPipelined,
    JobReady,
    JobStarving,
    JobValid,
    NoArgs,
    Plugin,
    Preemptable,
    Reclaimable,
    SessionView,
)
from ..state import READY, VALID, JobState, TaskState
from ..status import SUCCESS, Status, unresolvable, unschedulable

_PIPELINED = READY | {"Pipelined"}


class GangPlugin(
    Plugin[NoArgs], JobOrder, Preemptable, Reclaimable, JobReady, JobPipelined, JobStarving, JobValid, JobOrderKey
):
    NAME = "gang"

    def job_valid(self, job: JobState) -> Status:
        if not job.role_check(VALID, with_be=False):
            return unresolvable(
                "NotEnoughPodsOfTask: not enough valid pods of each task for gang-scheduling", self.NAME
            )
        valid = job.valid_num()
        if valid < job.min_member:
            return unresolvable(
                f"NotEnoughPods: not enough valid tasks for gang-scheduling, valid: {valid}, min: {job.min_member}",
                self.NAME,
            )
        return SUCCESS

    def job_ready(self, job: JobState) -> bool:
        return job.role_check(READY, with_be=True) and job.is_ready()

    def job_pipelined(self, job: JobState) -> Status:
        """Permit (``SUCCESS``) when pods placed or pipelined make the gang, else reject."""
        if not job.role_check(_PIPELINED, with_be=True):
            return unschedulable("NotEnoughPipelinedPodsOfTask: a task lacks its minimum of placed pods", self.NAME)
        have = job.waiting_num() + job.ready_num() + job.pending_be
        if have < job.min_member:
            return unschedulable(
                f"NotEnoughPipelinedPods: placed or pipelined: {have}, min: {job.min_member}", self.NAME
            )
        return SUCCESS

    def job_starving(self, job: JobState) -> bool:
        return job.waiting_num() + job.ready_num() < job.min_member

    def job_order(self, a: JobState, b: JobState) -> int:
        ra, rb = a.is_ready(), b.is_ready()
        if ra == rb:
            return 0
        return 1 if ra else -1

    def job_order_key(self, job: JobState) -> bool:
        """Sort key agreeing with ``job_order``: not-ready (False) first."""
        return job.is_ready()

    def _victims(self, candidates: list[TaskState]) -> list[TaskState]:
        occupied: dict[int, int] = {}
        victims = []
        for c in candidates:
            job = c.job
            assert job is not None
            left = occupied.get(id(job), job.ready_num())
            if left > job.min_member:
                occupied[id(job)] = left - 1
                victims.append(c)
            else:
                occupied[id(job)] = left
        return victims

    def preemptable(self, preemptor: TaskState, candidates: list[TaskState]) -> list[TaskState] | None:
        return self._victims(candidates)

    def reclaimable(self, reclaimer: TaskState, candidates: list[TaskState]) -> list[TaskState] | None:
        return self._victims(candidates)

    def on_session_close(self, ssn: SessionView) -> None:
        for job in ssn.jobs.values():
            if job.is_ready():
                continue
            schedulable = job.ready_num() + job.n("Allocated")
            unready = max(job.min_member - schedulable, 0)
            detail = "; ".join(f"{k}: {v.message}" for k, v in sorted(job.fit_errors.items()))
            reason = job.enqueue_reason or detail or ("no pods yet" if not job.tasks else "not enough resources")
            ssn.unschedulable[job.name] = f"{unready}/{len(job.tasks)} tasks in gang unschedulable: {reason}"

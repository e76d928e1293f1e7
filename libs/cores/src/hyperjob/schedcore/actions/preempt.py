"""preempt: within one queue, starving jobs evict lower-priority work (spec 1d "preempt").

Phase 1 (between jobs) uses one statement per preemptor job, committed iff JobPipelined;
phase 2 lets a job's pending tasks evict its own lower-priority tasks. Jobs with a network
topology request never preempt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..state import JobState, TaskState
from ..statement import Statement
from .evict import enough, evict_until, pending_tasks, starving_jobs
from .util import PriorityQueue

if TYPE_CHECKING:
    from ..session import Session

_PREEMPTABLE = ("Running", "Bound")


def preempt(ssn: Session) -> None:
    by_queue = starving_jobs(ssn)
    if not by_queue:
        return
    releasable = ssn.releasable()
    queues = PriorityQueue(ssn.queue_before, [ssn.queues[n] for n in by_queue])
    while not queues.empty():
        queue = queues.pop()
        jobs = PriorityQueue(ssn.job_before, [j for j in by_queue[queue.name] if not j.has_topology])
        under_request = []
        while not jobs.empty():
            job = jobs.pop()
            under_request.append(job)
            stmt = Statement(ssn)
            tasks = pending_tasks(ssn, job)
            while ssn.job_starving(job) and not tasks.empty():
                t = tasks.pop()
                preempt_task(ssn, stmt, t, _other_job_of_its_queue(job), releasable)
            if ssn.job_pipelined(job).is_success:
                stmt.commit()
            else:
                stmt.discard()
        for job in under_request:
            tasks = pending_tasks(ssn, job)
            while not tasks.empty():
                t = tasks.pop()
                stmt = Statement(ssn)
                assigned = preempt_task(ssn, stmt, t, _of_job(job), releasable)
                stmt.commit()
                if not assigned:
                    break


def _other_job_of_its_queue(job: JobState) -> Callable[[TaskState], bool]:
    """Victims for a starving job: pods of other jobs in its queue."""
    return lambda v: v.job is not None and v.job is not job and v.job.queue == job.queue


def _of_job(job: JobState) -> Callable[[TaskState], bool]:
    """Victims for an under-request job: its own pods."""
    return lambda v: v.job is job


def preempt_task(
    ssn: Session, stmt: Statement, t: TaskState, allowed: Callable[[TaskState], bool], releasable: np.ndarray
) -> bool:
    """Try nodes best-scored first; evict victims until ``t`` fits, then pipeline it there."""
    if t.info.preemption_policy == "Never" or t.status != "Pending":
        return False
    assert t.job is not None
    queue = ssn.queues[t.job.queue]
    # ``releasable`` is taken once per action: stale, it only over-estimates, so no node is lost.
    for row in ssn.placement.ranked(t, ssn.nodes.fidle + releasable):
        candidates = [
            v
            for v in ssn.nodes.tasks[row]
            if v.status in _PREEMPTABLE and v.info.preemptable and (v.best_effort or not t.best_effort) and allowed(v)
        ]
        if not candidates:
            continue
        victims = ssn.preemptable(t, candidates)
        if not enough(ssn, t, row, victims):
            continue

        def fits(row: int = row) -> bool:
            return ssn.allocatable(queue, t).is_success and ssn.placement.fits_future(t, row)

        if evict_until(ssn, stmt, t, row, victims, fits, "preempt"):
            return True
    return False

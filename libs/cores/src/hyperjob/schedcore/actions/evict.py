"""Shared machinery of preempt and reclaim: victim order and the per-node eviction attempt."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..state import JobState, QueueState, TaskState
from .util import PriorityQueue

if TYPE_CHECKING:
    from ..session import Session
    from ..statement import EvictReason, Statement


def victim_queue(ssn: Session, victims: list[TaskState], preemptor: TaskState) -> PriorityQueue[TaskState]:
    """Volcano's BuildVictimsPriorityQueue: first popped is evicted first."""
    assert preemptor.job is not None
    pq = ssn.queues[preemptor.job.queue]

    def first(a: TaskState, b: TaskState) -> bool:
        ja, jb = a.job, b.job
        assert ja is not None and jb is not None
        if ja is jb:
            return not ssn.task_before(a, b)
        if ja.queue != jb.queue:
            return ssn.victim_queue_before(ssn.queues[ja.queue], ssn.queues[jb.queue], pq)
        return not ssn.job_before(ja, jb)

    return PriorityQueue(first, victims)


def enough(ssn: Session, t: TaskState, row: int, victims: list[TaskState]) -> bool:
    """ValidateVictims: FutureIdle plus everything the victims hold covers the request."""
    if not victims:
        return False
    free = ssn.nodes.fidle[row] + sum((v.req for v in victims), np.zeros(ssn.space.size))
    return ssn.space.less_equal(t.req, free)


def evict_until(
    ssn: Session,
    stmt: Statement,
    t: TaskState,
    row: int,
    victims: list[TaskState],
    fits: Callable[[], bool],
    reason: EvictReason,
) -> bool:
    """Evict victims in victim order until ``fits()``; pipeline ``t`` on ``row`` or roll back."""
    mark = stmt.mark()
    order = victim_queue(ssn, victims, t)
    while not order.empty() and not fits():
        stmt.evict(order.pop(), reason)
    if fits():
        stmt.pipeline(t, row)
        return True
    stmt.rollback_to(mark)
    return False


def starving_jobs(ssn: Session) -> dict[str, list[JobState]]:
    """Preemptor jobs by queue: admitted, valid, starving."""
    out: dict[str, list[JobState]] = {}
    for job in ssn.jobs.values():
        q: QueueState | None = ssn.queue_of(job)
        if q is None or job.phase == "Pending" or ssn.job_valid(job).rejects or not ssn.job_starving(job):
            continue
        out.setdefault(q.name, []).append(job)
    return out


def pending_tasks(ssn: Session, job: JobState) -> PriorityQueue[TaskState]:
    tasks = [t for t in job.tasks if t.status == "Pending" and not t.info.gated]
    return PriorityQueue(ssn.task_before, tasks)

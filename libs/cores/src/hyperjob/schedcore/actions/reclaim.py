"""reclaim: a queue below its share takes back resources from reclaimable queues above theirs.

Per starving job, one statement (committed iff JobPipelined); per pending task, nodes in name
order; on a node, victims are evicted in victim order only until the task fits, so a node that
already has room loses nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..state import QueueState, TaskState
from ..statement import Statement
from .evict import enough, evict_until, pending_tasks, starving_jobs
from .util import PriorityQueue

if TYPE_CHECKING:
    from ..session import Session


def reclaim(ssn: Session) -> None:
    by_queue = {name: PriorityQueue(ssn.job_before, jobs) for name, jobs in starving_jobs(ssn).items()}
    if not by_queue:
        return
    queues = PriorityQueue(ssn.queue_before, [ssn.queues[n] for n in by_queue])
    releasable = ssn.releasable()
    while not queues.empty():
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = by_queue[queue.name]
        if jobs.empty():
            continue
        job = jobs.pop()
        stmt = Statement(ssn)
        tasks = pending_tasks(ssn, job)
        while ssn.job_starving(job) and not tasks.empty():
            t = tasks.pop()
            if t.info.preemption_policy == "Never" or not ssn.preemptive(queue, [t]):
                continue
            reclaim_task(ssn, stmt, t, queue, releasable)
        if ssn.job_pipelined(job).is_success:
            stmt.commit()
        else:
            stmt.discard()
        queues.push(queue)


def reclaim_task(ssn: Session, stmt: Statement, t: TaskState, queue: QueueState, releasable: np.ndarray) -> bool:
    room = ssn.nodes.fidle + releasable  # stale releasable only over-estimates: no node is lost
    dims = np.flatnonzero(t.req > 0)
    fits = (room[:, dims] >= t.req[dims] - ssn.space.eps[dims]).all(axis=1)
    for row in np.flatnonzero(ssn.placement.static_mask(t) & fits).tolist():
        reclaimees = [
            v
            for v in ssn.nodes.tasks[row]
            if v.status == "Running" and v.info.preemptable and _other_reclaimable(ssn, v, queue)
        ]
        if not reclaimees:
            continue
        victims = ssn.reclaimable(t, reclaimees)
        if not enough(ssn, t, row, victims):
            continue

        def fits(row: int = row) -> bool:
            return ssn.placement.fits_future(t, row)

        if evict_until(ssn, stmt, t, row, victims, fits, "reclaim"):
            return True
    return False


def _other_reclaimable(ssn: Session, v: TaskState, queue: QueueState) -> bool:
    assert v.job is not None
    q = ssn.queues.get(v.job.queue)
    return q is not None and q.name != queue.name and q.info.reclaimable

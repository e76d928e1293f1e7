"""enqueue: admit Pending podgroups (phase -> Inqueue) one job per queue pop, round robin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..state import JobState, QueueState
from ..status import SUCCESS
from .util import PriorityQueue

if TYPE_CHECKING:
    from ..session import Session


def enqueue(ssn: Session) -> None:
    """Try every Pending job once; a rejected job does not stop later, smaller ones."""
    per_queue: dict[str, PriorityQueue[JobState]] = {}
    for job in ssn.jobs.values():
        q = ssn.queue_of(job)
        if q is None or job.phase != "Pending":
            continue
        per_queue.setdefault(q.name, PriorityQueue(ssn.job_before, key=ssn.job_key())).push(job)
    queues: PriorityQueue[QueueState] = PriorityQueue(ssn.queue_before, [ssn.queues[n] for n in per_queue])
    while not queues.empty():
        queue = queues.pop()
        jobs = per_queue[queue.name]
        if jobs.empty():
            continue
        job = jobs.pop()
        if not queue.is_open:
            # Volcano's plugins reject a non-Open queue; we hold it here too so that a conf
            # without proportion/capacity still gives a closed queue nothing new.
            job.enqueue_reason = f"queue {queue.name} is {queue.info.state}"
        else:
            admit(ssn, job)
        queues.push(queue)


def admit(ssn: Session, job: JobState) -> None:
    """Inqueue when the plugins' votes let it in (a job without minResources always); else it
    stays Pending with the rejecting plugin's reason, which its podgroup's message shows."""
    verdict = SUCCESS if job.min_req is None else ssn.job_enqueueable(job)
    if verdict.rejects:
        job.enqueue_reason = verdict.message
        return
    ssn.job_enqueued(job)
    job.phase = "Inqueue"
    job.enqueue_reason = ""

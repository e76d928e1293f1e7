"""backfill: place best-effort pending tasks (empty requests) without any gang check."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from ..state import JobState, TaskState
from ..statement import Statement
from ..status import unschedulable

if TYPE_CHECKING:
    from ..session import Session

_V = TypeVar("_V")


def backfill(ssn: Session) -> None:
    jobs = [
        j
        for j in ssn.jobs.values()
        if j.phase != "Pending"
        and ssn.queue_of(j) is not None
        and any(t.status == "Pending" and t.best_effort for t in j.tasks)
    ]
    jobs = [j for j in jobs if not ssn.job_valid(j).rejects]
    queue_rank = sorted({j.queue for j in jobs}, key=lambda n: _QueueKey(ssn, n))
    for qname in queue_rank:
        queue = ssn.queues[qname]
        if not queue.is_open:
            continue
        for job in sorted((j for j in jobs if j.queue == qname), key=lambda j: _JobKey(ssn, j)):
            tasks = sorted(
                (t for t in job.tasks if t.status == "Pending" and t.best_effort and not t.info.gated),
                key=lambda t: _TaskKey(ssn, t),
            )
            for t in tasks:
                choice = ssn.placement.best(t)
                if choice is None:
                    job.fit_errors[t.role or t.name] = ssn.placement.diagnose(t)
                    continue
                if not choice[1]:
                    job.fit_errors[t.role or t.name] = unschedulable("the best-effort pod waits for releasing pods")
                    continue
                stmt = Statement(ssn)
                stmt.allocate(t, choice[0])
                stmt.commit()


class _Key(Generic[_V]):
    __slots__ = ("ssn", "v")

    def __init__(self, ssn: Session, v: _V) -> None:
        self.ssn, self.v = ssn, v


class _QueueKey(_Key[str]):
    def __lt__(self, other: _QueueKey) -> bool:
        return self.ssn.queue_before(self.ssn.queues[self.v], self.ssn.queues[other.v])


class _JobKey(_Key[JobState]):
    def __lt__(self, other: _JobKey) -> bool:
        return self.ssn.job_before(self.v, other.v)


class _TaskKey(_Key[TaskState]):
    def __lt__(self, other: _TaskKey) -> bool:
        return self.ssn.task_before(self.v, other.v)

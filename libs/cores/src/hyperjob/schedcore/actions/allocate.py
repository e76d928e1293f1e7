"""allocate: place pending tasks job by job under gang's commit rule (spec 1d "allocate").

Per turn: pop the best queue (QueueOrder; an overused queue is dropped for the cycle), pop its
best job (JobOrder), place its tasks in TaskOrder into one Statement until the job is ready,
then commit if JobReady, keep if JobPipelined, discard otherwise. A job a ``GangDomains``
plugin wants (network topology) is tried domain by domain instead, as that plugin lays out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..framework import Domain, GangDomains
from ..state import READY, JobState, QueueState, TaskState
from ..statement import Statement
from ..status import unresolvable, unschedulable
from .util import PriorityQueue

if TYPE_CHECKING:
    from ..session import Session


def candidate_jobs(ssn: Session, promote_pending: bool) -> dict[str, PriorityQueue[JobState]]:
    """Jobs allocate may work on, by queue: admitted, valid, with pending non-best-effort tasks."""
    per_queue: dict[str, PriorityQueue[JobState]] = {}
    for job in ssn.jobs.values():
        if job.phase == "Pending":
            if not promote_pending:
                continue
            job.phase = "Inqueue"
        q = ssn.queue_of(job)
        if q is None or not any(t.status == "Pending" and not t.best_effort and not t.info.gated for t in job.tasks):
            continue
        validity = ssn.job_valid(job)
        if validity.rejects:
            job.fit_errors["job"] = validity
            continue
        per_queue.setdefault(q.name, PriorityQueue(ssn.job_before, key=ssn.job_key())).push(job)
    return per_queue


def pending_queue(ssn: Session, job: JobState) -> PriorityQueue[TaskState]:
    tasks = [t for t in job.tasks if t.status == "Pending" and not t.best_effort and not t.info.gated]
    return PriorityQueue(ssn.task_before, tasks)


def allocate(ssn: Session) -> None:
    per_queue = candidate_jobs(ssn, promote_pending="enqueue" not in ssn.conf.actions)
    queues: PriorityQueue[QueueState] = PriorityQueue(ssn.queue_before, [ssn.queues[n] for n in per_queue])
    pending: dict[str, PriorityQueue[TaskState]] = {}
    while not queues.empty():
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = per_queue[queue.name]
        if jobs.empty():
            continue
        job = jobs.pop()
        if not queue.is_open:
            job.fit_errors["queue"] = unschedulable(f"queue {queue.name} is {queue.info.state}")
            queues.push(queue)
            continue
        tasks = pending.get(job.name)
        if tasks is None:
            tasks = pending[job.name] = pending_queue(ssn, job)
        stmt = Statement(ssn)
        by_domains = ssn.domains_for(job)
        if by_domains is not None:
            allocate_in_domains(ssn, stmt, job, queue, tasks, by_domains)
        elif _hard_topology_unserved(job):
            job.fit_errors["topology"] = _NO_TOPOLOGY_PLUGIN
        else:
            allocate_tasks(ssn, stmt, job, queue, tasks, jobs)
        commit_rule(ssn, stmt, job)
        queues.push(queue)


def commit_rule(ssn: Session, stmt: Statement, job: JobState) -> None:
    """Gang's rule: commit when ready, keep (unbound) when pipelined, else roll back (the job's
    reasons are then its tasks' placement failures, which say more than the vote's)."""
    if ssn.job_ready(job):
        stmt.commit()
    elif ssn.job_pipelined(job).rejects:
        stmt.discard()


def allocate_tasks(
    ssn: Session,
    stmt: Statement,
    job: JobState,
    queue: QueueState,
    tasks: PriorityQueue[TaskState],
    jobs: PriorityQueue[JobState] | None,
    domain: Domain | None = None,
) -> None:
    """Volcano's allocateResourcesForTasks (within ``domain``'s nodes when given); with ``jobs``
    None the turn does not stop at ready."""
    placement = ssn.placement
    restrict, key = (domain.rows, domain.key) if domain is not None else (None, None)
    while not tasks.empty():
        t = tasks.pop()
        quota = ssn.allocatable(queue, t)
        if quota.rejects:
            job.fit_errors.setdefault("queue", quota)
            continue
        if t.role and t.role in job.failed_roles:
            continue
        choice = placement.best(t, restrict, key)
        if choice is None:
            job.fit_errors[t.role or t.name] = placement.diagnose(
                t, restrict, f"node(s) outside {domain.name}" if domain else ""
            )
            if t.role:
                job.failed_roles.add(t.role)
            if need_continue(job):
                continue
            break
        row, on_idle = choice
        if on_idle:
            stmt.allocate(t, row)
        else:
            stmt.pipeline(t, row)
        if jobs is not None and ssn.job_ready(job) and not tasks.empty():
            jobs.push(job)
            break


def allocate_in_domains(
    ssn: Session,
    stmt: Statement,
    job: JobState,
    queue: QueueState,
    tasks: PriorityQueue[TaskState],
    plugin: GangDomains,
) -> None:
    """Try the gang in each of the plugin's domains, one rolled-back attempt each, until the
    job is ready or pipelined; then over every node if the plan allows it."""
    todo: list[TaskState] = []
    while not tasks.empty():
        todo.append(tasks.pop())
    plan = plugin.job_domains(job, todo)
    for domain in plan.domains:
        mark = stmt.mark()
        job.failed_roles.clear()  # a misfit in one domain says nothing about the next
        pending = PriorityQueue(ssn.task_before, [t for t in todo if t.status == "Pending"])
        allocate_tasks(ssn, stmt, job, queue, pending, None, domain)
        if ssn.job_ready(job) or ssn.job_pipelined(job).is_success:
            return
        stmt.rollback_to(mark)
    if not plan.fallback:
        job.fit_errors["topology"] = plan.unplaced
        return
    job.failed_roles.clear()
    allocate_tasks(ssn, stmt, job, queue, PriorityQueue(ssn.task_before, todo), None)


_NO_TOPOLOGY_PLUGIN = unresolvable(
    "the job's networkTopology is hard but the scheduler conf enables no network-topology-aware plugin"
)


def _hard_topology_unserved(job: JobState) -> bool:
    """A hard topology request no plugin serves: the job waits rather than land anywhere."""
    nt = job.info.network_topology
    return nt is not None and nt.mode == "hard"


def need_continue(job: JobState) -> bool:
    """Volcano's NeedContinueAllocating after a task found no node."""
    if job.min_member == len(job.tasks):
        return False
    if job.min_member < job.task_min_total:
        alive = sum(1 for t in job.tasks if t.status == "Pending" and t.role not in job.failed_roles)
        return job.ready_num() + alive >= job.min_member
    for role in job.failed_roles:
        need = job.task_min.get(role, 0)
        rc = job.role_counts.get(role, {})
        if need > 0 and sum(rc.get(s, 0) for s in READY) < need:
            return False
    return True

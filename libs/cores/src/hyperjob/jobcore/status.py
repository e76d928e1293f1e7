"""Pod counters derived from the record (Volcano's job status counts, ``events.PodCounts``), never stored."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from hyperjob.events import PodCounts

from .model import JobRecord, PodRecord

_FIELD = {
    "Pending": "pending",
    "Running": "running",
    "Succeeded": "succeeded",
    "Failed": "failed",
    "Terminating": "terminating",
}


def counts(record: JobRecord) -> PodCounts:
    """pending / running / succeeded / failed / terminating over every pod the job has."""
    return _count(record.pods.values())


def task_counts(record: JobRecord) -> dict[str, PodCounts]:
    """The same counters per task (every task present, possibly all zero)."""
    by_task: dict[str, list[PodRecord]] = {task.name: [] for task in record.spec.tasks}
    for pod in record.pods.values():
        by_task.setdefault(pod.task, []).append(pod)
    return {task: _count(pods) for task, pods in by_task.items()}


def total_replicas(record: JobRecord) -> int:
    return sum(task.replicas for task in record.spec.tasks)


def _count(pods: Iterable[PodRecord]) -> PodCounts:
    tally = dict.fromkeys(_FIELD.values(), 0)
    for pod in pods:
        tally[_FIELD[pod.status.phase]] += 1
    return PodCounts(**tally)


class JobStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Volcano's ``job.status`` in snake_case: what a status reporter publishes about a job."""

    phase: str
    version: int
    retry_count: int
    min_available: int
    counts: PodCounts
    task_status_count: dict[str, PodCounts]


def job_status(record: JobRecord) -> JobStatus:
    return JobStatus(
        phase=record.phase,
        version=record.version,
        retry_count=record.retry_count,
        min_available=record.spec.min_available,
        counts=counts(record),
        task_status_count=task_counts(record),
    )

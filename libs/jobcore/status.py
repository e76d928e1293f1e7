"""Pod counters derived from the record (Volcano's job status counts), never stored."""

from __future__ import annotations

from .model import Counts, JobRecord, PodRecord

_FIELD = {"Pending": "pending", "Running": "running", "Succeeded": "succeeded", "Failed": "failed",
          "Terminating": "terminating"}


def counts(record: JobRecord) -> Counts:
    """pending / running / succeeded / failed / terminating over every pod the job has."""
    return _count(record.pods.values())


def task_counts(record: JobRecord) -> dict[str, Counts]:
    """The same counters per task (every task present, possibly all zero)."""
    by_task: dict[str, list[PodRecord]] = {task.name: [] for task in record.spec.tasks}
    for pod in record.pods.values():
        by_task.setdefault(pod.task, []).append(pod)
    return {task: _count(pods) for task, pods in by_task.items()}


def total_replicas(record: JobRecord) -> int:
    return sum(task.replicas for task in record.spec.tasks)


def _count(pods: object) -> Counts:
    tally = dict.fromkeys(_FIELD.values(), 0)
    for pod in pods:  # type: ignore[attr-defined]
        tally[_FIELD[pod.status.phase]] += 1
    return Counts(**tally)

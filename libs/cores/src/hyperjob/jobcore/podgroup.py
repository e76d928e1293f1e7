"""PodGroup derivation (``job_controller_actions.go``: createOrUpdatePodGroup, calcPGMinResources)."""

from __future__ import annotations

from decimal import Decimal

from hyperjob import api

from .model import JobRecord, Phase, PodGroupInfo
from .pods import pod_request_exact

# A job in these phases has ended or is ending: KillJob deleted its podgroup, and none comes back
# unless the job is resumed (a new incarnation, with a new podgroup).
ENDING_PHASES: frozenset[Phase] = frozenset(
    {"Aborting", "Aborted", "Completing", "Completed", "Terminating", "Terminated", "Failed"}
)


def derive_podgroup(record: JobRecord) -> PodGroupInfo:
    """The PodGroup of an admitted job: named after the job, version-stamped for ``PodGroupAdmitted``.

    ``min_member`` = job minAvailable; ``min_task_member[task]`` = task minAvailable.
    ``min_resources`` is the sum of *container requests* (effective pod requests) of the pods
    ``minimum_pods`` lists, in base units; it does **not** include the implicit ``pods: 1`` each
    pod requests (the simulator's output shows cpu/memory only, and Volcano's quota checks skip
    ``pods``). Resources that sum to zero are kept (``memory: 0``).
    """
    spec = record.spec
    total: dict[str, Decimal] = {}
    for task, count in minimum_pods(record):
        per_pod = pod_request_exact(task.template.spec)
        for name, amount in per_pod.items():
            total[name] = total.get(name, Decimal(0)) + amount * count
    return PodGroupInfo(
        name=record.name,
        namespace=record.namespace,
        min_member=spec.min_available,
        min_task_member={task.name: task.min_available or 0 for task in spec.tasks},
        min_resources={name: float(amount) for name, amount in total.items()},
        queue=spec.queue,
        priority_class_name=spec.priority_class_name,
        priority=record.priority,
        job_version=record.version,
        network_topology=spec.network_topology,
    )


def shown_phase(record: JobRecord, scheduled: str | None, incarnation: str | None) -> str:
    """The phase of a job's podgroup as ``get podgroups``, ``get queues`` and the queue metrics
    show it; ``scheduled`` is the phase its cluster-scheduler last set, for ``incarnation``.

    A finished (or finishing) job's podgroup is ``Completed``: its scheduler no longer looks at it
    once KillJob deleted it, so the phase it last set (``Running``) is not true any more. A phase
    set for an earlier incarnation (before a restart) says nothing of the current podgroup, which
    is ``Pending`` until its scheduler sets one.
    """
    if record.phase in ENDING_PHASES:
        return "Completed"
    if scheduled is None or incarnation != f"{record.uid}/{record.version}":
        return "Pending"
    return scheduled


def minimum_pods(record: JobRecord) -> list[tuple[api.TaskSpec, int]]:
    """How many pods of each task make up minResources, tasks in PriorityClass order (highest first).

    If job minAvailable < Σ task minAvailable: the first minAvailable pods in that order. Otherwise
    each task's minAvailable pods, then the remaining replicas in that order up to job minAvailable.
    The sort is stable, so equal priorities keep the job's task order.
    """
    tasks = sorted(
        record.spec.tasks, key=lambda t: -record.priority_classes.get(t.template.spec.priority_class_name, 0)
    )
    wanted = record.spec.min_available
    task_min_total = sum(t.min_available or 0 for t in tasks)
    counts: dict[str, int] = {t.name: 0 for t in tasks}
    if wanted < task_min_total:
        left = wanted
        for task in tasks:
            counts[task.name] = min(task.replicas, left)
            left -= counts[task.name]
    else:
        for task in tasks:
            counts[task.name] = task.min_available or 0
        left = wanted - task_min_total
        for task in tasks:
            extra = min(task.replicas - counts[task.name], left)
            counts[task.name] += extra
            left -= extra
    return [(task, counts[task.name]) for task in tasks if counts[task.name] > 0]

"""Building the scheduler's view of a cluster from the objects the rest of the system keeps.

One translation, two callers: the cluster-scheduler service (from the store) and the simulator
(from its world) both turn Queue manifests, jobcore's podgroups and pod records into schedcore's
``QueueInfo``, ``JobInfo`` and ``TaskInfo`` here, so what the simulator shows is what production
schedules. Pure.
"""

from __future__ import annotations

import api
import schedcore
from api.quantity import parse_resource_list
from jobcore import model as jm

# jobcore pod phase -> schedcore task status (a pod being deleted still holds its node).
TASK_STATUS = {"Pending": "Pending", "Running": "Running", "Succeeded": "Succeeded", "Failed": "Failed",
               "Terminating": "Releasing"}


def queue_info(queue: api.Queue, state: str, created: float) -> schedcore.QueueInfo:
    spec = queue.spec
    return schedcore.QueueInfo(
        name=queue.metadata.name, weight=float(spec.weight), capability=parse_resource_list(spec.capability),
        deserved=parse_resource_list(spec.deserved), guarantee=parse_resource_list(spec.guarantee.resource),
        reclaimable=spec.reclaimable is not False, priority=spec.priority, parent=spec.parent,
        state=state, created=created)  # type: ignore[arg-type]


def default_queue() -> api.Queue:
    """The queue ``default`` (weight 1, reclaimable) that always exists, as in Volcano."""
    return api.Queue(metadata=api.ObjectMeta(name=api.DEFAULT_QUEUE), spec=api.QueueSpec(weight=1, reclaimable=True))


def task_info(pod: jm.PodRecord, *, status: str, node: str | None, created: float = 0.0,
              nominated: str = "") -> schedcore.TaskInfo:
    """A pod as a task, in the state its driver sees it (``status`` is schedcore's: Pending, Bound,
    Running, Releasing, Succeeded, Failed; ``TASK_STATUS`` maps a pod phase to it)."""
    s = pod.scheduling
    return schedcore.TaskInfo(
        name=pod.name, job=pod.job, role=pod.task, index=pod.index,
        request={k: v for k, v in s.request.items() if k != "pods"},  # schedcore adds the pods slot itself
        status=status, node=node,  # type: ignore[arg-type]
        priority=s.priority, preemptable=s.preemptable, node_selector=dict(s.node_selector), affinity=s.affinity,
        tolerations=list(s.tolerations), preemption_policy=s.preemption_policy, namespace=pod.namespace,
        priority_class=s.priority_class_name, created=created or pod.status.created_at, nominated_node=nominated)


def job_info(pg: jm.PodGroupInfo, *, phase: str, created: float, tasks: list[schedcore.TaskInfo]) -> schedcore.JobInfo:
    return schedcore.JobInfo(
        name=pg.name, queue=pg.queue, priority=pg.priority, min_member=pg.min_member,
        min_task_member=dict(pg.min_task_member), min_resources=dict(pg.min_resources), phase=phase,  # type: ignore[arg-type]
        created=created, network_topology=pg.network_topology, tasks=tasks, namespace=pg.namespace)

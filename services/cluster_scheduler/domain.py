"""Pure parts of a cycle: the snapshot from stored records, node health, and the capacity summary.

Node health (from the node-agents' telemetry, judged by ``hwprobe.node_health``) reaches the
scheduler as two taints with clear names, so schedcore's predicates keep new pods off sick nodes
without a schedcore feature: ``hyperjob.io/gpu-unhealthy`` (a GPU with uncorrectable ECC errors or
a fatal Xid) and ``hyperjob.io/fabric-unhealthy`` (an InfiniBand port down), both ``NoSchedule``
so running pods stay. Pods the taint does not concern get an implicit toleration in the snapshot:
pods that request no GPU tolerate the GPU taint, and pods of single-pod jobs the fabric taint.
A node is back as soon as its telemetry is healthy again.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

import api
import hwprobe
import records
import schedcore
import snapshots
from jobcore import model as jm

from .summary import FABRIC_UNHEALTHY, GPU_UNHEALTHY, is_accelerator


class ClusterState(msgspec.Struct, kw_only=True):
    """What one cycle read from the store."""

    nodes: dict[str, records.NodeDoc]
    queues: dict[str, records.QueueDoc]
    podgroups: dict[str, jm.PodGroupInfo]
    jobs: dict[str, jm.JobRecord]
    phases: dict[str, str]
    bound: dict[str, str]  # pod -> node, from the resource accounting
    nominated: dict[str, str] = {}
    stale_phases: list[str] = []  # phase documents of jobs that are gone
    gates: dict[str, records.GateDoc] = {}  # jobs of a cross-cluster gang
    reservations: dict[str, records.ReservationDoc] = {}

    def reservation(self, job: str) -> records.ReservationDoc | None:
        """The reservation state of a gang member (None: not a gang member, schedule as usual)."""
        if job not in self.gates:
            return None
        return self.reservations.get(job, records.ReservationDoc())


HEALTH_TAINTS = (GPU_UNHEALTHY, FABRIC_UNHEALTHY)


def health_taints(health: hwprobe.NodeHealth) -> list[dict[str, str]]:
    """The taints that keep new GPU / multi-node pods off a node, in a fixed order."""
    taints = []
    if not health.gpu_ok:
        taints.append({"key": GPU_UNHEALTHY, "value": "-".join(f"gpu{i}" for i in health.sick_gpus),
                       "effect": "NoSchedule"})
    if not health.fabric_ok:
        taints.append({"key": FABRIC_UNHEALTHY, "value": "-".join(p.replace("/", ".p") for p in health.down_ports),
                       "effect": "NoSchedule"})
    return taints


def health_tolerations(request: Mapping[str, float], job_pods: int) -> list[api.Toleration]:
    """What a pod may ignore: GPU faults when it wants no GPU, fabric faults when its job is one pod."""
    out = []
    if not any(amount > 0 for resource, amount in request.items() if is_accelerator(resource)):
        out.append(api.Toleration(key=GPU_UNHEALTHY, operator="Exists", effect="NoSchedule"))
    if job_pods <= 1:
        out.append(api.Toleration(key=FABRIC_UNHEALTHY, operator="Exists", effect="NoSchedule"))
    return out


def _has_health_taint(node: records.NodeDoc) -> bool:
    return any(t.get("key") in HEALTH_TAINTS for t in node.taints)


def incarnation(record: jm.JobRecord) -> str:
    """Which podgroup of a job a phase belongs to: a restart (new version) or a new job of the
    same name (new uid) starts from Pending."""
    return f"{record.uid}/{record.version}"


def current_phases(docs: dict[str, records.PodGroupPhaseDoc], jobs: dict[str, jm.JobRecord]) -> dict[str, str]:
    return {name: doc.phase for name, doc in docs.items()
            if name in jobs and doc.incarnation == incarnation(jobs[name])}


def snapshot(state: ClusterState, now: float) -> schedcore.Snapshot:
    nodes = [schedcore.NodeInfo(name=n.name, allocatable=n.allocatable, labels=n.labels,
                                taints=[msgspec.convert(t, api.Taint) for t in n.taints],
                                unschedulable=n.unschedulable, ready=n.ready)
             for n in sorted(state.nodes.values(), key=lambda n: n.name)]
    queues = [snapshots.queue_info(api.decode(q.manifest), q.state, q.created)  # type: ignore[arg-type]
              for q in state.queues.values()]
    if api.DEFAULT_QUEUE not in state.queues:
        queues.append(snapshots.queue_info(snapshots.default_queue(), "Open", 0.0))
    sick = any(_has_health_taint(n) for n in state.nodes.values())
    jobs = [snapshots.job_info(pg, phase=state.phases.get(name, "Pending"), created=state.jobs[name].created_at,
                               tasks=_tasks(state, state.jobs[name], sick))
            for name, pg in sorted(state.podgroups.items()) if name in state.jobs]
    return schedcore.Snapshot(nodes=nodes, queues=sorted(queues, key=lambda q: (q.created, q.name)), jobs=jobs, now=now)


def _tasks(state: ClusterState, record: jm.JobRecord, sick: bool = False) -> list[schedcore.TaskInfo]:
    tasks = []
    for pod in sorted(record.pods.values(), key=lambda p: p.name):
        node = state.bound.get(pod.name)
        if pod.phase == "Pending" and node is not None:
            # Bound by us, not yet reported running by its node.
            tasks.append(snapshots.task_info(pod, status="Bound", node=node))
        elif pod.phase == "Terminating" and node is None:
            continue  # never placed: it holds nothing
        else:
            tasks.append(snapshots.task_info(pod, status=snapshots.TASK_STATUS[pod.phase], node=pod.node or node,
                                             nominated=state.nominated.get(pod.name, "")))
    if sick:  # only then: tolerations take tasks off schedcore's fast path
        tasks = [msgspec.structs.replace(t, tolerations=[*t.tolerations, *health_tolerations(t.request, len(record.pods))])
                 for t in tasks]
    return tasks


def finished_or_gone(state: ClusterState) -> list[str]:
    """Bound pods whose resources go back to their node: finished, or no longer in any job."""
    live = {pod.name: pod for record in state.jobs.values() for pod in record.pods.values()}
    return sorted(name for name in state.bound
                  if name not in live or live[name].phase in ("Succeeded", "Failed"))


def lost_on_down_nodes(state: ClusterState) -> list[tuple[str, str]]:
    """(pod, node) for bound pods on nodes that stopped heartbeating."""
    return sorted((pod, node) for pod, node in state.bound.items()
                  if node in state.nodes and not state.nodes[node].ready)

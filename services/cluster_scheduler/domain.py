"""Pure parts of a cycle: the snapshot from stored records, and the capacity summary."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

import api
import records
import schedcore
import snapshots
from jobcore import model as jm


class ClusterState(msgspec.Struct, kw_only=True):
    """What one cycle read from the store."""

    nodes: dict[str, records.NodeDoc]
    queues: dict[str, records.QueueDoc]
    podgroups: dict[str, jm.PodGroupInfo]
    jobs: dict[str, jm.JobRecord]
    phases: dict[str, str]
    bound: dict[str, str]  # pod -> node, from the resource accounting
    nominated: dict[str, str] = {}


def snapshot(state: ClusterState, now: float) -> schedcore.Snapshot:
    nodes = [schedcore.NodeInfo(name=n.name, allocatable=n.allocatable, labels=n.labels,
                                taints=[msgspec.convert(t, api.Taint) for t in n.taints],
                                unschedulable=n.unschedulable, ready=n.ready)
             for n in sorted(state.nodes.values(), key=lambda n: n.name)]
    queues = [snapshots.queue_info(api.decode(q.manifest), q.state, q.created)  # type: ignore[arg-type]
              for q in state.queues.values()]
    if api.DEFAULT_QUEUE not in state.queues:
        queues.append(snapshots.queue_info(snapshots.default_queue(), "Open", 0.0))
    jobs = [snapshots.job_info(pg, phase=state.phases.get(name, "Pending"), created=state.jobs[name].created_at,
                               tasks=_tasks(state, state.jobs[name]))
            for name, pg in sorted(state.podgroups.items()) if name in state.jobs]
    return schedcore.Snapshot(nodes=nodes, queues=sorted(queues, key=lambda q: (q.created, q.name)), jobs=jobs, now=now)


def _tasks(state: ClusterState, record: jm.JobRecord) -> list[schedcore.TaskInfo]:
    tasks = []
    for pod in sorted(record.pods.values(), key=lambda p: p.name):
        node = state.bound.get(pod.name)
        if pod.phase == "Pending" and node is not None:
            # Bound by us, not yet reported running by its node.
            tasks.append(snapshots.task_info(pod, status="Bound", node=node))
        elif pod.phase == "Terminating" and node is None:
            continue  # never placed: it holds nothing
        else:
            tasks.append(snapshots.task_info(pod, node=pod.node or node, nominated=state.nominated.get(pod.name, "")))
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


def capacity(cluster: str, labels: Mapping[str, str], nodes: Mapping[str, records.NodeDoc],
             used: Mapping[str, Mapping[str, float]], now: float) -> records.ClusterDoc:
    """The summary the global-scheduler places by: allocatable and free over Ready nodes."""
    allocatable: dict[str, float] = {}
    free: dict[str, float] = {}
    largest: dict[str, float] = {}
    ready = [n for n in nodes.values() if n.ready and not n.unschedulable]
    for node in ready:
        node_free = {r: a - used.get(node.name, {}).get(r, 0.0) for r, a in node.allocatable.items()}
        for resource, amount in node.allocatable.items():
            allocatable[resource] = allocatable.get(resource, 0.0) + amount
            free[resource] = free.get(resource, 0.0) + node_free[resource]
            largest[resource] = max(largest.get(resource, 0.0), node_free[resource])
    return records.ClusterDoc(name=cluster, labels=dict(labels), allocatable=allocatable, free=free,
                              nodes=len(nodes), ready_nodes=len(ready), largest_node_free=largest, reported_at=now)

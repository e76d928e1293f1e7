"""Where each message travels: subjects ``<domain>.<aggregate>.<event>[.<cluster>]`` and the streams.

One stream per domain. Subjects routed to one cluster end in the cluster's name, so a
cluster-scheduler or job-controller consumes only its own cluster's work. Latest-value streams keep
one message per subject (heartbeats, capacity summaries), never an ever-growing log.
"""

from __future__ import annotations

import msgspec


class StreamDecl(msgspec.Struct, frozen=True, kw_only=True):
    """A stream as the bus should declare it. ``latest_only`` keeps one message per subject."""

    name: str
    subjects: list[str]
    latest_only: bool = False
    max_age_seconds: float = 7 * 24 * 3600.0


# API front door (splitter).
APPLY = "hj.manifest.apply"
DELETE = "hj.object.delete"
HYPERJOB_COMMAND = "hj.hyperjob.command"
HYPERJOB_STATUS = "hj.hyperjob.status"
HYPERJOB_DELETED = "hj.hyperjob.deleted"


def result(request_id: str) -> str:
    """Where the answer to one request is published (the client waits on it)."""
    return f"hj.result.{request_id}"


# Placement (global-scheduler) and per-cluster work.
PLACE_CHILD = "sched.child.place"
UNPLACE_CHILD = "sched.child.unplace"
OWNER_ADMITTED = "sched.owner.admitted"
MOVE_CHILD = "sched.child.move"
RESERVATION_HELD = "sched.reservation.held"


def gang_control(cluster: str) -> str:
    return f"sched.gang.control.{cluster}"
CHILD_WAITING = "sched.child.waiting"


def dispatch(cluster: str) -> str:
    return f"sched.child.dispatch.{cluster}"


def command_child(cluster: str) -> str:
    return f"sched.child.command.{cluster}"


def remove_child(cluster: str) -> str:
    return f"sched.child.remove.{cluster}"


def podgroup_phase(cluster: str) -> str:
    return f"sched.podgroup.phase.{cluster}"


def pod_bound(cluster: str) -> str:
    return f"sched.pod.bound.{cluster}"


def pod_evicted(cluster: str) -> str:
    return f"sched.pod.evicted.{cluster}"


def capacity(cluster: str) -> str:
    return f"capacity.cluster.{cluster}"


def job_phase(cluster: str) -> str:
    return f"job.phase.{cluster}"


def job_removed(cluster: str) -> str:
    return f"job.removed.{cluster}"


def pods_ready(cluster: str) -> str:
    return f"job.pods.ready.{cluster}"


def start_pod(cluster: str) -> str:
    return f"job.pod.start.{cluster}"


def stop_pod(cluster: str) -> str:
    return f"job.pod.stop.{cluster}"


def pod_phase(cluster: str) -> str:
    return f"node.pod.phase.{cluster}"


def heartbeat(cluster: str, node: str) -> str:
    return f"heartbeat.node.{cluster}.{node}"


def gpu_telemetry(cluster: str, node: str) -> str:
    return f"telemetry.gpu.{cluster}.{node}"


def fabric_telemetry(cluster: str, node: str) -> str:
    return f"telemetry.fabric.{cluster}.{node}"


def telemetry_of(cluster: str) -> str:
    """Every telemetry subject of one cluster's nodes (a filter for ``last_per_subject``)."""
    return f"telemetry.*.{cluster}.>"


def node_fault(cluster: str) -> str:
    return f"node.fault.{cluster}"


def dlq(durable: str) -> str:
    return f"dlq.{durable}"


STREAMS: list[StreamDecl] = [
    StreamDecl(name="HYPERJOB", subjects=["hj.>"]),
    StreamDecl(name="SCHED", subjects=["sched.>"]),
    StreamDecl(name="JOB", subjects=["job.>"]),
    StreamDecl(name="NODE", subjects=["node.>"]),
    StreamDecl(name="CAPACITY", subjects=["capacity.>"], latest_only=True),
    StreamDecl(name="HEARTBEAT", subjects=["heartbeat.>"], latest_only=True),
    StreamDecl(name="TELEMETRY", subjects=["telemetry.>"], latest_only=True, max_age_seconds=24 * 3600.0),
    StreamDecl(name="DLQ", subjects=["dlq.>"]),
]

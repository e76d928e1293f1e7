"""Where each message travels: subjects ``<domain>.<aggregate>.<event>[.<cluster>]`` and the streams.

One stream per domain. Subjects routed to one cluster end in the cluster's name, so a
cluster-scheduler or job-controller consumes only its own cluster's work. Latest-value streams
keep one message per subject (configuration, capacity summaries, job states, node status,
heartbeats, telemetry, changelogs): a reader gets the current value of everything by reading the
last message of each subject, and they never grow past the state they describe.
"""

from __future__ import annotations

import msgspec


class StreamDecl(msgspec.Struct, frozen=True, kw_only=True):
    """A stream as the bus should declare it. ``latest_only`` keeps one message per subject."""

    name: str
    subjects: list[str]
    latest_only: bool = False
    max_age_seconds: float = 7 * 24 * 3600.0


def token(name: str) -> str:
    """A name as one subject token: a ``.`` would split it (``%2E``, and ``%`` itself ``%25``)."""
    return name.replace("%", "%25").replace(".", "%2E")


# API front door (splitter). A request travels on ``<subject>.<namespace>`` (contract v2), so that
# NATS can grant a person some namespaces only; the bare subject is contract v1's form, kept for
# the cluster-scoped kinds (Queue, PriorityClass) and for whoever may act in every namespace.
APPLY = "hj.manifest.apply"
DELETE = "hj.object.delete"
HYPERJOB_COMMAND = "hj.hyperjob.command"
OBJECT_COMMAND = "hj.object.command"
REQUESTS = (APPLY, DELETE, HYPERJOB_COMMAND, OBJECT_COMMAND)
HYPERJOB_SPEC = "hj.hyperjob.spec"
HYPERJOB_STATUS = "hj.hyperjob.status"
HYPERJOB_DELETED = "hj.hyperjob.deleted"


def in_namespace(request: str, namespace: str) -> str:
    """The subject of a request about an object of ``namespace`` (``hj.object.delete.team-a``)."""
    return f"{request}.{token(namespace)}"


def namespace_of(request: str, subject: str) -> str | None:
    """The namespace a request's subject names; ``None`` for the bare (every-namespace) form."""
    if subject == request or not subject.startswith(request + "."):
        return None
    return subject[len(request) + 1 :]


def result(request_id: str) -> str:
    """Where the answer to one request is published (the client waits on it)."""
    return f"hj.result.{request_id}"


# Configuration (splitter → everyone), latest values.
def queue_config(name: str) -> str:
    return f"cfg.queue.{token(name)}"


def priority_class_config(name: str) -> str:
    return f"cfg.priorityclass.{token(name)}"


CONFIG_ALL = "cfg.>"

# Admission and placement (splitter ↔ global-scheduler).
OWNER_SUBMITTED = "sched.owner.submitted"
OWNER_WITHDRAWN = "sched.owner.withdrawn"
OWNER_ADMITTED = "sched.owner.admitted"
OWNER_LIFECYCLE = "sched.owner.lifecycle"
PLACE_CHILDREN = "sched.child.place"
UNPLACE_CHILD = "sched.child.unplace"
MOVE_CHILD = "sched.child.move"
GANG_RETRY = "sched.gang.retry"
CHILD_WAITING = "sched.child.waiting"
RESERVATION_HELD = "sched.reservation.held"


def dispatch(cluster: str) -> str:
    return f"sched.child.dispatch.{cluster}"


def command_child(cluster: str) -> str:
    return f"sched.child.command.{cluster}"


def remove_child(cluster: str) -> str:
    return f"sched.child.remove.{cluster}"


def gang_control(cluster: str) -> str:
    return f"sched.gang.control.{cluster}"


def fleet_lease(cluster: str) -> str:
    """The fleet's lease to one cluster (global-scheduler → its job-controller; issue 33)."""
    return f"sched.lease.{cluster}"


FLEET_LEASES = "sched.lease.*"


# A cluster's scheduler (cluster-scheduler → job-controller, global planners).
def podgroup_phase(cluster: str) -> str:
    return f"sched.podgroup.phase.{cluster}"


def pods_bound(cluster: str) -> str:
    return f"sched.pods.bound.{cluster}"


def pods_evicted(cluster: str) -> str:
    return f"sched.pods.evicted.{cluster}"


def pods_rejected(cluster: str) -> str:
    return f"sched.pods.rejected.{cluster}"


def capacity(cluster: str) -> str:
    return f"capacity.cluster.{cluster}"


CAPACITY_ALL = "capacity.cluster.*"


# A cluster's job-controller.
def job_phase(cluster: str) -> str:
    return f"job.phase.{cluster}"


def job_removed(cluster: str) -> str:
    return f"job.removed.{cluster}"


def job_state(cluster: str, job: str, part: int) -> str:
    return f"jobstate.{cluster}.{token(job)}.{part}"


def job_states(cluster: str) -> str:
    return f"jobstate.{cluster}.>"


def start_pods(cluster: str) -> str:
    return f"job.pods.start.{cluster}"


def stop_pods(cluster: str) -> str:
    return f"job.pods.stop.{cluster}"


# Node-agents.
def pod_phases(cluster: str) -> str:
    return f"node.pods.phase.{cluster}"


def pods_frozen(cluster: str) -> str:
    return f"node.pods.frozen.{cluster}"


def pod_address(pod: str) -> str:
    """The address of the node a pod runs on, as its agent last launched it (latest value): how
    a pod's hostname in another pod's world env resolves, across clusters (``PodAddress``)."""
    return f"podaddr.{token(pod)}"


def node_status(cluster: str, node: str) -> str:
    return f"nodestatus.{cluster}.{token(node)}"


def node_statuses(cluster: str) -> str:
    return f"nodestatus.{cluster}.*"


def heartbeat(cluster: str, agent: str) -> str:
    return f"heartbeat.{cluster}.{token(agent)}"


def heartbeats(cluster: str) -> str:
    return f"heartbeat.{cluster}.*"


def gpu_telemetry(cluster: str, node: str) -> str:
    return f"telemetry.gpu.{cluster}.{token(node)}"


def fabric_telemetry(cluster: str, node: str) -> str:
    return f"telemetry.fabric.{cluster}.{token(node)}"


def telemetry_of(cluster: str) -> str:
    """Every telemetry subject of one cluster's nodes."""
    return f"telemetry.*.{cluster}.*"


def node_fault(cluster: str) -> str:
    return f"node.fault.{cluster}"


def dlq(durable: str) -> str:
    return f"dlq.{durable}"


def admin(instance: str) -> str:
    """Operator commands to one service instance."""
    return f"admin.command.{token(instance)}"


def instance(name: str) -> str:
    return f"admin.instance.{token(name)}"


INSTANCES = "admin.instance.*"


STREAMS: list[StreamDecl] = [
    StreamDecl(name="HYPERJOB", subjects=["hj.>"]),
    StreamDecl(name="CONFIG", subjects=["cfg.>"], latest_only=True, max_age_seconds=0.0),
    StreamDecl(name="SCHED", subjects=["sched.>"]),
    StreamDecl(name="JOB", subjects=["job.>"]),
    StreamDecl(name="JOBSTATE", subjects=["jobstate.>"], latest_only=True, max_age_seconds=0.0),
    StreamDecl(name="NODE", subjects=["node.>"]),
    StreamDecl(name="NODESTATUS", subjects=["nodestatus.>"], latest_only=True, max_age_seconds=0.0),
    StreamDecl(name="PODADDR", subjects=["podaddr.>"], latest_only=True, max_age_seconds=0.0),
    StreamDecl(name="CAPACITY", subjects=["capacity.>"], latest_only=True),
    StreamDecl(name="HEARTBEAT", subjects=["heartbeat.>"], latest_only=True),
    StreamDecl(name="TELEMETRY", subjects=["telemetry.>"], latest_only=True, max_age_seconds=24 * 3600.0),
    StreamDecl(name="STATE", subjects=["state.>"], latest_only=True, max_age_seconds=0.0),
    StreamDecl(name="ADMIN", subjects=["admin.>"], latest_only=True, max_age_seconds=0.0),
    StreamDecl(name="DLQ", subjects=["dlq.>"], max_age_seconds=30 * 24 * 3600.0),
]

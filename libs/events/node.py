"""Facts from node-agents: pod phases, and each node's heartbeat (latest value per node)."""

from __future__ import annotations

from .base import Message


class PodPhaseReported(Message, frozen=True, kw_only=True, tag="node.pod.phase.v1"):
    cluster: str
    node: str
    pod: str
    job: str
    job_version: int
    phase: str
    exit_code: int | None = None
    restarts: int = 0
    message: str = ""
    pod_uid: str = ""  # the pod incarnation; a report about an older one is ignored


class NodeHeartbeat(Message, frozen=True, kw_only=True, tag="node.heartbeat.v1"):
    cluster: str
    node: str
    allocatable: dict[str, float]
    labels: dict[str, str] = {}
    taints: list[dict[str, str]] = []
    unschedulable: bool = False

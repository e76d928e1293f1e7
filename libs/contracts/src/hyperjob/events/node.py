"""Facts from node-agents: each node's status (on change), liveness beats, and pod phases.

``NodeStatus`` is the latest value of ``nodestatus.<cluster>.<node>``: what the node offers and
whether it can take work (``ready``; the health verdict of its GPUs and fabric, judged by the
agent with ``hwprobe.node_health``). ``AgentHeartbeat`` is one message per agent and period on
``heartbeat.<cluster>.<agent>``: the agent and the nodes it names as ``silent`` (they stopped
answering it) — every other node of the agent is alive. Pod phases travel one message per
agent and tick.
"""

from __future__ import annotations

import msgspec

from .base import Message


class NodeStatus(Message, frozen=True, kw_only=True, tag="node.status.v1"):
    cluster: str
    node: str
    agent: str = ""
    allocatable: dict[str, float]
    labels: dict[str, str] = {}
    taints: list[dict[str, str]] = []
    unschedulable: bool = False
    ready: bool = True
    reason: str = ""
    gpu_ok: bool = True
    fabric_ok: bool = True
    sick_gpus: list[int] = []
    down_ports: list[str] = []
    health_reasons: list[str] = []
    # The node's network address (``--node-address``): pods run on the host's network, each on
    # its own ports, so a pod is reached at its node's address ("" from an agent that predates it).
    address: str = ""


class AgentHeartbeat(Message, frozen=True, kw_only=True, tag="node.heartbeat.v2"):
    cluster: str
    agent: str
    nodes: int
    silent: list[str] = []


class PodAddress(Message, frozen=True, kw_only=True, tag="node.pod.address.v1"):
    """Where a pod incarnation runs: the latest value of ``podaddr.<pod>``, published by the agent
    that launches it, blanked (``address`` "") when it ends. An agent whose pod's env names
    ``<pod>.<child>`` resolves that hostname to ``address`` (``node_agent.domain.resolve_hosts``),
    and waits for a blank one unless it was blanked after the pod's job was created
    (``PodStart.world_since``): that peer ran and ended already."""

    pod: str
    uid: str
    cluster: str
    node: str
    address: str


class PodReport(msgspec.Struct, frozen=True, kw_only=True):
    """A pod incarnation's phase: Running, Succeeded, Failed, or Deleted (stopped on request);
    ``reason`` why its container ended, as the kubelet says it (``OOMKilled``, ``Error``), if known."""

    pod: str
    uid: str
    job: str
    node: str
    phase: str
    exit_code: int | None = None
    restarts: int = 0
    message: str = ""
    reason: str = ""
    at: float = 0.0


class PodPhasesReported(Message, frozen=True, kw_only=True, tag="node.pods.phase.v1"):
    cluster: str
    agent: str = ""
    reports: list[PodReport]


class FrozenPod(msgspec.Struct, frozen=True, kw_only=True):
    pod: str
    uid: str
    job: str
    node: str


class PodsFrozen(Message, frozen=True, kw_only=True, tag="node.pods.frozen.v1"):
    """A node-agent back on the bus after a cut-off longer than the fleet lease asks its
    job-controller which of the pods it froze are still the cluster's to run (issue 33): those
    are confirmed with a ``StartPods`` (``resume_only``); the others the agent kills once it has
    been back a lease long. Its job-controller may have kept the lease all along (the agent was
    cut off alone, with its cluster-scheduler): then no lease renewal would confirm them."""

    cluster: str
    agent: str
    pods: list[FrozenPod]
    frozen_at: float = 0.0  # when (the agent's wall clock) they stood still: none ran on after it

"""Volcano Queue (``scheduling.volcano.sh/v1beta1``), PodGroup and Kubernetes PriorityClass."""

from __future__ import annotations

from typing import Literal

from .base import NonNegative, ObjectMeta, QuantityMap, Spec
from .job import NetworkTopology

SCHEDULING_API_VERSION = "scheduling.volcano.sh/v1beta1"
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"

QueueState = Literal["Open", "Closed", "Closing", "Unknown"]


class Guarantee(Spec, frozen=True, kw_only=True):
    resource: QuantityMap = {}


class QueueSpec(Spec, frozen=True, kw_only=True):
    weight: NonNegative = 1
    capability: QuantityMap = {}
    deserved: QuantityMap = {}
    guarantee: Guarantee = Guarantee()
    reclaimable: bool | None = None
    priority: int = 0
    parent: str = ""
    state: QueueState | None = None
    type: str = ""
    extend_clusters: list[dict[str, object]] = []
    affinity: dict[str, object] | None = None


class QueueStatus(Spec, frozen=True, kw_only=True):
    state: QueueState = "Open"


class Queue(Spec, frozen=True, kw_only=True):
    api_version: Literal["scheduling.volcano.sh/v1beta1"] = SCHEDULING_API_VERSION
    kind: Literal["Queue"] = "Queue"
    metadata: ObjectMeta
    spec: QueueSpec = QueueSpec()
    status: QueueStatus | None = None


class PodGroupSpec(Spec, frozen=True, kw_only=True):
    min_member: NonNegative = 0
    min_task_member: dict[str, NonNegative] = {}
    queue: str = DEFAULT_QUEUE
    priority_class_name: str = ""
    min_resources: QuantityMap | None = None
    network_topology: NetworkTopology | None = None


class PodGroup(Spec, frozen=True, kw_only=True):
    api_version: Literal["scheduling.volcano.sh/v1beta1"] = SCHEDULING_API_VERSION
    kind: Literal["PodGroup"] = "PodGroup"
    metadata: ObjectMeta
    spec: PodGroupSpec = PodGroupSpec()


class PriorityClass(Spec, frozen=True, kw_only=True):
    """Kubernetes ``scheduling.k8s.io/v1`` PriorityClass; ``value`` sits at the top level."""

    api_version: Literal["scheduling.k8s.io/v1"] = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    metadata: ObjectMeta
    value: int
    global_default: bool = False
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    description: str = ""

"""Volcano Queue (``scheduling.volcano.sh/v1beta1``), PodGroup and Kubernetes PriorityClass.

Bounds and checks follow Volcano's CRD and queue webhook (volcano-sh/volcano ed72c7c81,
``pkg/webhooks/admission/queues``) and Kubernetes' PriorityClass validation; they run when the
manifest is decoded (``__post_init__``), so a bad queue is refused before anything changes:

* ``weight`` 1..65535; 0 (or absent) becomes 1, as the mutating webhook does;
* per resource, ``guarantee ≤ deserved`` (a guaranteed resource needs a ``deserved`` entry) and
  ``deserved ≤ capability``;
* ``spec.affinity`` names node groups (the scheduler's ``nodegroup`` plugin); the
  ``volcano.sh/nodegroup-resource-limits`` annotation (per-group quotas) is refused by name;
* the ``volcano.sh/hierarchy`` / ``hierarchy-weights`` annotations (hierarchical DRF) are checked as
  the webhook does (as many weights as levels, each a number > 0), then refused by name: they
  describe a tree of weighted virtual levels (Volcano's own example puts queue ``root-eng-prod``
  under a level ``eng`` that is no queue), which only ``drf`` with ``enableHierarchy`` reads, and
  that the scheduler conf refuses here (``schedcore.conf``: not implemented). The queue tree here is
  ``spec.parent`` (the capacity plugin's ``enableHierarchy``): every node a Queue, shares by
  ``deserved``; read as parents, the annotations would lose their weights, so they are refused
  rather than silently dropped or half-honoured.

Whether a parent queue or a priority class exists is checked where the system is known (the
splitter, the scenario loader).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from .base import NonNegative, ObjectMeta, QuantityMap, Spec
from .job import INT32_MAX, NetworkTopology
from .quantity import QuantityError, parse_quantity

SCHEDULING_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"
NODEGROUP_LABEL = "volcano.sh/nodegroup-name"
NODEGROUP_LIMITS_ANNOTATION = "volcano.sh/nodegroup-resource-limits"
HIERARCHY_ANNOTATIONS = ("volcano.sh/hierarchy", "volcano.sh/hierarchy-weights")
HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}

QueueState = Literal["Open", "Closed", "Closing", "Unknown"]


class Guarantee(Spec, frozen=True, kw_only=True):
    resource: QuantityMap = {}


class NodeGroupTerms(Spec, frozen=True, kw_only=True):
    """Node group names (values of the node label ``volcano.sh/nodegroup-name``)."""

    required_during_scheduling_ignored_during_execution: list[str] = []
    preferred_during_scheduling_ignored_during_execution: list[str] = []


class QueueAffinity(Spec, frozen=True, kw_only=True):
    """Where a queue's pods may go, by node group (the ``nodegroup`` scheduler plugin)."""

    node_group_affinity: NodeGroupTerms | None = None
    node_group_anti_affinity: NodeGroupTerms | None = None


def _amounts(raw: QuantityMap, field: str) -> dict[str, float]:
    out = {}
    for name, value in raw.items():
        try:
            out[name] = parse_quantity(value)
        except QuantityError as exc:
            raise ValueError(f"{field}.{name}: {exc}") from None
    return out


def _check_queue_resources(spec: QueueSpec) -> None:
    """Volcano's ``validateResourceQuantityOfQueue``: guarantee ≤ deserved ≤ capability, per resource."""
    capability = _amounts(spec.capability, "capability")
    deserved = _amounts(spec.deserved, "deserved")
    guarantee = _amounts(spec.guarantee.resource, "guarantee.resource")
    for name, amount in guarantee.items():
        if name not in deserved:
            raise ValueError(
                f"deserved.{name}: required when guarantee.resource.{name} is set (deserved must be ≥ guarantee)"
            )
        if deserved[name] < amount:
            raise ValueError(
                f"deserved.{name}: {spec.deserved[name]} must be ≥ guarantee.resource.{name} "
                f"({spec.guarantee.resource[name]})"
            )
    for name, amount in deserved.items():
        if name in capability and amount > capability[name]:
            raise ValueError(
                f"deserved.{name}: {spec.deserved[name]} must be ≤ capability.{name} ({spec.capability[name]})"
            )


class QueueSpec(Spec, frozen=True, kw_only=True):
    weight: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 1
    capability: QuantityMap = {}
    deserved: QuantityMap = {}
    guarantee: Guarantee = Guarantee()
    reclaimable: bool | None = None
    priority: Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)] = 0
    parent: str = ""
    state: QueueState | None = None
    type: str = ""
    extend_clusters: list[dict[str, object]] = []
    affinity: QueueAffinity | None = None

    def __post_init__(self) -> None:
        if self.weight == 0:  # Volcano's mutating webhook: an unset weight is 1
            msgspec.structs.force_setattr(self, "weight", 1)
        _check_queue_resources(self)


class QueueStatus(Spec, frozen=True, kw_only=True):
    state: QueueState = "Open"


class Queue(Spec, frozen=True, kw_only=True):
    api_version: Literal["scheduling.volcano.sh/v1beta1"] = SCHEDULING_API_VERSION
    kind: Literal["Queue"] = "Queue"
    metadata: ObjectMeta
    spec: QueueSpec = QueueSpec()
    status: QueueStatus | None = None

    def __post_init__(self) -> None:
        annotations = self.metadata.annotations
        _check_hierarchy(annotations.get(HIERARCHY_ANNOTATIONS[0], ""), annotations.get(HIERARCHY_ANNOTATIONS[1], ""))
        if NODEGROUP_LIMITS_ANNOTATION in annotations:
            raise ValueError(
                f"metadata.annotations.{NODEGROUP_LIMITS_ANNOTATION}: per-nodegroup queue limits are not "
                "supported (the nodegroup plugin honours spec.affinity; bound the queue with spec.capability)"
            )


def _check_hierarchy(hierarchy: str, weights: str) -> None:
    """Volcano's ``validateHierarchicalAttributes`` (one weight per level, each a number > 0), then the
    refusal of annotations that are valid (see the module docstring)."""
    if not hierarchy and not weights:
        return
    where = f"metadata.annotations.{HIERARCHY_ANNOTATIONS[1]}"
    levels, values = hierarchy.split("/"), weights.split("/")
    if len(levels) != len(values):
        raise ValueError(f"{where}: {weights!r} must have one weight per level of {hierarchy!r}")
    for value in values:
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"{where}: {value!r} in {weights!r} is not a number") from None
        if weight <= 0:
            raise ValueError(f"{where}: {value!r} in {weights!r} must be more than 0")
    raise ValueError(
        f"metadata.annotations.{HIERARCHY_ANNOTATIONS[0]}: hierarchical DRF (queue trees by annotation) is "
        "not supported; declare the tree with spec.parent (every level a Queue, shares by deserved: the "
        "capacity plugin's enableHierarchy) and each queue's share with spec.weight or spec.deserved"
    )


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
    """Kubernetes ``scheduling.k8s.io/v1`` PriorityClass; ``value`` sits at the top level.

    A user class's value is at most 1,000,000,000 (``HighestUserDefinablePriority``); only the two
    system classes go higher, with their fixed values.
    """

    api_version: Literal["scheduling.k8s.io/v1"] = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    metadata: ObjectMeta
    value: Annotated[int, msgspec.Meta(ge=-(2**31), le=INT32_MAX)]
    global_default: bool = False
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    description: str = ""

    def __post_init__(self) -> None:
        check_priority_value(self.metadata.name, self.value)


def check_priority_value(name: str, value: int) -> None:
    """Kubernetes' rule for a PriorityClass value; ``ValueError`` names the field."""
    system = SYSTEM_PRIORITY_CLASSES.get(name)
    if system is not None and value != system:
        raise ValueError(f"value: the system class {name} has the value {system}")
    if system is None and value > HIGHEST_USER_PRIORITY:
        raise ValueError(f"value: {value} is more than {HIGHEST_USER_PRIORITY:,} (the highest a user class may have)")

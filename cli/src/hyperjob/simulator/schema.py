"""The Scenario file's own shape, decoded strictly (docs/scenario-format.md, "Input").

An unknown field, an unknown event type or a wrong type fails here; ``scenario.load`` turns
msgspec's message into a ``ScenarioError`` naming the place. Manifests inside ``create`` events
are kept as plain data: they are admitted at their event time and may be rejected then, which is
an outcome of the run (a ``Rejected`` event), not an error of the file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from hyperjob.api import Taint

Number = int | float
DurationText = int | float | str
QuantityValue = str | int | float


class _Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Base of every scenario struct: camelCase on the wire, unknown fields rejected."""


class Metadata(_Strict, frozen=True, kw_only=True):
    name: str


class NumaEntry(_Strict, frozen=True, kw_only=True):
    """A node's NUMA layout and kubelet policies, for the scheduler's ``numa-aware`` plugin."""

    cpus: Annotated[list[Annotated[int, msgspec.Meta(ge=1)]], msgspec.Meta(min_length=1)]
    topology_manager_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] = "none"
    cpu_manager_policy: Literal["none", "static"] = "static"


class NodeEntry(_Strict, frozen=True, kw_only=True):
    name: str
    count: int | None = None
    allocatable: dict[str, QuantityValue] = {}
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    numa: NumaEntry | None = None


class ClusterEntry(_Strict, frozen=True, kw_only=True):
    name: str
    labels: dict[str, str] = {}
    nodes: list[NodeEntry] = []
    # Price per resource-hour (cpu per core, memory per GiB, others per unit; docs/scenario-format.md).
    prices: dict[str, Annotated[float, msgspec.Meta(ge=0)]] = {}
    data_sets: list[str] = []  # data sets the cluster holds (docs/scenario-format.md)
    # Bandwidth (Gb/s) to data sets it does not hold, by data set (docs/scenario-format.md).
    data_links: dict[str, Annotated[float, msgspec.Meta(ge=0)]] = {}


class PriorityClassEntry(_Strict, frozen=True, kw_only=True):
    name: str
    value: int
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    global_default: bool = False
    description: str = ""


class ObjectRef(_Strict, frozen=True, kw_only=True):
    kind: str
    name: str


class NodeRef(_Strict, frozen=True, kw_only=True):
    cluster: str
    node: str


class ClusterRef(_Strict, frozen=True, kw_only=True):
    cluster: str


class PodFail(_Strict, frozen=True, kw_only=True):
    pod: str
    exit_code: int = 1


class Command(_Strict, frozen=True, kw_only=True):
    kind: str
    name: str
    action: str


class EventEntry(_Strict, frozen=True, kw_only=True):
    """One timed event; exactly one of the action fields is set (checked by the loader)."""

    at: DurationText
    create: dict[str, Any] | None = None
    delete: ObjectRef | None = None
    node_down: NodeRef | None = None
    node_up: NodeRef | None = None
    cluster_down: ClusterRef | None = None
    cluster_up: ClusterRef | None = None
    control_plane_hang: ClusterRef | None = None
    control_plane_resume: ClusterRef | None = None
    pod_fail: PodFail | None = None
    command: Command | None = None


EVENT_FIELDS = (
    "create",
    "delete",
    "node_down",
    "node_up",
    "cluster_down",
    "cluster_up",
    "control_plane_hang",
    "control_plane_resume",
    "pod_fail",
    "command",
)


class ScenarioSpec(_Strict, frozen=True, kw_only=True):
    clusters: list[ClusterEntry]
    scheduler_conf: str | None = None
    schedule_period: DurationText = 1
    queues: list[dict[str, Any]] = []
    priority_classes: list[PriorityClassEntry] = []
    events: list[EventEntry] = []
    until: DurationText | None = None


class ScenarioFile(_Strict, frozen=True, kw_only=True):
    api_version: Literal["hyperjob.io/v1alpha1"]
    kind: Literal["Scenario"]
    metadata: Metadata
    spec: ScenarioSpec

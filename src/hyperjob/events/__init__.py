"""The event catalogue: every message the services exchange, as versioned msgspec tagged structs.

Commands are imperative and have exactly one consumer (``ApplyManifest``, ``PlaceChildren``,
``DispatchChild``, ``StartPods``); facts are past tense and may have many (``PodsBound``,
``JobPhaseChanged``). Tags are versioned (``sched.pods.bound.v1``); evolution follows msgspec's
rules: add a field only with a default, never rename, retype or reorder; a breaking change is a
new tag. Events carry the data their consumers need: no service reads another's documents
(ADR 0004). Trace context travels in NATS headers, never in the payload. Pure: imports no I/O
library.

A child job's path through the system::

    ApplyManifest ─► splitter ─► OwnerSubmitted ─► global-scheduler ─► OwnerAdmitted ─► splitter
      ─► PlaceChildren ─► global-scheduler ─► DispatchChild(cluster) ─► job-controller
      ─► JobState ─► cluster-scheduler ─► PodGroupPhaseChanged(Inqueue) ─► job-controller creates pods
      ─► JobState ─► cluster-scheduler ─► PodsBound ─► job-controller ─► StartPods ─► node-agent
      ─► PodPhasesReported ─► job-controller ─► JobPhaseChanged ─► status-aggregator, splitter
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from .base import Message, derive_id, new_request_id
from .cluster import (
    VARIED_LABEL,
    ClusterCapacityReported,
    NodeClass,
    PodGroupPhaseChanged,
    PodRef,
    PodsBound,
    PodsEvicted,
    PodsRejected,
)
from .config import PriorityClassChanged, QueueChanged
from .hyperjob import ChildRef, HyperJobDeleted, HyperJobSpecChanged, HyperJobStatusChanged
from .job import (
    PART_SIZE,
    JobPhaseChanged,
    JobRemoved,
    JobState,
    PodGroupSpec,
    PodStart,
    PodState,
    PodStop,
    StartPods,
    StopPods,
    TaskScheduling,
)
from .manifest import (
    AdminCommand,
    ApplyManifest,
    CommandHyperJob,
    CommandObject,
    DeleteObject,
    InstanceStarted,
    Request,
    RequestAccepted,
    RequestRejected,
)
from .node import AgentHeartbeat, NodeStatus, PodPhasesReported, PodReport
from .placement import (
    ChildPlacementWaiting,
    CommandChild,
    DispatchChild,
    GangControl,
    GangRetry,
    MoveChild,
    OwnerAdmitted,
    OwnerLifecycle,
    OwnerSubmitted,
    OwnerWithdrawn,
    PlaceChildren,
    PlannedChild,
    RemoveChild,
    ReservationHeld,
    World,
)
from .telemetry import FabricTelemetry, GpuTelemetry, InjectNodeFault

ALL_MESSAGES: tuple[type[Message], ...] = (
    ApplyManifest,
    DeleteObject,
    CommandHyperJob,
    CommandObject,
    RequestAccepted,
    RequestRejected,
    AdminCommand,
    InstanceStarted,
    HyperJobSpecChanged,
    HyperJobStatusChanged,
    HyperJobDeleted,
    QueueChanged,
    PriorityClassChanged,
    OwnerSubmitted,
    OwnerWithdrawn,
    OwnerAdmitted,
    OwnerLifecycle,
    ChildPlacementWaiting,
    PlaceChildren,
    RemoveChild,
    MoveChild,
    GangRetry,
    DispatchChild,
    CommandChild,
    GangControl,
    ReservationHeld,
    PodGroupPhaseChanged,
    PodsBound,
    PodsEvicted,
    PodsRejected,
    ClusterCapacityReported,
    JobPhaseChanged,
    JobRemoved,
    JobState,
    StartPods,
    StopPods,
    NodeStatus,
    AgentHeartbeat,
    PodPhasesReported,
    GpuTelemetry,
    FabricTelemetry,
    InjectNodeFault,
)

_encoder = msgspec.json.Encoder()


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


def decoder(*types: type[Message]) -> msgspec.json.Decoder[Any]:
    """One decoder for exactly the message types a consumer handles (built once at start-up).

    The messages are tagged, so a union of them decodes to the right type by its ``type`` field.
    """
    return msgspec.json.Decoder(Union[types])  # noqa: UP007 (a runtime tuple of types)


__all__ = [
    "VARIED_LABEL",
    "ALL_MESSAGES",
    "PART_SIZE",
    "AdminCommand",
    "AgentHeartbeat",
    "ApplyManifest",
    "ChildPlacementWaiting",
    "ChildRef",
    "ClusterCapacityReported",
    "CommandChild",
    "CommandHyperJob",
    "CommandObject",
    "DeleteObject",
    "DispatchChild",
    "FabricTelemetry",
    "GangControl",
    "GangRetry",
    "GpuTelemetry",
    "HyperJobDeleted",
    "HyperJobSpecChanged",
    "HyperJobStatusChanged",
    "InjectNodeFault",
    "InstanceStarted",
    "JobPhaseChanged",
    "JobRemoved",
    "JobState",
    "Message",
    "MoveChild",
    "NodeClass",
    "NodeStatus",
    "OwnerAdmitted",
    "OwnerLifecycle",
    "OwnerSubmitted",
    "OwnerWithdrawn",
    "PlaceChildren",
    "PlannedChild",
    "PodGroupPhaseChanged",
    "PodGroupSpec",
    "PodPhasesReported",
    "PodRef",
    "PodReport",
    "PodStart",
    "PodState",
    "PodStop",
    "PodsBound",
    "PodsEvicted",
    "PodsRejected",
    "PriorityClassChanged",
    "QueueChanged",
    "RemoveChild",
    "Request",
    "RequestAccepted",
    "RequestRejected",
    "ReservationHeld",
    "StartPods",
    "StopPods",
    "TaskScheduling",
    "World",
    "decoder",
    "derive_id",
    "encode",
    "new_request_id",
]

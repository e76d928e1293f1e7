"""The event catalogue: every message the services exchange, as versioned msgspec tagged structs.

Commands are imperative and have exactly one consumer (``ApplyManifest``, ``PlaceChild``,
``DispatchChild``, ``StartPod``); facts are past tense and may have many (``PodBound``,
``JobPhaseChanged``). Tags are versioned (``sched.pod.bound.v1``); evolution follows msgspec's rules:
add a field only with a default, never rename, retype or reorder; a breaking change is a new tag.
Trace context travels in NATS headers, never in the payload. Pure: imports no I/O library.

A child job's path through the system::

    ApplyManifest ─► splitter ─► PlaceChild ─► global-scheduler ─► DispatchChild(cluster)
      ─► job-controller ─(podgroup)─► cluster-scheduler ─► PodGroupPhaseChanged(Inqueue)
      ─► job-controller creates pods ─► cluster-scheduler ─► PodBound ─► job-controller ─► StartPod
      ─► node-agent ─► PodPhaseReported ─► job-controller ─► JobPhaseChanged ─► status-aggregator
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from .base import Message, derive_id, new_request_id
from .cluster import ClusterCapacityReported, PodBound, PodEvicted, PodGroupPhaseChanged
from .hyperjob import HyperJobDeleted, HyperJobStatusChanged
from .job import JobPhaseChanged, JobRemoved, PodsReady, StartPod, StopPod
from .manifest import ApplyManifest, CommandHyperJob, DeleteObject, RequestAccepted, RequestRejected
from .node import NodeHeartbeat, PodPhaseReported
from .placement import (ChildPlacementWaiting, CommandChild, DispatchChild, GangControl, MoveChild, OwnerAdmitted,
                        PlaceChild, RemoveChild, ReservationHeld)
from .telemetry import FabricTelemetry, GpuTelemetry, InjectNodeFault

ALL_MESSAGES: tuple[type[Message], ...] = (
    ApplyManifest, DeleteObject, CommandHyperJob, RequestAccepted, RequestRejected,
    HyperJobStatusChanged, HyperJobDeleted,
    PlaceChild, DispatchChild, RemoveChild, ChildPlacementWaiting, CommandChild, OwnerAdmitted, MoveChild,
    GangControl, ReservationHeld,
    PodGroupPhaseChanged, PodBound, PodEvicted, ClusterCapacityReported,
    JobPhaseChanged, JobRemoved, PodsReady, StartPod, StopPod,
    PodPhaseReported, NodeHeartbeat,
    GpuTelemetry, FabricTelemetry, InjectNodeFault,
)

_encoder = msgspec.json.Encoder()


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


def decoder(*types: type[Message]) -> msgspec.json.Decoder[Any]:
    """One decoder for exactly the message types a consumer handles (built once at start-up).

    The messages are tagged, so a union of them decodes to the right type by its ``type`` field.
    """
    return msgspec.json.Decoder(Union[types])  # type: ignore[valid-type]


__all__ = [
    "ALL_MESSAGES", "ApplyManifest", "ChildPlacementWaiting", "ClusterCapacityReported", "CommandChild",
    "CommandHyperJob",
    "DeleteObject", "DispatchChild", "GangControl", "HyperJobDeleted", "HyperJobStatusChanged", "JobPhaseChanged", "JobRemoved", "Message", "MoveChild",
    "NodeHeartbeat", "OwnerAdmitted", "PlaceChild", "PodBound", "PodEvicted", "PodGroupPhaseChanged", "PodPhaseReported",
    "PodsReady", "RemoveChild", "RequestAccepted", "RequestRejected", "ReservationHeld", "StartPod", "StopPod", "decoder",
    "derive_id", "encode", "new_request_id",
    "FabricTelemetry", "GpuTelemetry", "InjectNodeFault",
]

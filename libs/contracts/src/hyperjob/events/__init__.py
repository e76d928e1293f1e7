"""The event catalogue: every message the services exchange, as versioned msgspec tagged structs.

Commands are imperative and have exactly one consumer (``ApplyManifest``, ``PlaceChildren``,
``DispatchChild``, ``StartPods``); facts are past tense and may have many (``PodsBound``,
``JobPhaseChanged``). Tags are versioned (``sched.pods.bound.v1``); evolution follows msgspec's
rules: add a field only with a default, never rename, retype or reorder; a breaking change is a
new tag, and the retired tag stays readable (``RETIRED_MESSAGES``): ``decoder`` turns it into the
current form, so handlers only ever see current messages. Hence the upgrade order: consumers
first, then producers (a consumer of an older release does not read the new tag; it dead-letters
it as an unknown type, from where ``hyperjob dlq replay`` brings it back once it is upgraded).
Events carry the data their consumers need: no service reads another's documents (ADR 0004).
Trace context travels in NATS headers, never in the payload. Pure: imports no I/O library.

A child job's path through the system::

    ApplyManifest ─► splitter ─► OwnerSubmitted ─► global-scheduler ─► OwnerAdmitted ─► splitter
      ─► PlaceChildren ─► global-scheduler ─► DispatchChild(cluster) ─► job-controller
      ─► JobState ─► cluster-scheduler ─► PodGroupPhaseChanged(Inqueue) ─► job-controller creates pods
      ─► JobState ─► cluster-scheduler ─► PodsBound ─► job-controller ─► StartPods ─► node-agent
      ─► PodPhasesReported ─► job-controller ─► JobPhaseChanged ─► status-aggregator, splitter
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import msgspec

from .base import Envelope, Message, derive_id, new_request_id, round_id
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
    JobPhaseChangedV1,
    JobRemoved,
    JobState,
    PodCounts,
    PodGroupSpec,
    PodMount,
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
    Outcome,
    Request,
    RequestAccepted,
    RequestRejected,
    request_namespace,
    request_type_on,
    scoped_manifest,
)
from .node import AgentHeartbeat, FrozenPod, NodeStatus, PodAddress, PodPhasesReported, PodReport, PodsFrozen
from .placement import (
    ChildPlacementWaiting,
    CommandChild,
    DispatchChild,
    FleetLease,
    GangControl,
    GangRetry,
    MoveChild,
    OwnerAdmitted,
    OwnerLifecycle,
    OwnerSubmitted,
    OwnerWithdrawn,
    PlaceChildren,
    PlannedChild,
    PreemptForGang,
    PreemptVictims,
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
    FleetLease,
    GangControl,
    PreemptForGang,
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
    PodAddress,
    PodPhasesReported,
    PodsFrozen,
    GpuTelemetry,
    FabricTelemetry,
    InjectNodeFault,
)

# Retired tags still read, each with what makes the current message of it: a stream being
# upgraded still holds messages its old producers published.
_UPGRADES: dict[type[Message], tuple[type[Message], Callable[[Any], Message]]] = {
    JobPhaseChangedV1: (JobPhaseChanged, JobPhaseChangedV1.upgrade),
}
RETIRED_MESSAGES: tuple[type[Message], ...] = tuple(_UPGRADES)

_encoder = msgspec.json.Encoder()


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


class Decoder:
    """Decodes exactly the message types a consumer handles, plus the retired forms of them, which
    it returns in their current form: the one place a retired tag is read."""

    def __init__(self, types: tuple[type[Message], ...]) -> None:
        self._upgrades = {old: upgrade for old, (current, upgrade) in _UPGRADES.items() if current in types}
        # The union of the message types, for callers that decode with msgspec directly.
        self.type: Any = Union[types + tuple(self._upgrades)]  # noqa: UP007 (a runtime tuple of types)
        self._decoder = msgspec.json.Decoder(self.type)

    def decode(self, data: bytes) -> Any:
        """The message ``data`` holds; raises msgspec's ``DecodeError`` / ``ValidationError``."""
        message = self._decoder.decode(data)
        upgrade = self._upgrades.get(type(message))
        return upgrade(message) if upgrade else message


# Operators' tools (get events, describe, trace, get nodes, the dashboard) read logs that anyone
# allowed to publish on a subject has written to: one message they cannot read (not JSON, the wrong
# shape, nested deeper than the decoder's stack: msgspec raises RecursionError) is skipped, and said
# once per process, instead of failing the tool for as long as the stream keeps it.
_UNREADABLE = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError, OverflowError)
_skip_notices: list[Callable[[str], None]] = []
_skipped = 0


def read_or_skip(decoder: Decoder, data: bytes) -> Any | None:
    """``decoder``'s message in ``data``, or None when it cannot be read (the first such tells the
    ``on_first_skip`` callbacks why). Never raises for what is in ``data``: the operators' tools'
    one way to read a log."""
    global _skipped
    try:
        return decoder.decode(data)
    except _UNREADABLE as exc:
        _skipped += 1
        if _skipped == 1:
            why = "nested too deep" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {exc}"[:200]
            for notice in _skip_notices:
                notice(f"skipped a message that cannot be read ({why}); the rest is shown")
        return None


def on_first_skip(notice: Callable[[str], None]) -> None:
    """Call ``notice`` with a one-line reason the first time ``read_or_skip`` skips a message."""
    _skip_notices.append(notice)


def decoder(*types: type[Message]) -> Decoder:
    """One decoder for exactly the message types a consumer handles (built once at start-up).

    The messages are tagged, so a union of them decodes to the right type by its ``type`` field.
    """
    return Decoder(types)


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
    "Decoder",
    "CommandChild",
    "CommandHyperJob",
    "CommandObject",
    "DeleteObject",
    "DispatchChild",
    "FabricTelemetry",
    "FleetLease",
    "GangControl",
    "PreemptForGang",
    "PreemptVictims",
    "GangRetry",
    "GpuTelemetry",
    "HyperJobDeleted",
    "HyperJobSpecChanged",
    "HyperJobStatusChanged",
    "InjectNodeFault",
    "InstanceStarted",
    "JobPhaseChanged",
    "JobPhaseChangedV1",
    "JobRemoved",
    "JobState",
    "Envelope",
    "Message",
    "MoveChild",
    "NodeClass",
    "NodeStatus",
    "PodAddress",
    "OwnerAdmitted",
    "OwnerLifecycle",
    "OwnerSubmitted",
    "OwnerWithdrawn",
    "PlaceChildren",
    "PlannedChild",
    "PodCounts",
    "PodGroupPhaseChanged",
    "PodGroupSpec",
    "PodPhasesReported",
    "PodsFrozen",
    "FrozenPod",
    "PodRef",
    "PodReport",
    "PodMount",
    "PodStart",
    "PodState",
    "PodStop",
    "PodsBound",
    "PodsEvicted",
    "PodsRejected",
    "PriorityClassChanged",
    "QueueChanged",
    "RETIRED_MESSAGES",
    "RemoveChild",
    "Request",
    "Outcome",
    "RequestAccepted",
    "RequestRejected",
    "request_namespace",
    "request_type_on",
    "scoped_manifest",
    "ReservationHeld",
    "StartPods",
    "StopPods",
    "TaskScheduling",
    "World",
    "decoder",
    "on_first_skip",
    "read_or_skip",
    "derive_id",
    "encode",
    "new_request_id",
    "round_id",
]

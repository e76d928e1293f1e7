"""Admission, placement and the cross-cluster gang: splitter ↔ global-scheduler ↔ clusters.

An owner (a HyperJob, or a plain Job) is submitted for admission by its global queue
(``OwnerSubmitted``); once admitted (``OwnerAdmitted``) the splitter plans its children and asks
for them to be placed, all at once (``PlaceChildren``); the global-scheduler dispatches each to
its cluster's job-controller (``DispatchChild``), gated as a reservation when the HyperJob's
children must start together (``GangControl`` / ``ReservationHeld``); a gang that only
lower-priority work keeps out preempts it in every cluster of its plan at once, or nowhere
(``PreemptForGang``, on the gang-control subject). A gang attempt that times
out is planned again (``GangRetry``). ``RemoveChild`` and ``MoveChild`` withdraw or fail over one
child; ``ChildPlacementWaiting`` says why something waits (``child`` empty: the owner itself).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from .base import Message
from .hyperjob import ChildRef


class OwnerSubmitted(Message, frozen=True, kw_only=True, tag="sched.owner.submitted.v1"):
    """An admission candidate: what the owner asks of its queue (every task's requests summed),
    its priority (the highest of its templates, a ``globalDefault`` class applying) and age."""

    name: str
    plain: bool = False
    queue: str
    priority: int = 0
    request: dict[str, float]
    created: float
    generation: int = 1


class OwnerWithdrawn(Message, frozen=True, kw_only=True, tag="sched.owner.withdrawn.v1"):
    """The owner no longer asks for admission (deleted before it was admitted, or suspended)."""

    name: str


class OwnerLifecycle(Message, frozen=True, kw_only=True, tag="sched.owner.lifecycle.v1"):
    """A user command changed what the owner does as a whole: ``Suspended`` releases its gang's
    reservations; ``Active`` (resume) and ``Restarting`` start its gang over."""

    name: str
    lifecycle: Literal["Active", "Suspended", "Resuming", "Restarting"]
    restarts: int = 0


class OwnerAdmitted(Message, frozen=True, kw_only=True, tag="sched.owner.admitted.v1"):
    name: str
    queue: str
    generation: int = 1


class ChildPlacementWaiting(Message, frozen=True, kw_only=True, tag="sched.child.waiting.v1"):
    """Something cannot go on yet; ``reason`` says which queue limit or which cluster lacks what.
    ``child`` empty: the owner as a whole (``hyperjob`` names it, or the plain Job)."""

    child: str
    hyperjob: str = ""
    reason: str


class PlannedChild(msgspec.Struct, frozen=True, kw_only=True):
    """One child to place: its Volcano Job manifest and where it may go (``clusters``, in order
    of preference; a planned split names exactly one)."""

    name: str
    replicated_job: str = ""
    clusters: list[str]
    job: dict[str, Any]
    template_hash: str = ""


class PlaceChildren(Message, frozen=True, kw_only=True, tag="sched.child.place.v1"):
    """Place an owner's children (a plan, or the one child of a plain Job). ``gang`` is how many
    must hold their reservations before any starts (0: no cross-cluster gang). ``plan`` is the
    split (``ChildRef`` per child) and ``hyperjob`` the manifest: with them a job-controller
    computes each pod's cross-cluster training environment. ``attempt`` counts re-plans."""

    owner: str
    plain: bool = False
    generation: int = 1
    attempt: int = 1
    children: list[PlannedChild]
    gang: int = 0
    hyperjob: dict[str, Any] = {}
    plan: list[ChildRef] = []
    world_size: int = 0


class RemoveChild(Message, frozen=True, kw_only=True, tag="sched.child.remove.v1"):
    """Delete a child job and all its pods (``cluster`` empty when the sender does not know it)."""

    child: str
    cluster: str = ""


class MoveChild(Message, frozen=True, kw_only=True, tag="sched.child.move.v1"):
    """Failover: run a child (same name) on ``to_cluster`` instead of where it is; with
    ``to_cluster`` empty, withdraw it and let it wait for a cluster."""

    child: str
    to_cluster: str
    reason: str = ""


class GangRetry(Message, frozen=True, kw_only=True, tag="sched.gang.retry.v1"):
    """A gang attempt was released (not every reservation held in time): plan the owner again."""

    owner: str
    attempt: int
    reason: str


class World(msgspec.Struct, frozen=True, kw_only=True):
    """What every pod of a HyperJob needs to join one training world across clusters."""

    hyperjob: dict[str, Any]
    plan: list[ChildRef]
    world_size: int


class DispatchChild(Message, frozen=True, kw_only=True, tag="sched.child.dispatch.v2"):
    """Run this child job in ``cluster`` (one consumer: that cluster's job-controller).
    ``gang`` names the HyperJob whose cross-cluster gang the child belongs to: its pods are
    held, not started, until the global-scheduler says start."""

    child: str
    cluster: str
    hyperjob: str = ""
    replicated_job: str = ""
    job: dict[str, Any]
    world: World | None = None
    gang: str = ""
    gang_attempt: int = 0
    attempt: int = 0  # the owner's plan attempt the child belongs to (news of older attempts is stale)


class CommandChild(Message, frozen=True, kw_only=True, tag="sched.child.command.v1"):
    """Run a Volcano Job command (AbortJob, ResumeJob, RestartJob, ...) on a child in ``cluster``."""

    child: str
    cluster: str
    action: str
    reason: str = ""


GangAction = Literal["reserve", "start", "release"]


class GangControl(Message, frozen=True, kw_only=True, tag="sched.gang.control.v1"):
    """The global-scheduler steering a child's reservation in ``cluster``: hold its whole gang
    (``reserve``), turn the held reservation into bindings (``start``), or give it back (``release``)."""

    child: str
    cluster: str
    action: GangAction
    attempt: int


class PreemptVictims(msgspec.Struct, frozen=True, kw_only=True):
    """Running pods of ``job`` to evict."""

    job: str
    pods: list[str]


class PreemptForGang(Message, frozen=True, kw_only=True, tag="sched.gang.preempt.v1"):
    """The global-scheduler to one cluster (on ``subjects.gang_control``): evict these running
    pods, so that the gang attempt ``attempt`` of ``hyperjob`` can hold ``child`` here. Sent to every
    cluster of the plan in one reaction, and only when every child of the gang can then be placed
    (``fleetcore.plan_preemption``); ``reason`` is the plan, as Events and the decision log say it.
    Pods already gone are skipped: a redelivery evicts nothing more."""

    child: str
    cluster: str
    hyperjob: str
    attempt: int
    victims: list[PreemptVictims]
    reason: str


class FleetLease(Message, frozen=True, kw_only=True, tag="sched.lease.v1"):
    """The fleet still holds ``cluster``'s children there (issue 33, fencing): the cluster may run
    them until ``basis + lease`` by its own clock, ``basis`` being the cluster's own time on the
    latest report the fleet heard from it (its capacity summary, or its nodes' beat while its
    control plane is hung). Only the global-scheduler publishes it; past that time the cluster's
    job-controller stops the children's pods, and the fleet moves none before ``lease`` plus its
    margin has passed since that report (``fleetcore.liveness``)."""

    cluster: str
    basis: float
    lease: float


class ReservationHeld(Message, frozen=True, kw_only=True, tag="sched.reservation.held.v1"):
    """``cluster`` holds every pod of the child's gang on its nodes (bound, not started);
    ``held`` False: it held them and lost them (evicted, a node went down)."""

    child: str
    cluster: str
    hyperjob: str
    attempt: int
    held: bool = True

"""Child jobs between the splitter, the global-scheduler and each cluster's job-controller.

Lifecycle of a child: ``PlaceChild`` (splitter → global-scheduler) → ``DispatchChild`` (global-scheduler
→ the chosen cluster's job-controller) → the child runs → ``RemoveChild`` when no longer desired.
"""

from __future__ import annotations

from typing import Any, Literal

from .base import Message


class PlaceChild(Message, frozen=True, kw_only=True, tag="sched.child.place.v1"):
    """Find a cluster for a child job (a plain Job is a HyperJob of one child, ``hyperjob`` empty).

    ``clusters`` are the eligible clusters in order of preference; a planned split names exactly one.
    ``job`` is the child's Volcano Job manifest; ``env`` the HyperJob-level environment for every
    pod, ``env_by_pod`` the cross-cluster training environment of each pod (global RANK, one
    MASTER_ADDR), and ``rank_offset``/``world_size`` place the child's ranks in the HyperJob's world.
    """

    child: str
    hyperjob: str = ""
    replicated_job: str = ""
    clusters: list[str]
    job: dict[str, Any]
    env: dict[str, str] = {}
    env_by_pod: dict[str, dict[str, str]] = {}
    rank_offset: int = 0
    world_size: int | None = None


class DispatchChild(Message, frozen=True, kw_only=True, tag="sched.child.dispatch.v1"):
    """Run this child job in ``cluster`` (one consumer: that cluster's job-controller).

    ``gang`` names the HyperJob whose cross-cluster gang the child belongs to: its pods are
    scheduled as a reservation (held, not started) until the global-scheduler says start.
    """

    child: str
    cluster: str
    hyperjob: str = ""
    replicated_job: str = ""
    job: dict[str, Any]
    env: dict[str, str] = {}
    env_by_pod: dict[str, dict[str, str]] = {}
    rank_offset: int = 0
    world_size: int | None = None
    gang: str = ""


class RemoveChild(Message, frozen=True, kw_only=True, tag="sched.child.remove.v1"):
    """Delete a child job and all its pods from ``cluster``."""

    child: str
    cluster: str


class ChildPlacementWaiting(Message, frozen=True, kw_only=True, tag="sched.child.waiting.v1"):
    """A child cannot be placed yet; ``reason`` says which queue limit or which cluster lacks what."""

    child: str
    hyperjob: str = ""
    reason: str


class CommandChild(Message, frozen=True, kw_only=True, tag="sched.child.command.v1"):
    """Run a Volcano Job command (AbortJob, ResumeJob, RestartJob, ...) on a child in ``cluster``."""

    child: str
    cluster: str
    action: str
    reason: str = ""


class OwnerAdmitted(Message, frozen=True, kw_only=True, tag="sched.owner.admitted.v1"):
    """The global queue admitted a HyperJob (or a plain Job, ``name`` being the job)."""

    name: str
    queue: str


class MoveChild(Message, frozen=True, kw_only=True, tag="sched.child.move.v1"):
    """Failover: run a child (same name) on ``to_cluster`` instead of where it is; with
    ``to_cluster`` empty, withdraw it and let it wait for a cluster."""

    child: str
    to_cluster: str
    reason: str = ""


GangAction = Literal["reserve", "start", "release"]


class GangControl(Message, frozen=True, kw_only=True, tag="sched.gang.control.v1"):
    """The global-scheduler steering a child's reservation in ``cluster``: hold its whole gang
    (``reserve``), turn the held reservation into bindings (``start``), or give it back (``release``)."""

    child: str
    cluster: str
    action: GangAction
    attempt: int


class ReservationHeld(Message, frozen=True, kw_only=True, tag="sched.reservation.held.v1"):
    """``cluster`` holds every pod of the child's gang on its nodes (bound, not started)."""

    child: str
    cluster: str
    hyperjob: str
    attempt: int

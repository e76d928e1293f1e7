"""The cross-cluster gang: reserve every child's gang first, bind only once enough hold.

``start_gang`` opens an attempt; ``gang_step(gang, event, now)`` is the whole state machine:

    Reserving --(held ≥ required)--> Bound
    Reserving --(deadline passes)--> Released   (every reservation released; retry at retry_at)
    Released/Bound: late or duplicate events are harmless (a reservation that turns up after the
    release is released again; a child held after Bound binds at once).

``required`` is the HyperJob's ``minAvailable`` (children; default all). When it is at most one
child, no cross-cluster reservation is needed and the attempt binds at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

GANG_TIMEOUT = 60.0
"""Seconds the reservations of one attempt may take to all hold (scenario-format.md)."""

GangPhase = Literal["Reserving", "Bound", "Released"]


class HyperJobGang(msgspec.Struct, frozen=True, kw_only=True):
    """One reservation attempt of a HyperJob's children (child → cluster)."""

    hyperjob: str
    children: dict[str, str]
    required: int
    phase: GangPhase = "Reserving"
    held: tuple[str, ...] = ()
    bound: tuple[str, ...] = ()
    deadline: float = 0.0
    timeout: float = GANG_TIMEOUT
    attempt: int = 1
    retry_at: float | None = None


# -- events (from the cluster-schedulers and the driver's timer) ----------------------------------


class ReservationHeld(msgspec.Struct, frozen=True, kw_only=True):
    child: str
    cluster: str


class ReservationLost(msgspec.Struct, frozen=True, kw_only=True):
    """A held reservation the cluster could not keep (preempted, node lost)."""

    child: str
    cluster: str


class GangTimer(msgspec.Struct, frozen=True, kw_only=True):
    """The driver's timer for ``deadline`` fired (a timer for an older attempt is ignored)."""

    attempt: int


GangEvent = ReservationHeld | ReservationLost | GangTimer


# -- decisions -----------------------------------------------------------------------------------


class Reserve(msgspec.Struct, frozen=True, kw_only=True):
    """Ask ``cluster`` to hold the child's whole gang without binding (emits nothing visible)."""

    child: str
    cluster: str


class Bind(msgspec.Struct, frozen=True, kw_only=True):
    """Turn the child's reservation into bindings: its pods start."""

    child: str
    cluster: str


class Release(msgspec.Struct, frozen=True, kw_only=True):
    """Drop the child's reservation (or a pending request for one)."""

    child: str
    cluster: str


class StartTimer(msgspec.Struct, frozen=True, kw_only=True):
    """Deliver ``GangTimer(attempt)`` at ``at``."""

    attempt: int
    at: float


class Retry(msgspec.Struct, frozen=True, kw_only=True):
    """The attempt failed: re-plan (``plan_split``) and ``start_gang`` again at ``at``."""

    hyperjob: str
    attempt: int
    at: float
    reason: str


GangDecision = Reserve | Bind | Release | StartTimer | Retry


def start_gang(
    hyperjob: str,
    children: Mapping[str, str],
    required: int | None,
    now: float,
    *,
    attempt: int = 1,
    timeout: float = GANG_TIMEOUT,
) -> tuple[HyperJobGang, list[GangDecision]]:
    """Open a reservation attempt for ``children`` (name → cluster, in plan order).

    ``required`` None means every child. With at most one required child the gang binds at once.
    """
    need = len(children) if required is None else min(required, len(children))
    gang = HyperJobGang(
        hyperjob=hyperjob,
        children=dict(children),
        required=need,
        deadline=now + timeout,
        timeout=timeout,
        attempt=attempt,
    )
    if need <= 1:
        bound = tuple(children)
        return (
            msgspec.structs.replace(gang, phase="Bound", held=bound, bound=bound),
            [Bind(child=c, cluster=k) for c, k in children.items()],
        )
    decisions: list[GangDecision] = [Reserve(child=c, cluster=k) for c, k in children.items()]
    decisions.append(StartTimer(attempt=attempt, at=gang.deadline))
    return gang, decisions


def gang_step(
    gang: HyperJobGang, event: GangEvent, now: float, retry_delay: float = 0.0
) -> tuple[HyperJobGang, list[GangDecision]]:
    """Apply one event; idempotent for duplicates, stale attempts and unknown children."""
    if isinstance(event, GangTimer):
        return _timeout(gang, event, now, retry_delay)
    if gang.children.get(event.child) != event.cluster:
        return gang, []  # not this attempt's child (or not there): stale
    if isinstance(event, ReservationLost):
        if gang.phase != "Reserving" or event.child not in gang.held:
            return gang, []
        return msgspec.structs.replace(gang, held=tuple(c for c in gang.held if c != event.child)), []
    return _held(gang, event)


def _held(gang: HyperJobGang, event: ReservationHeld) -> tuple[HyperJobGang, list[GangDecision]]:
    if gang.phase == "Released":
        return gang, [Release(child=event.child, cluster=event.cluster)]  # late: give it back
    if event.child in gang.held:
        return gang, []
    held = gang.held + (event.child,)
    if gang.phase == "Bound":
        return (
            msgspec.structs.replace(gang, held=held, bound=gang.bound + (event.child,)),
            [Bind(child=event.child, cluster=event.cluster)],
        )
    if len(held) < gang.required:
        return msgspec.structs.replace(gang, held=held), []
    ordered = tuple(c for c in gang.children if c in held)
    return (
        msgspec.structs.replace(gang, phase="Bound", held=ordered, bound=ordered),
        [Bind(child=c, cluster=gang.children[c]) for c in ordered],
    )


def _timeout(
    gang: HyperJobGang, event: GangTimer, now: float, retry_delay: float
) -> tuple[HyperJobGang, list[GangDecision]]:
    if gang.phase != "Reserving" or event.attempt != gang.attempt or now < gang.deadline:
        return gang, []
    missing = [c for c in gang.children if c not in gang.held]
    reason = (
        f"cross-cluster gang: {len(gang.held)}/{gang.required} reservations held within "
        f"{gang.timeout:g}s; missing " + ", ".join(f"{c} on {gang.children[c]}" for c in missing)
    )
    released: list[GangDecision] = [Release(child=c, cluster=k) for c, k in gang.children.items()]
    retry_at = now + retry_delay
    released.append(Retry(hyperjob=gang.hyperjob, attempt=gang.attempt + 1, at=retry_at, reason=reason))
    return msgspec.structs.replace(gang, phase="Released", held=(), retry_at=retry_at), released


def release_gang(gang: HyperJobGang) -> tuple[HyperJobGang, list[GangDecision]]:
    """Suspend, delete or a re-plan: drop every reservation not yet bound."""
    if gang.phase != "Reserving":
        return gang, []
    return (
        msgspec.structs.replace(gang, phase="Released", held=()),
        [Release(child=c, cluster=k) for c, k in gang.children.items()],
    )

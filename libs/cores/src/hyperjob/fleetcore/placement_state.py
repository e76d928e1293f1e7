"""Where one child job is, as the global-scheduler tracks it: a state machine over placement events.

    (none) ──Requested──► Waiting ──Dispatch(c)──► Dispatched(c) ──Remove──► Removing ──Removed(c)──► (gone)
                          │  ▲                      │   │                      │ ▲
                  Remove  │  │ Removed(c, refused)  │   └─Move(d)─► Dispatched(d)   Requested │ │ Remove
                 (gone) ◄─┘  └──────────────────────┘     Move("") ─► Unplaced       ▼ │
                                                                                  Replacing ──Removed(c)──► Waiting

A child that never left the waiting line is simply forgotten when removed; one that runs is
removed from its cluster (even one that is down: the command waits in its stream until the
cluster returns). A changed child keeps its name, so its new request waits (``Replacing``) until
the previous child of that name is gone from its cluster. Pure: each step returns the new state
and the commands for the driver; an event that does not apply changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec

PlacementState = Literal["Waiting", "Dispatched", "Unplaced", "Removing", "Replacing"]
QUEUE_WAIT = "waiting for its queue to admit it"


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    state: PlacementState = "Waiting"
    cluster: str = ""
    reason: str = QUEUE_WAIT


# -- events ----------------------------------------------------------------------------------------


class Requested(msgspec.Struct, frozen=True, kw_only=True):
    """The splitter asks for the child (first time, or a changed child of the same name)."""


class Dispatch(msgspec.Struct, frozen=True, kw_only=True):
    """The global-scheduler chose ``cluster`` (it fits there, or the gang reserves there)."""

    cluster: str


class Wait(msgspec.Struct, frozen=True, kw_only=True):
    reason: str


class Remove(msgspec.Struct, frozen=True, kw_only=True):
    pass


class Move(msgspec.Struct, frozen=True, kw_only=True):
    """Failover: run it on ``to_cluster`` instead (``""``: nowhere for now)."""

    to_cluster: str
    reason: str = ""


class Removed(msgspec.Struct, frozen=True, kw_only=True):
    """``cluster`` no longer has the child (removed, or refused it at dispatch with ``refused``)."""

    cluster: str
    refused: str = ""


PlacementEvent = Requested | Dispatch | Wait | Remove | Move | Removed


# -- commands --------------------------------------------------------------------------------------


class DispatchTo(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str


class RemoveFrom(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str


class Announce(msgspec.Struct, frozen=True, kw_only=True):
    """Tell whoever waits why the child waits now."""

    reason: str


class Forget(msgspec.Struct, frozen=True, kw_only=True):
    """The child is gone: drop its record (``unplaced``: it never ran anywhere, say it is gone)."""

    unplaced: bool = False


class PlaceNext(msgspec.Struct, frozen=True, kw_only=True):
    """The predecessor is gone: the waiting replacement becomes the request."""


PlacementCommand = DispatchTo | RemoveFrom | Announce | Forget | PlaceNext


def placement_step(current: Placement | None, event: PlacementEvent) -> tuple[Placement | None, list[PlacementCommand]]:
    """The next state of a child's placement and what to do about it."""
    if current is None:
        return (Placement(), []) if isinstance(event, Requested) else (None, [])
    handler = _HANDLERS.get((current.state, type(event)))
    return handler(current, event) if handler is not None else (current, [])


def _request(p: Placement, e: PlacementEvent) -> tuple[Placement | None, list[PlacementCommand]]:
    if p.state == "Removing":
        return msgspec.structs.replace(
            p, state="Replacing", reason="waiting for the previous child of this name to be removed"
        ), []
    return msgspec.structs.replace(p, state="Waiting", cluster="", reason=QUEUE_WAIT), []


def _dispatch(p: Placement, e: Dispatch) -> tuple[Placement | None, list[PlacementCommand]]:
    return Placement(state="Dispatched", cluster=e.cluster, reason=""), [DispatchTo(cluster=e.cluster)]


def _wait(p: Placement, e: Wait) -> tuple[Placement | None, list[PlacementCommand]]:
    if e.reason == p.reason:
        return p, []
    return msgspec.structs.replace(p, reason=e.reason), [Announce(reason=e.reason)]


def _forget(p: Placement, e: Remove) -> tuple[Placement | None, list[PlacementCommand]]:
    return None, [Forget(unplaced=True)]


def _remove(p: Placement, e: Remove) -> tuple[Placement | None, list[PlacementCommand]]:
    return msgspec.structs.replace(p, state="Removing", reason=""), [RemoveFrom(cluster=p.cluster)]


def _withdraw_replacement(p: Placement, e: Remove) -> tuple[Placement | None, list[PlacementCommand]]:
    return msgspec.structs.replace(p, state="Removing"), []


def _move(p: Placement, e: Move) -> tuple[Placement | None, list[PlacementCommand]]:
    if p.state == "Dispatched" and p.cluster == e.to_cluster:
        return p, []  # already there: a repeated move changes nothing
    commands: list[PlacementCommand] = [RemoveFrom(cluster=p.cluster)] if p.state == "Dispatched" else []
    if not e.to_cluster:
        return Placement(state="Unplaced", reason=e.reason), [*commands, Announce(reason=e.reason)]
    return Placement(state="Dispatched", cluster=e.to_cluster, reason=""), [*commands, DispatchTo(cluster=e.to_cluster)]


def _removed(p: Placement, e: Removed) -> tuple[Placement | None, list[PlacementCommand]]:
    if e.cluster != p.cluster:
        return p, []  # news from a cluster the child already left
    if p.state == "Removing":
        return None, [Forget()]
    if p.state == "Replacing":
        return Placement(), [PlaceNext()]
    # Dispatched, and the cluster refused it: it waits and is placed again.
    return Placement(reason=e.refused or QUEUE_WAIT), [Announce(reason=e.refused)] if e.refused else []


Handler = Callable[[Placement, Any], tuple[Placement | None, list[PlacementCommand]]]
_HANDLERS: dict[tuple[str, type], Handler] = {
    ("Waiting", Requested): _request,
    ("Unplaced", Requested): _request,
    ("Removing", Requested): _request,
    ("Replacing", Requested): lambda p, e: (p, []),
    ("Waiting", Dispatch): _dispatch,
    ("Unplaced", Dispatch): _dispatch,
    ("Waiting", Wait): _wait,
    ("Unplaced", Wait): _wait,
    ("Waiting", Remove): _forget,
    ("Unplaced", Remove): _forget,
    ("Dispatched", Remove): _remove,
    ("Replacing", Remove): _withdraw_replacement,
    ("Waiting", Move): _move,
    ("Unplaced", Move): _move,
    ("Dispatched", Move): _move,
    ("Removing", Removed): _removed,
    ("Replacing", Removed): _removed,
    ("Dispatched", Removed): _removed,
}

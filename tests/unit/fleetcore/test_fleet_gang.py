"""The cross-cluster gang: all-or-nothing reservations, bind only when enough hold, release on timeout."""

from __future__ import annotations

import pytest

from hyperjob.fleetcore import (
    Bind,
    GangTimer,
    Release,
    ReservationHeld,
    ReservationLost,
    Reserve,
    Retry,
    StartTimer,
    gang_step,
    release_gang,
    start_gang,
)

CHILDREN = {"hj-w-0": "a", "hj-w-1": "b", "hj-w-2": "c"}


def held(child: str) -> ReservationHeld:
    return ReservationHeld(child=child, cluster=CHILDREN[child])


def run(events: list, required: int | None = None):
    gang, decisions = start_gang("hj", CHILDREN, required, now=0.0)
    log = [decisions]
    for at, event in events:
        gang, decisions = gang_step(gang, event, at)
        log.append(decisions)
    return gang, log


def test_start_reserves_every_child_and_arms_the_timer() -> None:
    _, (decisions,) = run([])
    assert decisions == [
        Reserve(child="hj-w-0", cluster="a"),
        Reserve(child="hj-w-1", cluster="b"),
        Reserve(child="hj-w-2", cluster="c"),
        StartTimer(attempt=1, at=60.0),
    ]


def test_binds_only_once_every_reservation_holds() -> None:
    gang, log = run([(1.0, held("hj-w-2")), (2.0, held("hj-w-0")), (3.0, held("hj-w-1"))])
    assert log[1] == [] and log[2] == []
    assert log[3] == [
        Bind(child="hj-w-0", cluster="a"),
        Bind(child="hj-w-1", cluster="b"),
        Bind(child="hj-w-2", cluster="c"),
    ]
    assert gang.phase == "Bound"


def test_min_available_two_binds_the_first_two_then_the_third_at_once() -> None:
    gang, log = run([(1.0, held("hj-w-1")), (2.0, held("hj-w-0")), (5.0, held("hj-w-2"))], required=2)
    assert log[2] == [Bind(child="hj-w-0", cluster="a"), Bind(child="hj-w-1", cluster="b")]
    assert log[3] == [Bind(child="hj-w-2", cluster="c")]


def test_timeout_releases_every_reservation_and_asks_for_a_retry() -> None:
    gang, log = run([(1.0, held("hj-w-0")), (60.0, GangTimer(attempt=1))])
    assert gang.phase == "Released" and gang.held == ()
    releases = [d for d in log[2] if isinstance(d, Release)]
    assert releases == [Release(child=c, cluster=k) for c, k in CHILDREN.items()]
    (retry,) = [d for d in log[2] if isinstance(d, Retry)]
    assert retry.attempt == 2 and retry.at == 60.0
    assert "1/3 reservations held within 60s; missing hj-w-1 on b, hj-w-2 on c" in retry.reason


def test_a_reservation_held_after_the_release_is_released_again() -> None:
    _, log = run([(60.0, GangTimer(attempt=1)), (61.0, held("hj-w-1"))])
    assert log[2] == [Release(child="hj-w-1", cluster="b")]


@pytest.mark.parametrize(
    "event",
    [
        pytest.param((1.0, ReservationHeld(child="other", cluster="a")), id="unknown-child"),
        pytest.param((1.0, ReservationHeld(child="hj-w-0", cluster="b")), id="wrong-cluster"),
        pytest.param((30.0, GangTimer(attempt=1)), id="timer-early"),
        pytest.param((90.0, GangTimer(attempt=7)), id="timer-of-another-attempt"),
    ],
)
def test_stale_events_change_nothing(event: tuple) -> None:
    gang, log = run([event])
    assert gang.phase == "Reserving" and gang.held == () and log[1] == []


def test_duplicate_held_is_idempotent_and_a_lost_reservation_no_longer_counts() -> None:
    gang, log = run(
        [
            (1.0, held("hj-w-0")),
            (2.0, held("hj-w-0")),
            (3.0, ReservationLost(child="hj-w-0", cluster="a")),
            (4.0, held("hj-w-1")),
            (5.0, held("hj-w-2")),
        ]
    )
    assert log[2] == [] and gang.phase == "Reserving" and gang.held == ("hj-w-1", "hj-w-2")


def test_one_required_child_needs_no_reservation() -> None:
    gang, decisions = start_gang("hj", {"hj-w-0": "a"}, None, now=0.0)
    assert gang.phase == "Bound" and decisions == [Bind(child="hj-w-0", cluster="a")]


def test_suspend_releases_an_open_attempt() -> None:
    gang, _ = run([(1.0, held("hj-w-0"))])
    released, decisions = release_gang(gang)
    assert released.phase == "Released" and len(decisions) == 3
    assert release_gang(released) == (released, [])

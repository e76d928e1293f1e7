"""The splitter's working room (``Room.working``) extends its last computation by the promises
made since, instead of placing every promised gang again: whatever the sequence of promises,
withdrawals, summaries and exclusions, it is the room a placement of every promise from scratch
leaves (issue 30: a burst of 100 HyperJobs placed 10,650 gangs to plan them)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperjob import fleetcore
from hyperjob.fleetcore import place_gang
from hyperjob.records.capacity import Capacity
from hyperjob.services.splitter.room import Room

CLUSTERS = ("a", "b")
NOW = 1000.0


@dataclass
class Clock:
    at: float = NOW

    def now(self) -> float:
        return self.at


@dataclass
class Counted:
    """``fleetcore.place_gang``, counting its calls."""

    calls: int = 0

    def __call__(self, cluster: fleetcore.ClusterCapacity, pods: list[fleetcore.PodShape]) -> object:
        self.calls += 1
        return place_gang(cluster, pods)


def cluster(name: str, gpus: int = 8, nodes: int = 4) -> fleetcore.ClusterCapacity:
    node = fleetcore.NodeCapacity(
        name=f"{name}-node",
        free={"cpu": 64.0, fleetcore.GPU: float(gpus)},
        allocatable={"cpu": 64.0, fleetcore.GPU: float(gpus)},
        count=nodes,
    )
    total = {"cpu": 64.0 * nodes, fleetcore.GPU: float(gpus * nodes)}
    return fleetcore.ClusterCapacity(
        name=name, free=total, allocatable=total, nodes=(node,), last_report=NOW, ready=True
    )


def gang(size: int, gpus: int) -> list[fleetcore.PodShape]:
    return [fleetcore.PodShape(request={"cpu": 1.0, fleetcore.GPU: float(gpus)})] * size


def room_with(clusters: list[fleetcore.ClusterCapacity]) -> tuple[Room, Capacity, Clock]:
    capacity, clock = Capacity(), Clock()
    capacity.clusters = {c.name: c for c in clusters}
    return Room(SimpleNamespace(capacity=capacity, rt=clock)), capacity, clock  # type: ignore[arg-type]


def from_scratch(room: Room, capacity: Capacity, exclude: frozenset[str]) -> dict[str, fleetcore.ClusterCapacity]:
    """What ``working`` is to return: every promise placed in order on the live summaries."""
    working = dict(capacity.live(NOW))
    for child, (name, pods, _) in room.moving.items():
        if child not in exclude and name in working:
            placed = fleetcore.place_gang(working[name], pods)
            if not isinstance(placed, str):
                working[name] = placed
    return working


operation = st.one_of(
    st.tuples(st.just("promise"), st.integers(0, 7), st.sampled_from(CLUSTERS), st.integers(1, 6), st.integers(1, 4)),
    st.tuples(st.just("withdraw"), st.integers(0, 7)),
    st.tuples(st.just("summary"), st.sampled_from(CLUSTERS), st.integers(0, 8)),
    st.tuples(st.just("working"), st.frozensets(st.integers(0, 7), max_size=2)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=30))
def test_the_working_room_is_every_promise_placed_from_scratch(operations: list[tuple[object, ...]]) -> None:
    room, capacity, clock = room_with([cluster(name) for name in CLUSTERS])
    for op in operations:
        match op:
            case ("promise", child, name, size, gpus):
                room.moving[f"c{child}"] = (str(name), gang(int(size), int(gpus)), clock.now())
            case ("withdraw", child):
                room.moving.pop(f"c{child}", None)
            case ("summary", name, gpus):  # a new summary, though it may say the same
                capacity.clusters[str(name)] = cluster(str(name), gpus=int(gpus))
            case ("working", excluded):
                exclude = frozenset(f"c{c}" for c in excluded)
                assert room.working(NOW, exclude) == from_scratch(room, capacity, exclude)
    assert room.working(NOW) == from_scratch(room, capacity, frozenset())


def test_a_burst_places_each_promise_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten splits of a burst, each promising its gang after planning on the working room: each
    gang is placed once, not once per later split (55 placements before)."""
    counted = Counted()
    monkeypatch.setattr(fleetcore, "place_gang", counted)
    room, capacity, clock = room_with([cluster("a", nodes=100)])
    for split in range(10):
        room.working(NOW)
        room.moving[f"c{split}"] = ("a", gang(8, 1), clock.now())
    working = room.working(NOW)
    assert counted.calls == 10
    assert working["a"].free[fleetcore.GPU] == 800 - 80


def test_a_child_promised_again_takes_its_new_room() -> None:
    room, capacity, clock = room_with([cluster("a")])
    room.moving["c0"] = ("a", gang(2, 1), clock.now())
    assert room.working(NOW)["a"].free[fleetcore.GPU] == 30
    room.moving["c0"] = ("a", gang(2, 4), clock.now())  # same name, same place in the dict
    assert room.working(NOW)["a"].free[fleetcore.GPU] == 24


def test_a_promise_stops_counting_once_it_settled() -> None:
    room, capacity, clock = room_with([cluster("a")])
    room.moving["c0"] = ("a", gang(2, 1), clock.now())
    assert room.working(NOW)["a"].free[fleetcore.GPU] == 30
    clock.at += 61.0
    assert room.working(NOW)["a"] == capacity.clusters["a"]
    assert room.moving == {}

"""CycleState: per-cycle data under typed keys, built once, gone with the session."""

from __future__ import annotations

from hyperjob.schedcore import Scheduler
from hyperjob.schedcore.cyclestate import CycleState, StateKey
from hyperjob.schedcore.testing import job, node, queue, snapshot

COUNT: StateKey[list[int]] = StateKey("test.count")


def test_a_value_is_built_once_and_kept_for_the_cycle():
    state = CycleState()
    built: list[int] = []

    def build() -> list[int]:
        built.append(1)
        return [len(built)]

    assert COUNT not in state
    assert state.get(COUNT, build) == [1]
    assert state.get(COUNT, build) == [1]
    assert built == [1] and COUNT in state


def test_keys_with_the_same_name_are_different_keys():
    state = CycleState()
    other: StateKey[list[int]] = StateKey("test.count")
    state.get(COUNT, lambda: [1])
    assert state.get(other, lambda: [2]) == [2]


def test_each_session_starts_with_an_empty_state():
    snap = snapshot([node("n1").cpu(4).mem("8Gi").tier(1, "s1")], [queue("default")], [job("j").min(2).tasks(2, cpu=1)])
    scheduler = Scheduler()
    first = scheduler.open(snap)
    first.cycle_state.get(COUNT, lambda: [1])
    assert COUNT not in scheduler.open(snap).cycle_state

"""The agenda orders entries by (time, rank, sequence), replaces and cancels by key."""

from __future__ import annotations

from simulator.agenda import INTERNAL, SCENARIO, Agenda


def test_scenario_entries_come_first_at_the_same_instant_then_in_push_order() -> None:
    agenda = Agenda()
    agenda.push(5.0, "timer-a")
    agenda.push(5.0, "event-1", rank=SCENARIO)
    agenda.push(5.0, "timer-b", rank=INTERNAL)
    agenda.push(5.0, "event-2", rank=SCENARIO)
    agenda.push(1.0, "early")
    assert agenda.next_time() == 1.0
    assert agenda.pop_due(5.0) == ["early", "event-1", "event-2", "timer-a", "timer-b"]
    assert not agenda


def test_a_key_replaces_and_cancels_its_entry() -> None:
    agenda = Agenda()
    agenda.push(10.0, "old", key="k")
    agenda.push(20.0, "new", key="k")
    assert agenda.next_time() == 20.0
    agenda.push(30.0, "other", key="j")
    agenda.cancel("k")
    assert agenda.pop_one(100.0) == "other"
    assert agenda.pop_one(100.0) is None
    assert agenda.next_time() is None


def test_nothing_is_due_before_its_time() -> None:
    agenda = Agenda()
    agenda.push(2.0, "x")
    assert agenda.pop_one(1.999) is None
    assert agenda.pop_due(2.0) == ["x"]

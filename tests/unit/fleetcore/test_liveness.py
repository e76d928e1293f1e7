"""Silence judged only while the judge hears; failovers paused when most clusters look lost, and
rate-limited otherwise."""

from __future__ import annotations

from hyperjob.fleetcore import FailoverGate, Hearing, forgive


def test_a_break_in_hearing_is_not_counted_as_any_sources_silence() -> None:
    hearing = Hearing(gap=10.0)
    assert hearing.heard(0.0) == 0.0  # the first report
    assert hearing.heard(1.0) == 0.0 and hearing.heard(2.0) == 0.0  # heard without a break
    assert hearing.heard(62.0) == 60.0  # 60 s of nothing at all: the judge was cut off
    # A source last heard at 1.0 has been silent 1 s of the time the judge could hear, not 61 s.
    assert forgive(1.0, 60.0, now=62.0) == 61.0
    assert forgive(2.0, 60.0, now=62.0) == 62.0  # never later than now


def test_a_late_report_does_not_move_hearing_back() -> None:
    hearing = Hearing(gap=10.0)
    hearing.heard(5.0)
    assert hearing.heard(3.0) == 0.0
    assert hearing.last == 5.0


def test_failovers_pause_while_most_clusters_look_lost() -> None:
    gate = FailoverGate(rate=1.0, burst=5)
    assert gate.paused({"a", "b"}, {"a", "b", "c"})
    assert not gate.paused({"a"}, {"a", "b", "c"})
    assert not gate.paused({"a"}, {"a", "b"})  # one of two: a cluster failing, not us
    assert gate.paused({"a", "b"}, {"a", "b"})
    assert not gate.paused({"a"}, {"a"})  # alone, there is nowhere to move to anyway


def test_failovers_spend_a_bucket_that_refills_at_the_rate() -> None:
    gate = FailoverGate(rate=0.5, burst=2)
    assert gate.take(0.0) and gate.take(0.0)
    assert not gate.take(0.0)
    assert not gate.take(1.0)  # half a move earned
    assert gate.take(2.0)
    assert gate.take(100.0) and gate.take(100.0) and not gate.take(100.0)  # never beyond the burst

"""Silence judged only while the judge hears; failovers paused when most clusters look lost, and
rate-limited otherwise."""

from __future__ import annotations

from hyperjob.fleetcore import FailoverGate, Hearing


def test_a_break_in_hearing_restarts_every_silence_at_the_resumption() -> None:
    hearing = Hearing(gap=10.0)
    assert hearing.heard(0.0)  # the first report starts hearing
    assert not hearing.heard(1.0) and not hearing.heard(2.0)
    assert hearing.forgiven(1.0) == 1.0  # heard continuously: silence counts from the source's report
    assert hearing.heard(62.0)  # 60 s of nothing at all: the judge was cut off, not the sources
    assert hearing.forgiven(1.0) == 62.0
    assert not hearing.heard(63.0) and hearing.forgiven(1.0) == 62.0


def test_a_late_report_does_not_move_hearing_back() -> None:
    hearing = Hearing(gap=10.0)
    hearing.heard(5.0)
    hearing.heard(3.0)
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

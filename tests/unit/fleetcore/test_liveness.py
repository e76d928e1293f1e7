"""Silence judged only while the judge hears; failovers paused when most clusters look lost, and
rate-limited otherwise."""

from __future__ import annotations

from hyperjob.fleetcore import BusWeather, FailoverGate, Hearing, forgive


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


def test_a_silent_node_on_a_fair_bus_is_lost_after_the_timeout() -> None:
    weather = BusWeather(10.0)
    for t in range(20):
        weather.beat("a", float(t), t + 0.01)  # beats arrive at once
        weather.beat("b", float(t), t + 0.02)
    assert weather.limit(20.0) == 10.0


def test_late_beats_are_a_troubled_bus_and_give_silent_nodes_the_stormy_timeout() -> None:
    weather = BusWeather(10.0, stormy=30.0, late=2.5)
    weather.beat("a", 0.0, 0.01)
    weather.beat("a", 1.0, 1.01)
    weather.beat("a", 5.0, 9.0)  # held up 4 s by the bus (a server lost, a stream leader elected)
    assert weather.limit(12.0) == 30.0  # the agents reconnecting elsewhere are not lost at 10 s
    assert weather.limit(39.0) == 30.0
    assert weather.limit(40.0) == 10.0  # fair again for a whole stormy period: back to the timeout


def test_a_constant_clock_skew_is_not_lateness() -> None:
    weather = BusWeather(10.0, late=2.5)
    for t in range(10):
        weather.beat("skewed", float(t), t + 7.0)  # its clock is 7 s behind ours, the bus prompt
    assert weather.limit(10.0) == 10.0
    weather.beat("skewed", 10.0, 20.0)  # 3 s later than its usual
    assert weather.limit(20.0) == 30.0


def test_the_judges_own_deafness_is_trouble_too() -> None:
    weather = BusWeather(10.0)
    weather.trouble(100.0)
    assert weather.limit(110.0) == 30.0 and weather.limit(131.0) == 10.0

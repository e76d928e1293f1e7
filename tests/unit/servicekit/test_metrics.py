"""The bus metrics every service keeps (``servicekit.metrics``) and the status-aggregator's pure
parts of its HyperJob metrics: what one handled batch counts, and which plan changes are failovers."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from hyperjob import events
from hyperjob.bus import Delivery
from hyperjob.servicekit.metrics import BusMetrics
from hyperjob.services.status_aggregator import domain, metrics


def delivery(subject: str, num_delivered: int = 1) -> Delivery:
    return Delivery(subject=subject, data=b"{}", headers={}, num_delivered=num_delivered)


def test_a_batch_counts_each_delivery_by_subject_and_outcome_and_its_time_once_per_subject() -> None:
    registry = CollectorRegistry()
    bus = BusMetrics(registry)
    batch = [delivery("job.phase.a"), delivery("job.phase.a", num_delivered=3), delivery("job.phase.b")]
    bus.batch(batch, {1: ValueError("bad")}, 0.02)
    value = registry.get_sample_value
    assert value("hyperjob_bus_messages_handled_total", {"subject": "job.phase.a", "outcome": "ok"}) == 1
    assert value("hyperjob_bus_messages_handled_total", {"subject": "job.phase.a", "outcome": "failed"}) == 1
    assert value("hyperjob_bus_messages_handled_total", {"subject": "job.phase.b", "outcome": "ok"}) == 1
    assert value("hyperjob_bus_redeliveries_total", {"subject": "job.phase.a"}) == 1
    assert value("hyperjob_bus_redeliveries_total", {"subject": "job.phase.b"}) is None
    assert value("hyperjob_bus_handler_duration_seconds_count", {"subject": "job.phase.a"}) == 1
    assert value("hyperjob_bus_handler_duration_seconds_bucket", {"subject": "job.phase.b", "le": "0.025"}) == 1
    assert value("hyperjob_bus_handler_duration_seconds_bucket", {"subject": "job.phase.b", "le": "0.01"}) == 0
    bus.batch([delivery("job.phase.b")], None, 0.01)  # the batch raised: every delivery failed
    assert value("hyperjob_bus_messages_handled_total", {"subject": "job.phase.b", "outcome": "failed"}) == 1


def ref(name: str, cluster: str) -> events.ChildRef:
    return events.ChildRef(name=name, cluster=cluster, replicas=1)


def test_a_failover_is_a_child_that_left_the_cluster_it_was_on() -> None:
    old = [ref("a", "c1"), ref("b", "c2"), ref("c", "")]
    new = [ref("a", "c3"), ref("b", "c2"), ref("c", "c1"), ref("d", "c1")]
    assert domain.failovers(old, new) == [("c1", "c3")]  # c: placed for the first time; d: new
    assert domain.failovers(old, [ref("a", ""), ref("b", "c2")]) == [("c1", "none")]  # withdrawn to wait


def test_the_census_counts_phases_and_the_waiting_by_reason_code_per_namespace() -> None:
    specs = [
        ("a", domain.SpecDoc(name="a", waiting_reason="queue q is Closed")),
        ("b", domain.SpecDoc(name="b")),
        ("c", domain.SpecDoc(name="c")),
        ("team-a/b", domain.SpecDoc(name="team-a/b")),
    ]
    statuses = {
        "b": domain.AggregateDoc(name="b", phase="Admitted", waiting_reason="cluster c1 lacks nvidia.com/gpu"),
        "c": domain.AggregateDoc(name="c", phase="Running", waiting_reason="stale"),
        "team-a/b": domain.AggregateDoc(name="team-a/b", phase="Admitted", waiting_reason="queue q is Closed"),
    }
    by_phase, by_reason = metrics.census(specs, statuses)
    assert by_phase == {("default", "Pending"): 1, ("default", "Admitted"): 1, ("default", "Running"): 1,
                        ("team-a", "Admitted"): 1}  # fmt: skip
    # a running one waits for nothing
    assert by_reason == {("default", "QueueLimit"): 1, ("default", "Unschedulable"): 1, ("team-a", "QueueLimit"): 1}


async def test_a_round_is_timed_under_its_name_even_when_it_fails() -> None:
    registry = CollectorRegistry()
    bus = BusMetrics(registry)

    async def failing() -> None:
        raise RuntimeError("store down")

    async def fine() -> None:
        return None

    await bus.timed("cycle", fine)()
    try:
        await bus.timed("cycle", failing)()
    except RuntimeError:
        pass
    assert registry.get_sample_value("hyperjob_round_duration_seconds_count", {"round": "cycle"}) == 2

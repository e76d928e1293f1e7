"""The Events a person sees for the fleet's coordinated preemption (ADR 0011): the HyperJob says
which cluster evicts what and the work lost; each victim Job says it was preempted, and for whom."""

from __future__ import annotations

from hyperjob import events
from hyperjob.client import eventlog


def test_a_preemption_order_is_a_preempting_event_on_the_hyperjob_and_preempted_on_each_victim() -> None:
    order = events.PreemptForGang(
        event_id="e1",
        child="urgent-job-0",
        cluster="cluster-a",
        hyperjob="urgent",
        attempt=1,
        victims=[events.PreemptVictims(job="batch-a", pods=["batch-a-w-0", "batch-a-w-1"])],
        reason="preempting for urgent (...): 720 GPU-s of work lost",
    )
    found = {(e.object, e.type, e.reason): e.message for e in eventlog.derive([(order, 60.0)])}
    assert found[("hyperjob/urgent", "Warning", "Preempting")] == (
        "cluster cluster-a evicts batch-a (2 pods): preempting for urgent (...): 720 GPU-s of work lost"
    )
    assert found[("job/batch-a", "Warning", "Preempted")] == (
        "2 pods preempted on cluster cluster-a for HyperJob urgent (higher priority)"
    )


def test_the_events_read_the_subject_the_preemption_orders_go_on() -> None:
    """``get events`` reads stored messages by subject: the orders' (each cluster's gang control)
    must be among them, or no one sees Preempting (as happened live before this test)."""
    subject = events.subjects.gang_control("cluster-a").split(".")
    assert any(
        len(pattern.split(".")) == len(subject)
        and all(p in ("*", s) for p, s in zip(pattern.split("."), subject, strict=True))
        for pattern in eventlog.SUBJECTS
    )

"""Redelivered, duplicate and stale events change nothing: decide is idempotent."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import Driver, admitted, task


def _running() -> Driver:
    d = Driver(admitted(task("worker", 2, template_restartPolicy="Never"), task("ps", 1)))
    d.start()
    d.run("job1-worker-0")
    d.run("job1-ps-0")
    return d


EVENTS = [
    jc.PodGroupAdmitted(job_version=0),
    jc.PodBound(pod="job1-worker-1", node="n2"),
    jc.PodRunning(pod="job1-worker-1"),
    jc.PodSucceeded(pod="job1-worker-0"),
    jc.PodFailed(pod="job1-worker-0", exit_code=3),
    jc.PodEvicted(pod="job1-worker-0", reason="nodeDown"),
    jc.PodRestarted(pod="job1-worker-0", restarts=2),
    jc.CommandIssued(action="abort"),
]


@pytest.mark.parametrize("event", EVENTS, ids=[type(e).__name__ for e in EVENTS])
def test_same_event_twice_changes_nothing_the_second_time(event):
    d = _running()
    record, _ = jc.decide(d.record, event, 5.0)
    again, effects = jc.decide(record, event, 6.0)
    assert again == record
    assert effects == []


@pytest.mark.parametrize(
    "event",
    [
        jc.PodRunning(pod="job1-worker-1", job_version=7),
        jc.PodFailed(pod="job1-worker-0", job_version=1),
        jc.PodEvicted(pod="job1-worker-0", uid="someone-else"),
        jc.PodBound(pod="job1-nope-0", node="n"),
        jc.PodGroupAdmitted(job_version=3),
        jc.PodGroupUnknown(job_version=9),
        jc.PodDeleted(pod="job1-worker-5"),
    ],
    ids=[
        "newer-version",
        "older-version",
        "uid-mismatch",
        "unknown-pod",
        "podgroup-of-another-version",
        "unknown-of-another-version",
        "deleted-unknown-pod",
    ],
)
def test_stale_or_foreign_events_change_nothing(event):
    d = _running()
    assert jc.decide(d.record, event, 5.0) == (d.record, [])


def test_events_of_the_previous_version_are_ignored_after_a_restart():
    d = _running()
    d.send(jc.CommandIssued(action="restart"))
    d.delete_terminating()
    d.send(jc.PodGroupAdmitted(job_version=1))
    assert d.pod("job1-worker-0").version == 1
    before = d.record
    assert d.send(jc.PodFailed(pod="job1-worker-0", job_version=0)) == []
    assert d.send(jc.PodGroupAdmitted(job_version=0)) == []
    assert d.record == before


def test_duplicate_eviction_without_uid_does_not_recreate_twice():
    d = _running()
    d.evict("job1-worker-0")
    again = d.send(jc.PodEvicted(pod="job1-worker-0", reason="nodeDown"))
    assert again == []
    assert d.pod("job1-worker-0").restarts == 1


def test_late_eviction_of_an_old_incarnation_is_ignored_with_uid():
    d = _running()
    old_uid = d.pod("job1-worker-0").uid
    d.evict("job1-worker-0")
    d.run("job1-worker-0")
    before = d.record
    assert d.send(jc.PodEvicted(pod="job1-worker-0", reason="nodeDown", uid=old_uid)) == []
    assert d.record == before


def test_finished_job_ignores_further_events():
    d = Driver(admitted(task("worker", 1, template_restartPolicy="Never")))
    d.start()
    d.run_all()
    d.succeed("job1-worker-0")
    assert d.record.phase == "Completed"
    for event in [jc.CommandIssued(action="SyncJob"), jc.PodGroupAdmitted(job_version=1)]:
        assert jc.decide(d.record, event, 9.0) == (d.record, [])


def test_decide_does_not_mutate_its_input():
    d = _running()
    snapshot = msgspec.json.encode(d.record)
    jc.decide(d.record, jc.CommandIssued(action="restart"), 1.0)
    assert msgspec.json.encode(d.record) == snapshot


def test_records_and_effects_round_trip_through_msgspec():
    d = _running()
    effects = d.send(jc.CommandIssued(action="restart"))
    record = msgspec.json.decode(msgspec.json.encode(d.record), type=jc.JobRecord)
    assert record == d.record
    decoded = msgspec.json.decode(msgspec.json.encode(effects), type=list[jc.Effect])
    assert decoded == effects
    event = jc.PodFailed(pod="p", exit_code=2)
    assert msgspec.json.decode(msgspec.json.encode(event), type=jc.JobEvent) == event


def test_redelivered_command_with_an_id_is_applied_once():
    d = _running()
    first = d.send(jc.CommandIssued(action="restart", id="cmd-1"))
    assert first
    before = d.record
    assert d.send(jc.CommandIssued(action="restart", id="cmd-1")) == []
    assert d.record == before
    assert d.send(jc.CommandIssued(action="abort", id="cmd-2")) != []

"""Delayed actions: policy timeouts as timers, and Volcano's cancellation rules."""

from __future__ import annotations

from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import Driver, admitted, of_type, phase_changes, task

PENDING_ABORT = [{"event": "PodPending", "action": "AbortJob", "timeout": "5m"}]


def _timers(effects):
    return of_type(effects, jc.StartTimer), of_type(effects, jc.CancelTimer)


def test_pod_pending_timeout_arms_a_timer_per_created_pod():
    d = Driver(admitted(task("worker", 2), policies=PENDING_ABORT), now=10.0)
    effects = d.start()
    started, _ = _timers(effects)
    assert [t.at for t in started] == [310.0, 310.0]
    assert len({t.key for t in started}) == 2
    assert set(d.record.delayed) == {"job1-worker-0", "job1-worker-1"}


def test_pod_pending_without_timeout_arms_nothing():
    d = Driver(admitted(task("worker", 2), policies=[{"event": "PodPending", "action": "AbortJob"}]))
    assert _timers(d.start()) == ([], [])


def test_pod_pending_timer_fires_and_aborts_the_job():
    d = Driver(admitted(task("worker", 1), policies=PENDING_ABORT))
    (timer,) = of_type(d.start(), jc.StartTimer)
    effects = d.send(jc.TimerFired(key=timer.key), now=timer.at)
    assert phase_changes(effects) == ["Aborting"]
    assert jc.JobPhaseChanged(old="Pending", new="Aborting", reason="PodPending: AbortJob (timeout)") in effects
    assert d.record.delayed == {}


def test_binding_cancels_the_pod_pending_delay():
    d = Driver(admitted(task("worker", 2), policies=PENDING_ABORT))
    started, _ = _timers(d.start())
    effects = d.send(jc.PodBound(pod="job1-worker-0", node="n1"))
    cancelled = of_type(effects, jc.CancelTimer)
    assert cancelled == [jc.CancelTimer(key=d.record.delayed.get("job1-worker-0", started[0]).key)]
    assert set(d.record.delayed) == {"job1-worker-1"}
    # The cancelled timer firing anyway (it raced the cancel) changes nothing.
    before = d.record
    assert d.send(jc.TimerFired(key=cancelled[0].key)) == []
    assert d.record == before


def test_pod_running_cancels_a_pod_evicted_delay():
    d = Driver(admitted(task("worker", 2), policies=[{"event": "PodEvicted", "action": "RestartJob", "timeout": "1m"}]))
    d.start()
    d.run_all()
    effects = d.evict("job1-worker-0")
    (timer,) = of_type(effects, jc.StartTimer)
    assert of_type(effects, jc.CreatePods) == []  # a delayed reaction does not sync (as Volcano)
    d.send(jc.CommandIssued(action="SyncJob"))  # an internal action: recreates, keeps the delay
    assert "job1-worker-0" in d.record.delayed
    d.send(jc.PodBound(pod="job1-worker-0", node="n2"))
    assert "job1-worker-0" in d.record.delayed  # binding is not Running
    effects = d.send(jc.PodRunning(pod="job1-worker-0"))
    assert of_type(effects, jc.CancelTimer) == [jc.CancelTimer(key=timer.key)]
    assert d.send(jc.TimerFired(key=timer.key)) == []
    assert d.record.phase == "Running"


def test_pod_failed_delay_fires_when_the_pod_stays_failed():
    d = Driver(
        admitted(
            task("worker", 2, template_restartPolicy="Never"),
            policies=[{"event": "PodFailed", "action": "RestartJob", "timeout": "30s"}],
        )
    )
    d.start()
    d.run_all()
    (timer,) = of_type(d.fail("job1-worker-1"), jc.StartTimer)
    assert timer.at == 30.0
    assert d.record.phase == "Running"
    effects = d.send(jc.TimerFired(key=timer.key), now=30.0)
    assert phase_changes(effects) == ["Restarting"]


def test_executing_a_non_internal_action_cancels_every_delay():
    d = Driver(admitted(task("worker", 2), policies=PENDING_ABORT))
    d.start()
    effects = d.send(jc.CommandIssued(action="terminate"))
    assert len(of_type(effects, jc.CancelTimer)) == 2
    assert d.record.delayed == {}


def test_same_delayed_action_is_not_rearmed():
    record = admitted(task("worker", 1))
    record, first = jc.policy.arm(record, "job1-worker-0", "AbortJob", "PodPending", 10.0)
    again, second = jc.policy.arm(record, "job1-worker-0", "AbortJob", "PodPending", 20.0)
    assert second == [] and again == record
    replaced, third = jc.policy.arm(record, "job1-worker-0", "RestartJob", "PodFailed", 30.0)
    assert [type(e) for e in third] == [jc.CancelTimer, jc.StartTimer]
    assert replaced.delayed["job1-worker-0"].action == "RestartJob"


def test_unknown_timer_key_changes_nothing():
    record = admitted(task("worker", 1))
    assert jc.decide(record, jc.TimerFired(key="nope"), 1.0) == (record, [])

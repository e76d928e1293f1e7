"""State × action → next phases and what is killed (Volcano's ``state/*.go`` table)."""

from __future__ import annotations

import pytest

from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import deleted, of_type, phase_changes, record_in

MIXED = {0: "Running", 1: "Succeeded", 2: "Failed", 3: "Pending"}
ALL = ["job1-worker-0", "job1-worker-1", "job1-worker-2", "job1-worker-3"]
LIVE = ["job1-worker-0", "job1-worker-3"]
NONE: dict[int, str] = {}

CASES = [
    # phase, pods, action, (task, pod), expected phase changes, killed, retry after
    ("Running", MIXED, "RestartJob", ("", ""), ["Restarting"], ALL, 1),
    ("Pending", MIXED, "RestartJob", ("", ""), ["Restarting"], ALL, 1),
    ("Running", MIXED, "RestartTask", ("worker", ""), ["Restarting"], ALL, 1),
    ("Running", MIXED, "RestartPod", ("worker", "job1-worker-0"), ["Restarting"], ["job1-worker-0"], 1),
    ("Running", MIXED, "RestartPartition", ("worker", ""), ["Restarting"], ALL, 1),
    ("Running", MIXED, "AbortJob", ("", ""), ["Aborting"], LIVE, 0),
    ("Pending", MIXED, "AbortJob", ("", ""), ["Aborting"], LIVE, 0),
    ("Running", MIXED, "CompleteJob", ("", ""), ["Completing"], LIVE, 0),
    ("Running", MIXED, "TerminateJob", ("", ""), ["Terminating"], LIVE, 0),
    ("Pending", NONE, "AbortJob", ("", ""), ["Aborting", "Aborted"], [], 0),
    ("Running", {0: "Succeeded", 1: "Succeeded"}, "CompleteJob", ("", ""), ["Completing", "Completed"], [], 0),
    ("Running", {0: "Running"}, "TerminateJob", ("", ""), ["Terminating"], ["job1-worker-0"], 0),
    ("Running", None, "ResumeJob", ("", ""), [], [], 0),
    ("Running", None, "SyncJob", ("", ""), [], [], 0),
    ("Pending", None, "SyncJob", ("", ""), ["Running"], [], 0),
    ("Restarting", NONE, "SyncJob", ("", ""), ["Pending"], [], 0),
    ("Restarting", {0: "Terminating"}, "SyncJob", ("", ""), [], [], 0),  # 4 - 1 terminating < minAvailable 4
    ("Restarting", {0: "Running", 1: "Terminating"}, "RestartJob", ("", ""), [], ["job1-worker-0"], 0),
    ("Restarting", {0: "Running"}, "AbortJob", ("", ""), [], ["job1-worker-0"], 0),  # abort ignored: KillJob(None)
    ("Restarting", {0: "Running"}, "RestartPod", ("worker", "job1-worker-0"), [], ["job1-worker-0"], 0),
    ("Aborting", {0: "Running"}, "ResumeJob", ("", ""), ["Restarting"], ["job1-worker-0"], 1),
    ("Aborting", {0: "Succeeded"}, "ResumeJob", ("", ""), ["Restarting", "Pending"], [], 1),
    ("Aborting", {0: "Terminating"}, "SyncJob", ("", ""), [], [], 0),
    ("Aborting", {0: "Succeeded"}, "SyncJob", ("", ""), ["Aborted"], [], 0),
    ("Aborted", {0: "Succeeded"}, "ResumeJob", ("", ""), ["Restarting", "Pending"], [], 1),
    ("Aborted", {0: "Running"}, "RestartJob", ("", ""), [], ["job1-worker-0"], 0),
    ("Completing", {0: "Running", 1: "Succeeded"}, "SyncJob", ("", ""), [], ["job1-worker-0"], 0),
    ("Completing", {1: "Succeeded"}, "SyncJob", ("", ""), ["Completed"], [], 0),
    ("Terminating", {1: "Failed"}, "AbortJob", ("", ""), ["Terminated"], [], 0),
    ("Terminating", {0: "Pending"}, "SyncJob", ("", ""), [], ["job1-worker-0"], 0),
    ("Completed", {0: "Running", 1: "Succeeded"}, "RestartJob", ("", ""), [], ["job1-worker-0"], 0),
    ("Terminated", {0: "Pending"}, "ResumeJob", ("", ""), [], ["job1-worker-0"], 0),
    ("Failed", {0: "Failed", 1: "Running"}, "SyncJob", ("", ""), [], ["job1-worker-1"], 0),
]


@pytest.mark.parametrize(
    ("phase", "pods", "action", "target", "changes", "killed", "retry"),
    CASES,
    ids=[
        f"{c[0]}-{c[2]}-pods[{''.join(p[0] for p in (c[1] if c[1] is not None else {0: 'R'}).values())}]"
        f"->{'>'.join(c[4]) or 'same'}"
        for c in CASES
    ],
)
def test_action_in_state(phase, pods, action, target, changes, killed, retry):
    record = record_in(phase, pods)
    task, pod = target
    new, effects = jc.decide(record, jc.CommandIssued(action=action, task=task, pod=pod), 10.0)
    assert phase_changes(effects) == changes
    assert deleted(effects) == killed
    assert new.retry_count == retry
    assert all(new.pods[name].phase == "Terminating" for name in killed)


@pytest.mark.parametrize(
    ("action", "podgroup_deleted", "version"),
    [("RestartJob", True, 1), ("AbortJob", True, 1), ("RestartTask", False, 0), ("RestartPod", False, 0)],
    ids=[
        "killjob-none-deletes-podgroup",
        "killjob-soft-deletes-podgroup",
        "killtarget-task-keeps-podgroup",
        "killtarget-pod-keeps-podgroup",
    ],
)
def test_killjob_bumps_version_and_deletes_podgroup_killtarget_does_not(action, podgroup_deleted, version):
    record = record_in("Running", MIXED)
    new, effects = jc.decide(record, jc.CommandIssued(action=action, task="worker", pod="job1-worker-0"), 1.0)
    assert bool(of_type(effects, jc.DeletePodGroup)) == podgroup_deleted
    assert new.version == version


def test_last_retry_uses_soft_retain_and_then_fails():
    record = record_in("Running", MIXED, retry=2)  # maxRetry 3: retryCount 2 ≥ 3 − 1
    new, effects = jc.decide(record, jc.CommandIssued(action="RestartJob"), 1.0)
    assert deleted(effects) == LIVE  # Succeeded and Failed pods are kept
    assert phase_changes(effects) == ["Restarting", "Failed"]
    assert new.retry_count == 3


def test_restart_recreates_the_podgroup_and_pods_of_the_new_version():
    record = record_in("Running", None, replicas=2)
    new, effects = jc.decide(record, jc.CommandIssued(action="restart"), 1.0)
    (create_pg,) = of_type(effects, jc.CreatePodGroup)
    assert create_pg.podgroup.job_version == 1 and not new.podgroup_admitted
    for name in ["job1-worker-0", "job1-worker-1"]:
        new, effects = jc.decide(new, jc.PodDeleted(pod=name, job_version=0), 2.0)
    assert new.phase == "Pending" and new.pods == {}
    new, effects = jc.decide(new, jc.PodGroupAdmitted(job_version=1), 3.0)
    (create,) = of_type(effects, jc.CreatePods)
    assert {p.version for p in create.pods} == {1}
    assert create.pods[0].annotations["volcano.sh/job-version"] == "1"
    assert create.pods[0].annotations["volcano.sh/job-retry-count"] == "1"
    assert create.pods[0].restarts == 1


def test_restarting_with_retries_exhausted_fails():
    record = record_in("Restarting", {0: "Terminating"}, retry=3)
    new, effects = jc.decide(record, jc.PodDeleted(pod="job1-worker-0", job_version=0), 1.0)
    assert phase_changes(effects) == ["Failed"]


def test_third_restart_trigger_fails_the_job():
    record = record_in("Running", None, replicas=1)
    phases: list[str] = []
    for attempt in range(3):
        record, effects = jc.decide(record, jc.CommandIssued(action="RestartJob"), float(attempt))
        phases += phase_changes(effects)
        for name, pod in sorted(record.pods.items()):
            record, effects = jc.decide(record, jc.PodDeleted(pod=name, job_version=pod.version), float(attempt))
            phases += phase_changes(effects)
        record, effects = jc.decide(record, jc.PodGroupAdmitted(job_version=record.version), float(attempt))
        pod = record.pods.get("job1-worker-0")
        if pod is not None:
            record, _ = jc.decide(record, jc.PodBound(pod=pod.name, node="n", job_version=pod.version), 0.0)
            record, effects = jc.decide(record, jc.PodRunning(pod=pod.name, job_version=pod.version), 0.0)
            phases += phase_changes(effects)
    assert phases == ["Restarting", "Pending", "Running", "Restarting", "Pending", "Running", "Restarting", "Failed"]
    assert record.retry_count == 3


@pytest.mark.parametrize(
    ("pods", "spec", "expected"),
    [
        ({0: "Succeeded", 1: "Succeeded", 2: "Succeeded", 3: "Succeeded"}, {}, "Completed"),
        ({0: "Succeeded", 1: "Succeeded", 2: "Succeeded", 3: "Failed"}, {}, "Failed"),
        ({0: "Succeeded", 1: "Succeeded", 2: "Failed", 3: "Failed"}, {"minAvailable": 2}, "Completed"),
        ({0: "Succeeded", 1: "Failed", 2: "Failed", 3: "Failed"}, {"minAvailable": 2}, "Failed"),
        ({0: "Succeeded", 1: "Succeeded", 2: "Running", 3: "Running"}, {"minSuccess": 2}, "Completed"),
        ({0: "Succeeded", 1: "Succeeded", 2: "Succeeded", 3: "Failed"}, {"minSuccess": 4, "minAvailable": 1}, "Failed"),
        ({0: "Running", 1: "Running", 2: "Running", 3: "Pending"}, {}, "Pending"),
        ({0: "Running", 1: "Running", 2: "Running", 3: "Pending"}, {"minAvailable": 3}, "Running"),
        ({0: "Running", 1: "Running", 2: "Pending", 3: "Pending"}, {"minAvailable": 3}, "Pending"),
    ],
    ids=[
        "all-succeeded",
        "one-failed-task-min-unmet",
        "min-available-2-met",
        "min-available-2-unmet",
        "min-success-reached-while-running",
        "finished-below-min-success",
        "one-pending-of-min-4",
        "one-pending-allowed-by-min-3",
        "two-pending-above-replicas-minus-min",
    ],
)
def test_running_sync_check(pods, spec, expected):
    record = record_in("Running", pods, **spec)
    new, effects = jc.decide(record, jc.CommandIssued(action="SyncJob"), 1.0)
    assert new.phase == expected


def test_min_success_kills_the_pods_still_running():
    record = record_in("Running", {0: "Succeeded", 1: "Succeeded", 2: "Running", 3: "Pending"}, minSuccess=2)
    new, effects = jc.decide(record, jc.CommandIssued(action="SyncJob"), 1.0)
    assert phase_changes(effects) == ["Completed"]
    assert deleted(effects) == ["job1-worker-2", "job1-worker-3"]


@pytest.mark.parametrize("phase", jc.PHASES)
def test_every_phase_handles_every_action(phase):
    for action in [
        "SyncJob",
        "RestartJob",
        "RestartTask",
        "RestartPod",
        "AbortJob",
        "ResumeJob",
        "CompleteJob",
        "TerminateJob",
        "EnqueueJob",
    ]:
        new, _ = jc.decide(record_in(phase, MIXED), jc.CommandIssued(action=action, task="worker"), 1.0)
        assert new.phase in jc.PHASES

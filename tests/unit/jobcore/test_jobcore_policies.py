"""Policy resolution and the reactions it drives (Volcano ``applyPolicies``)."""

from __future__ import annotations

import pytest

from hyperjob import jobcore as jc
from tests.unit.jobcore.jobcore_builders import Driver, admitted, deleted, of_type, phase_changes, task

RESTART_JOB = {"event": "PodFailed", "action": "RestartJob"}


@pytest.mark.parametrize(
    ("task_policies", "job_policies", "event", "exit_code", "expected"),
    [
        ([], [], "PodFailed", 1, "SyncJob"),
        ([], [RESTART_JOB], "PodFailed", 1, "RestartJob"),
        ([{"event": "PodFailed", "action": "AbortJob"}], [RESTART_JOB], "PodFailed", 1, "AbortJob"),
        ([{"event": "PodEvicted", "action": "AbortJob"}], [RESTART_JOB], "PodFailed", 1, "RestartJob"),
        ([], [{"events": ["PodEvicted", "PodFailed"], "action": "TerminateJob"}], "PodFailed", 1, "TerminateJob"),
        ([], [{"event": "*", "action": "RestartJob"}], "PodEvicted", None, "RestartJob"),
        ([], [{"event": "*", "action": "RestartJob"}], "PodRunning", None, "SyncJob"),
        ([], [{"event": "*", "action": "RestartJob"}], "OutOfSync", None, "SyncJob"),
        ([], [{"exitCode": 137, "action": "RestartPod"}], "PodFailed", 137, "RestartPod"),
        ([], [{"exitCode": 137, "action": "RestartPod"}], "PodFailed", 1, "SyncJob"),
        (
            [{"exitCode": 2, "action": "AbortJob"}],
            [{"exitCode": 2, "action": "RestartJob"}],
            "PodFailed",
            2,
            "AbortJob",
        ),
        ([], [{"event": "PodPending", "action": "AbortJob"}], "PodPending", None, "SyncJob"),
        ([], [{"event": "*", "action": "AbortJob"}], "PodPending", None, "SyncJob"),
        ([], [{"event": "PodPending", "action": "AbortJob", "timeout": "1m"}], "PodPending", None, "AbortJob"),
        ([], [{"event": "TaskCompleted", "action": "CompleteJob"}], "TaskCompleted", None, "CompleteJob"),
        ([], [{"event": "Unknown", "action": "RestartJob"}], "Unknown", None, "RestartJob"),
    ],
    ids=[
        "no-policy-syncs",
        "job-policy",
        "task-policy-first",
        "task-policy-other-event-falls-to-job",
        "events-list",
        "star-matches-evicted",
        "star-never-matches-internal-podrunning",
        "star-never-matches-outofsync",
        "exit-code-matches",
        "exit-code-differs",
        "task-exit-code-first",
        "podpending-needs-timeout",
        "star-podpending-needs-timeout",
        "podpending-with-timeout",
        "task-completed",
        "unknown",
    ],
)
def test_resolution(task_policies, job_policies, event, exit_code, expected):
    record = admitted(task("worker", 2, policies=task_policies), task("ps", 1), policies=job_policies)
    assert jc.resolve(record, event, "worker", exit_code).action == expected


def test_resolution_of_another_task_ignores_workers_policies():
    record = admitted(task("worker", 2, policies=[{"event": "PodFailed", "action": "AbortJob"}]), task("ps", 1))
    assert jc.resolve(record, "PodFailed", "ps", 1).action == "SyncJob"


def test_resolution_reports_timeout_and_where():
    record = admitted(task("w", 1), policies=[{"event": "PodEvicted", "action": "RestartJob", "timeout": "90s"}])
    resolution = jc.resolve(record, "PodEvicted", "w")
    assert (resolution.timeout, resolution.policy) == (90.0, "job policies[0]")


def _running(*tasks, **spec) -> Driver:
    d = Driver(admitted(*tasks, **spec))
    d.start()
    d.run_all()
    return d


def test_pod_failed_restart_job_policy():
    d = _running(task("worker", 2, template_restartPolicy="Never"), policies=[RESTART_JOB])
    effects = d.fail("job1-worker-0")
    assert phase_changes(effects) == ["Restarting"]
    assert deleted(effects) == ["job1-worker-0", "job1-worker-1"]  # KillJob(None) kills the failed pod too
    assert jc.JobPhaseChanged(old="Running", new="Restarting", reason="PodFailed: RestartJob") in effects


def test_exit_code_policy_restarts_only_that_pod():
    d = _running(
        task("worker", 2, template_restartPolicy="Never", policies=[{"exitCode": 137, "action": "RestartPod"}])
    )
    effects = d.fail("job1-worker-1", exit_code=137)
    assert deleted(effects) == ["job1-worker-1"]
    assert phase_changes(effects) == ["Restarting"]
    d.delete_terminating()
    assert d.record.phase == "Pending"
    # The podgroup was kept (KillTarget), so the pod comes back at once with the same version.
    pod = d.pod("job1-worker-1")
    assert (pod.phase, pod.version, pod.restarts) == ("Pending", 0, 1)


def test_task_completed_complete_job_policy_ends_the_job():
    d = _running(
        task(
            "master", 1, template_restartPolicy="Never", policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]
        ),
        task("worker", 2),
    )
    effects = d.succeed("job1-master-0")
    assert phase_changes(effects) == ["Completing"]
    assert deleted(effects) == ["job1-worker-0", "job1-worker-1"]
    d.delete_terminating()
    assert d.record.phase == "Completed"


def test_pod_succeeded_is_task_completed_only_when_all_replicas_succeeded():
    d = _running(
        task(
            "worker", 2, template_restartPolicy="Never", policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]
        ),
        task("ps", 1),
    )
    assert phase_changes(d.succeed("job1-worker-0")) == []
    assert phase_changes(d.succeed("job1-worker-1")) == ["Completing"]


def test_eviction_policy_restarts_the_job_instead_of_recreating():
    d = _running(task("worker", 2), policies=[{"event": "PodEvicted", "action": "RestartJob"}])
    effects = d.evict("job1-worker-0")
    assert phase_changes(effects) == ["Restarting"]
    assert deleted(effects) == ["job1-worker-1"]
    assert of_type(effects, jc.CreatePods) == []


@pytest.mark.parametrize(
    ("max_retry", "restarts", "expected"),
    [(2, [1], []), (2, [1, 2], ["Aborting"]), (0, [1, 2], []), (0, [1, 2, 3], ["Aborting"]), (-1, [5, 50], [])],
    ids=[
        "below-max-retry",
        "reaches-max-retry",
        "zero-means-three-below",
        "zero-means-three-reached",
        "minus-one-is-unlimited",
    ],
)
def test_in_place_restarts_fire_task_failed_at_task_max_retry(max_retry, restarts, expected):
    d = _running(
        task("worker", 2, maxRetry=max_retry, template_restartPolicy="OnFailure"),
        policies=[{"event": "TaskFailed", "action": "AbortJob"}],
    )
    changes: list[str] = []
    for count in restarts:
        changes += phase_changes(d.send(jc.PodRestarted(pod="job1-worker-0", restarts=count)))
    assert changes == expected
    assert d.pod("job1-worker-0").status.container_restarts == restarts[-1]


def test_task_failed_counts_restarts_of_all_live_pods_of_the_task():
    d = _running(task("worker", 2, maxRetry=3), policies=[{"event": "TaskFailed", "action": "TerminateJob"}])
    d.send(jc.PodRestarted(pod="job1-worker-0", restarts=2))
    effects = d.send(jc.PodRestarted(pod="job1-worker-1", restarts=1))
    assert phase_changes(effects) == ["Terminating"]


def test_podgroup_unknown_fires_unknown_policies():
    d = _running(task("worker", 1), policies=[{"event": "Unknown", "action": "RestartJob"}])
    effects = d.send(jc.PodGroupUnknown(job_version=0))
    assert phase_changes(effects) == ["Restarting"]


@pytest.mark.parametrize(
    ("verb", "phase"),
    [
        ("abort", "Aborting"),
        ("terminate", "Terminating"),
        ("complete", "Completing"),
        ("restart", "Restarting"),
        ("AbortJob", "Aborting"),
    ],
    ids=["abort", "terminate", "complete", "restart", "action-name"],
)
def test_commands(verb, phase):
    d = _running(task("worker", 1))
    effects = d.send(jc.CommandIssued(action=verb))
    assert phase_changes(effects)[0] == phase


def test_abort_then_resume_restarts_the_job():
    d = _running(task("worker", 1))
    d.send(jc.CommandIssued(action="abort"))
    d.delete_terminating()
    assert d.record.phase == "Aborted"
    effects = d.send(jc.CommandIssued(action="resume"))
    assert phase_changes(effects) == ["Restarting", "Pending"]
    assert d.record.retry_count == 1
    (create,) = of_type(effects, jc.CreatePodGroup)
    d.send(jc.PodGroupAdmitted(job_version=create.podgroup.job_version))
    d.run_all()
    assert d.record.phase == "Running"

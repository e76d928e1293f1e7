"""CronJob: Volcano's example/cronjob/cronjob.yaml and the Kubernetes CronJob rules it follows."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob.api.job import CronJob
from hyperjob.jobcore.cronjob import CronState, JobRun, step

EXAMPLE = {  # example/cronjob/cronjob.yaml at ed72c7c81 (task list shortened)
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "CronJob",
    "metadata": {"name": "volcano-cronjob-example"},
    "spec": {
        "schedule": "*/5 * * * *",
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 60,
        "successfulJobsHistoryLimit": 5,
        "failedJobsHistoryLimit": 3,
        "jobTemplate": {
            "spec": {
                "minAvailable": 1,
                "tasks": [{"name": "task-1", "replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
            }
        },
    },
}


def cron(**spec) -> CronJob:
    return msgspec.convert({**EXAMPLE, "spec": {**EXAMPLE["spec"], **spec}}, CronJob, strict=True)


def test_runs_at_each_schedule_time_named_after_it_in_minutes():
    c = cron()
    assert step(c, 0.0, CronState(), {}, 299.0).create is None
    s = step(c, 0.0, CronState(), {}, 300.0)
    assert (s.create, s.scheduled_at, s.requeue_at) == ("volcano-cronjob-example-5", 300.0, 600.0)
    again = step(c, 0.0, s.state, {s.create: JobRun(phase="Running", created_at=300.0)}, 330.0)
    assert again.create is None  # that time was scheduled already


@pytest.mark.parametrize(
    ("policy", "create", "delete"),
    [
        ("Forbid", None, []),
        ("Allow", "volcano-cronjob-example-10", []),
        ("Replace", "volcano-cronjob-example-10", ["volcano-cronjob-example-5"]),
    ],
)
def test_concurrency_policy_when_the_previous_run_is_still_active(policy, create, delete):
    c = cron(concurrencyPolicy=policy)
    state = CronState(last_schedule_time=300.0, active=["volcano-cronjob-example-5"])
    s = step(c, 0.0, state, {"volcano-cronjob-example-5": JobRun(phase="Running", created_at=300.0)}, 600.0)
    assert (s.create, s.delete) == (create, delete)


def test_a_finished_job_leaves_the_active_list_so_forbid_runs_again():
    state = CronState(last_schedule_time=300.0, active=["volcano-cronjob-example-5"])
    s = step(cron(), 0.0, state, {"volcano-cronjob-example-5": JobRun(phase="Completed", created_at=300.0)}, 600.0)
    assert s.create == "volcano-cronjob-example-10"
    assert s.state.active == ["volcano-cronjob-example-10"]


def test_starting_deadline_skips_a_time_missed_by_more_than_the_deadline():
    c = cron()  # startingDeadlineSeconds: 60
    assert step(c, 0.0, CronState(), {}, 359.0).create == "volcano-cronjob-example-5"
    assert step(c, 0.0, CronState(), {}, 361.0).create is None
    without = cron(startingDeadlineSeconds=None)
    assert step(without, 0.0, CronState(), {}, 1000.0).scheduled_at == 900.0  # the most recent missed time


def test_history_limits_delete_the_oldest_finished_jobs():
    c = cron(successfulJobsHistoryLimit=1, failedJobsHistoryLimit=1)
    jobs = {
        "a": JobRun(phase="Completed", created_at=1.0),
        "b": JobRun(phase="Completed", created_at=2.0),
        "c": JobRun(phase="Failed", created_at=3.0),
        "d": JobRun(phase="Failed", created_at=4.0),
        "e": JobRun(phase="Running", created_at=5.0),
    }
    assert step(c, 0.0, CronState(), jobs, 10.0).delete == ["a", "c"]


def test_suspend_starts_nothing():
    assert step(cron(suspend=True), 0.0, CronState(), {}, 300.0).create is None


def test_time_zone_moves_the_schedule():
    c = cron(schedule="0 9 * * *", timeZone="Asia/Shanghai", startingDeadlineSeconds=None)
    assert step(c, 0.0, CronState(), {}, 86400.0).scheduled_at == 3600.0  # 09:00 +08:00 is 01:00 UTC


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"schedule": "every 5 minutes"}, "not a valid cron schedule"),
        ({"schedule": "TZ=UTC */5 * * * *"}, "TZ= or CRON_TZ= prefix"),
        ({"timeZone": "Mars/Olympus"}, "unknown time zone"),
        ({"concurrencyPolicy": "Sometimes"}, "concurrencyPolicy"),
    ],
)
def test_bad_cronjobs_are_refused_naming_the_field(spec, message):
    with pytest.raises(msgspec.ValidationError, match=message):
        cron(**spec)

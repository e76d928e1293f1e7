"""The Jobs a CronJob or JobFlow makes, as Volcano's controllers write them (pure)."""

from __future__ import annotations

from typing import Any

from hyperjob import api
from hyperjob.services.workflow_controller import domain

TASKS = [{"name": "t", "replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]


def decoded(document: dict[str, Any]) -> Any:
    return api.decode(document)


def test_a_cronjob_run_carries_the_templates_labels_annotations_spec_and_its_schedule_time() -> None:
    cron = decoded(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "team"},
            "spec": {
                "schedule": "0 2 * * *",
                "timeZone": "Asia/Shanghai",
                "jobTemplate": {
                    "metadata": {"labels": {"app": "etl"}, "annotations": {"note": "x"}},
                    "spec": {"queue": "q", "tasks": TASKS},
                },
            },
        }
    )
    job = domain.cron_job(cron, "nightly-29000000", 29_000_000 * 60.0)
    assert job["metadata"] == {
        "name": "nightly-29000000",
        "namespace": "team",
        "labels": {"app": "etl"},
        "annotations": {"note": "x", domain.SCHEDULED_TIMESTAMP: "2025-02-20T05:20:00+08:00"},
    }
    made = api.decode(job)
    assert isinstance(made, api.Job) and made.spec == cron.spec.job_template.spec


def test_rfc3339_is_gos_form() -> None:
    assert domain.rfc3339(60.0, None) == "1970-01-01T00:01:00Z"
    assert domain.rfc3339(0.0, "America/New_York") == "1969-12-31T19:00:00-05:00"


def test_a_flow_job_is_the_templates_spec_marked_with_its_template_and_flow() -> None:
    template = decoded(
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobTemplate",
            "metadata": {"name": "a", "labels": {"not": "copied"}, "annotations": {api.SIM_DURATION: "10s"}},
            "spec": {"tasks": TASKS},
        }
    )
    flow = decoded(
        {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": "f"},
         "spec": {"flows": [{"name": "a"}]}}
    )  # fmt: skip
    job = domain.flow_job(flow, template, "f-a")
    marks = {domain.CREATED_BY_JOB_TEMPLATE: "default.a", domain.CREATED_BY_JOB_FLOW: "default.f"}
    assert job["metadata"] == {"name": "f-a", "labels": marks, "annotations": {api.SIM_DURATION: "10s", **marks}}
    made = api.decode(job)
    assert isinstance(made, api.Job) and made.spec == template.spec

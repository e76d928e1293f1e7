"""JobFlow: Volcano's example/jobflow DAG (a → b → {c, d} → e) stepped through its job phases."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob import api
from hyperjob.api.flow import JobFlow
from hyperjob.jobcore.jobflow import step

EXAMPLE = {  # example/jobflow/JobFlow.yaml at ed72c7c81, unchanged
    "apiVersion": "flow.volcano.sh/v1alpha1",
    "kind": "JobFlow",
    "metadata": {"name": "test", "namespace": "default"},
    "spec": {
        "jobRetainPolicy": "delete",
        "flows": [
            {"name": "a"},
            {"name": "b", "dependsOn": {"targets": ["a"]}},
            {"name": "c", "dependsOn": {"targets": ["b"]}},
            {"name": "d", "dependsOn": {"targets": ["b"]}},
            {"name": "e", "dependsOn": {"targets": ["c", "d"]}},
        ],
    },
}


def flow(doc=EXAMPLE) -> JobFlow:
    return msgspec.convert(doc, JobFlow, strict=True)


def test_the_dag_starts_each_flow_once_its_targets_completed_and_deletes_jobs_on_success():
    f = flow()
    first = step(f, {})
    assert first.create == [("test-a", "a")] and first.status.phase == "Pending"
    s = step(f, {"test-a": "Running"}, first.status.phase)
    assert s.create == [] and s.status.phase == "Running"
    s = step(f, {"test-a": "Completed"}, s.status.phase)
    assert s.create == [("test-b", "b")]
    s = step(f, {"test-a": "Completed", "test-b": "Completed"}, s.status.phase)
    assert s.create == [("test-c", "c"), ("test-d", "d")]
    jobs = {"test-a": "Completed", "test-b": "Completed", "test-c": "Completed", "test-d": "Running"}
    s = step(f, jobs, s.status.phase)
    assert s.create == [] and s.status.running_jobs == ["test-d"]  # e waits for c AND d
    jobs["test-d"] = "Completed"
    s = step(f, jobs, s.status.phase)
    assert s.create == [("test-e", "e")] and s.status.phase == "Running"
    jobs["test-e"] = "Completed"
    s = step(f, jobs, s.status.phase)
    assert s.status.phase == "Succeed"
    assert s.delete == ["test-a", "test-b", "test-c", "test-d", "test-e"]  # jobRetainPolicy: delete
    later = step(f, {"test-e": "Completed"}, "Succeed")  # while the deletes go through
    assert later.create == [] and later.delete == ["test-e"] and later.status is None
    gone = step(f, {}, "Succeed")  # every job deleted: nothing is made again
    assert gone.create == [] and gone.delete == [] and gone.status is None


def test_a_retained_succeeded_flow_keeps_its_phase_and_remakes_a_job_deleted_by_hand():
    f = flow({**EXAMPLE, "spec": {**EXAMPLE["spec"], "jobRetainPolicy": "retain"}})
    done = {f"test-{n}": "Completed" for n in "abcde"}
    assert step(f, done, "Running").status.phase == "Succeed"
    del done["test-a"]
    s = step(f, done, "Succeed")  # Volcano's deployJob runs in every phase but Failed
    assert s.create == [("test-a", "a")] and s.status.phase == "Succeed" and s.delete == []


def test_a_failed_job_fails_the_flow_which_then_creates_nothing():
    f = flow()
    s = step(f, {"test-a": "Completed", "test-b": "Failed"}, "Running")
    assert s.status.phase == "Failed" and s.status.failed_jobs == ["test-b"]
    assert step(f, {"test-a": "Completed", "test-b": "Failed"}, "Failed").create == []


@pytest.mark.parametrize(
    ("flows", "message"),
    [
        ([{"name": "a"}, {"name": "a"}], "duplicate flow 'a'"),
        ([{"name": "a", "dependsOn": {"targets": ["z"]}}], "'z' is not a flow"),
        (
            [{"name": "a", "dependsOn": {"targets": ["b"]}}, {"name": "b", "dependsOn": {"targets": ["a"]}}],
            "directed acyclic graph",
        ),
        ([{"name": "a", "dependsOn": {"targets": [], "probe": {"taskStatusList": []}}}], "probe: not supported"),
    ],
)
def test_jobflow_is_checked_as_volcanos_webhook_does(flows, message):
    with pytest.raises(msgspec.ValidationError, match=message):
        flow({**EXAMPLE, "spec": {"flows": flows}})


def test_job_template_holds_a_volcano_job_spec():
    template = msgspec.convert(
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobTemplate",
            "metadata": {"name": "a"},
            "spec": {"tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}]},
        },
        api.flow.JobTemplate,
        strict=True,
    )
    assert template.spec.tasks[0].replicas == 1

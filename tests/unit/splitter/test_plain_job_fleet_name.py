"""A plain Job's name is unique in its namespace only (ADR 0010): the splitter keeps team-a/x and
team-b/x apart under their fleet names and sends each to its cluster under that name, which its
pods are named from; a Job in ``default`` keeps its own name everywhere."""

from __future__ import annotations

from hyperjob import api, records
from hyperjob.services.splitter import domain
from hyperjob.services.workflow_controller import domain as workflow


def _job(name: str, namespace: str) -> records.HyperJobDoc:
    manifest = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "annotations": {"team": "a"}},
        "spec": {"tasks": [{"name": "task", "replicas": 1, "template": {"spec": {"containers": []}}}]},
    }
    return records.HyperJobDoc(
        name=domain.owner_key("Job", namespace, name), manifest=manifest, created=0.0, plain=True
    )


def test_two_plain_jobs_of_one_name_in_two_namespaces_are_kept_under_two_keys() -> None:
    assert domain.owner_key("Job", "team-a", "x") == "team-a-x"
    assert domain.owner_key("Job", "team-b", "x") == "team-b-x"
    assert domain.owner_key("PodGroup", "team-b", "x") == "team-b-x"
    assert domain.owner_key("Job", api.DEFAULT_NAMESPACE, "x") == "x"
    assert domain.owner_key("HyperJob", "team-b", "x") == "team-b/x"  # unchanged


def test_a_plain_job_goes_to_its_cluster_under_its_fleet_name_keeping_the_applied_one() -> None:
    doc = _job("x", "team-b")
    child = domain.plain_child(doc, ["c1"])
    metadata = child.job["metadata"]
    assert (child.name, metadata["name"], metadata["namespace"]) == ("team-b-x", "team-b-x", "team-b")
    assert metadata["annotations"] == {"team": "a", api.APPLIED_NAME_ANNOTATION: "x"}
    assert doc.manifest["metadata"]["name"] == "x"  # as applied: get -o yaml round-trips it
    assert domain.applied_name(doc) == "x"


def test_a_plain_job_in_default_goes_as_applied() -> None:
    doc = _job("x", api.DEFAULT_NAMESPACE)
    assert domain.plain_child(doc, ["c1"]).job is doc.manifest


def test_the_workflow_controller_follows_a_job_it_made_by_its_fleet_name() -> None:
    assert workflow.job_key("Job", "team-a", "nightly-1") == "team-a-nightly-1"
    assert workflow.job_key("HyperJob", "team-a", "nightly-1") == "team-a/nightly-1"

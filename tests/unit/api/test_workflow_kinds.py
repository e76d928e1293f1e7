"""CronJob, JobFlow and JobTemplate through ``api.decode`` (the kinds the workflow-controller runs),
and ``metadata.generateName`` as Kubernetes' API server applies it."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from hyperjob import api
from hyperjob.api.names import ALPHABET, PREFIX_MAX, with_generated_name

TASKS = [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]


def cronjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": spec.pop("name", "nightly")},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"tasks": TASKS}}, **spec},
    }


def test_every_workflow_kind_decodes_and_encodes_back() -> None:
    documents = [
        cronjob(concurrencyPolicy="Forbid", startingDeadlineSeconds=60),
        {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate", "metadata": {"name": "a"},
         "spec": {"tasks": TASKS}},
        {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": "f"},
         "spec": {"flows": [{"name": "a"}], "jobRetainPolicy": "delete"}},
        {"apiVersion": "training.volcano.sh/v1alpha1", "kind": "HyperJobTemplate", "metadata": {"name": "h"},
         "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "templateSpec": {"tasks": TASKS}}]}},
    ]  # fmt: skip
    for document in documents:
        obj = api.decode(document)
        assert type(obj).__name__ == document["kind"] and obj.kind in api.WORKFLOW_KINDS
        assert api.decode(api.encode(obj)) == obj
    assert {api.SHORT_KINDS[k] for k in ("cronjob", "cronvj", "jf", "jt", "hjt")} == set(api.WORKFLOW_KINDS)


@pytest.mark.parametrize(
    ("document", "path", "message"),
    [
        (cronjob(name="n" * 53), "$.metadata.name", "at most 52 characters"),
        (cronjob(schedule="TZ=UTC * * * * *"), "$.spec", "schedule: a TZ="),
        (cronjob(concurrencyPolicy="Sometimes"), "$.spec.concurrencyPolicy", "Invalid enum value"),
        (cronjob(jobTemplate={"spec": {"tasks": []}}), "$.spec.jobTemplate.spec.tasks", "at least one task"),
        (
            {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate", "metadata": {"name": "a"},
             "spec": {"tasks": TASKS * 2}},
            "$.spec.tasks[1].name",
            "duplicate task name",
        ),
        ({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": "f"}, "spec": {}},
         "$.kind", "unknown kind 'JobFlow'"),
    ],
)  # fmt: skip
def test_a_bad_workflow_object_is_refused_by_the_field_that_is_wrong(
    document: dict[str, Any], path: str, message: str
) -> None:
    with pytest.raises(api.ManifestError) as caught:
        api.decode(document)
    assert caught.value.path.startswith(path) and message in caught.value.message


def test_generate_name_makes_the_name_from_the_prefix_and_five_characters_of_kubernetes_alphabet() -> None:
    document = {"kind": "Job", "metadata": {"generateName": "test-job-", "labels": {"a": "b"}}, "spec": {}}
    named = with_generated_name(document, random.Random(1))
    assert re.fullmatch(f"test-job-[{ALPHABET}]{{5}}", named["metadata"]["name"])
    assert named["metadata"] == {"labels": {"a": "b"}, "name": named["metadata"]["name"]}
    assert with_generated_name(document, random.Random(1)) == named  # a seeded source: the same name
    assert with_generated_name(document, random.Random(2)) != named
    assert document["metadata"]["generateName"] == "test-job-"  # the caller's document is left alone


def test_a_name_wins_over_generate_name_and_a_long_prefix_is_cut() -> None:
    kept = with_generated_name({"metadata": {"name": "mine", "generateName": "x-"}}, random.Random(0))
    assert kept == {"metadata": {"name": "mine"}}
    long = with_generated_name({"metadata": {"generateName": "p" * 70}}, random.Random(0))
    assert len(long["metadata"]["name"]) == 63 and long["metadata"]["name"].startswith("p" * PREFIX_MAX)
    assert with_generated_name({"metadata": {"name": "plain"}}, random.Random(0)) == {"metadata": {"name": "plain"}}
    with pytest.raises(api.ManifestError, match="non-empty prefix") as caught:
        with_generated_name({"metadata": {"generateName": ""}}, random.Random(0))
    assert caught.value.path == "$.metadata.generateName"


def test_a_hyperjob_template_is_checked_as_the_hyperjob_it_makes() -> None:
    """A HyperJobTemplate whose HyperJob would be refused is refused at apply, naming the field."""
    document = {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJobTemplate",
        "metadata": {"name": "h"},
        "spec": {"replicatedJobs": [{"name": "w", "templateSpec": {"tasks": TASKS}}] * 2},
    }
    with pytest.raises(api.ManifestError) as refused:
        api.decode(document)
    assert refused.value.path == "$.spec.replicatedJobs[1].name"

"""A server-side apply of a HyperJob in the other form than the object's (``ownership.in_applied_form``):
the conceptual form's fields cannot be merged into the upstream form the services store."""

from __future__ import annotations

from hyperjob.services.apiserver.ownership import in_one_form

CONCEPTUAL, UPSTREAM = "batch.volcano.sh/v1alpha1", "training.volcano.sh/v1alpha1"


def entry(manager: str, api_version: str) -> dict[str, object]:
    return {"manager": manager, "operation": "Apply", "apiVersion": api_version, "fieldsV1": {"f:spec": {}}}


def test_a_configuration_of_the_other_form_replaces_the_body_and_keeps_the_metadata() -> None:
    live = {
        "apiVersion": UPSTREAM,
        "kind": "HyperJob",
        "metadata": {
            "name": "x",
            "labels": {"team": "a"},
            "managedFields": [entry("kubectl", CONCEPTUAL), entry("kubectl-client-side-apply", UPSTREAM)],
        },
        "spec": {"replicatedJobs": [{"name": "job"}]},
    }
    config = {"apiVersion": CONCEPTUAL, "kind": "HyperJob", "spec": {"template": {}}}
    base, same = in_one_form(live, config)
    assert same is config
    assert base == {
        "apiVersion": CONCEPTUAL,
        "kind": "HyperJob",
        "metadata": {"name": "x", "labels": {"team": "a"}, "managedFields": [entry("kubectl", CONCEPTUAL)]},
    }


def test_a_configuration_of_the_objects_own_form_merges_into_it_unchanged() -> None:
    live = {"apiVersion": UPSTREAM, "kind": "HyperJob", "metadata": {"name": "x"}, "spec": {"replicatedJobs": []}}
    config = {"apiVersion": UPSTREAM, "kind": "HyperJob", "spec": {}}
    assert in_one_form(live, config) == (live, config)
    assert in_one_form({}, {"apiVersion": CONCEPTUAL}) == ({}, {"apiVersion": CONCEPTUAL})


def test_a_configuration_of_metadata_only_goes_into_the_object_in_its_own_form() -> None:
    """kubectl's move from client-side to server-side apply applies the annotations alone, in the
    form the file has: the object keeps its body."""
    live = {"apiVersion": UPSTREAM, "kind": "HyperJob", "metadata": {"name": "x"}, "spec": {"replicatedJobs": []}}
    config = {"apiVersion": CONCEPTUAL, "kind": "HyperJob", "metadata": {"annotations": {"a": "b"}}}
    assert in_one_form(live, config) == (live, {**config, "apiVersion": UPSTREAM})

"""The apiserver's pure parts: discovery documents, OpenAPI, Status errors, tables, patches."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob.api.manifest import KINDS
from hyperjob.api.schema import schema_hook
from hyperjob.services.apiserver import discovery, openapi, status, tables
from hyperjob.services.apiserver.objects import LAST_APPLIED, api_object, in_form
from hyperjob.services.apiserver.patch import fill_omitted, merge_patch
from hyperjob.services.apiserver.resources import RESOURCES, api_versions, find


def entry(group_version: str, plural: str) -> dict:
    listed = discovery.resource_list(group_version)
    assert listed is not None, group_version
    return next(r for r in listed["resources"] if r["name"] == plural)


# -- discovery ---------------------------------------------------------------------------------------


def test_every_kind_of_the_issue_is_discovered_with_volcanos_short_names():
    assert entry("training.volcano.sh/v1alpha1", "hyperjobs")["shortNames"] == ["hj"]
    assert entry("batch.volcano.sh/v1alpha1", "jobs")["shortNames"] == ["vcjob", "vj"]
    assert entry("scheduling.volcano.sh/v1beta1", "queues")["shortNames"][0] == "q"
    assert entry("scheduling.volcano.sh/v1beta1", "podgroups")["shortNames"][0] == "pg"
    for group_version, plural in [
        ("training.volcano.sh/v1alpha1", "hyperjobtemplates"),
        ("batch.volcano.sh/v1alpha1", "cronjobs"),
        ("flow.volcano.sh/v1alpha1", "jobflows"),
        ("flow.volcano.sh/v1alpha1", "jobtemplates"),
        ("scheduling.k8s.io/v1", "priorityclasses"),
        ("v1", "pods"),
        ("v1", "nodes"),
        ("v1", "namespaces"),
        ("hyperjob.io/v1alpha1", "clusters"),
    ]:
        assert entry(group_version, plural)["kind"]


def test_what_the_system_owns_is_read_only_and_the_rest_takes_every_write():
    assert entry("v1", "pods")["verbs"] == ["get", "list", "watch"]
    assert entry("v1", "nodes")["namespaced"] is False
    hyperjobs = entry("training.volcano.sh/v1alpha1", "hyperjobs")
    assert set(hyperjobs["verbs"]) == {"get", "list", "watch", "create", "update", "patch", "delete"}
    assert hyperjobs["namespaced"] is True and entry("scheduling.volcano.sh/v1beta1", "queues")["namespaced"] is False


def test_groups_list_each_group_once_with_its_preferred_version_and_training_before_batch():
    names = [g["name"] for g in discovery.groups()["groups"]]
    assert len(names) == len(set(names))
    assert names.index("training.volcano.sh") < names.index("batch.volcano.sh")  # `get hyperjobs` is training's
    assert discovery.group("flow.volcano.sh")["preferredVersion"]["groupVersion"] == "flow.volcano.sh/v1alpha1"
    assert discovery.group("apps") is None and discovery.resource_list("apps/v1") is None
    assert discovery.core_versions()["versions"] == ["v1"]


def test_version_is_the_kubernetes_minor_kubectl_speaks():
    assert discovery.version("0.1.0")["minor"] == "32"
    assert discovery.version("0.1.0")["gitVersion"].startswith("v1.32.0")


def test_a_hyperjob_is_served_in_the_groups_of_both_its_forms():
    assert api_versions("HyperJob") == ("training.volcano.sh/v1alpha1", "batch.volcano.sh/v1alpha1")
    assert find("batch.volcano.sh", "v1alpha1", "hyperjobs") is not None
    assert find("batch.volcano.sh", "v1alpha1", "nothing") is None


# -- OpenAPI -----------------------------------------------------------------------------------------


def test_openapi_schemas_are_the_msgspec_types_with_their_group_version_kind():
    document = openapi.document("training.volcano.sh/v1alpha1")
    schemas = document["components"]["schemas"]
    hyperjob = schemas["HyperJob"]
    assert hyperjob["x-kubernetes-group-version-kind"] == [
        {"group": "training.volcano.sh", "version": "v1alpha1", "kind": "HyperJob"}
    ]
    (expected,), components = msgspec.json.schema_components(
        [KINDS[("training.volcano.sh/v1alpha1", "HyperJob")]], schema_hook=schema_hook, ref_template=openapi.REF
    )
    assert schemas["HyperJobSpec"] == openapi.openapi_3_0(components["HyperJobSpec"])  # `hyperjob schema`'s
    assert schemas["HyperJobSpec"]["properties"]["minAvailable"] == {"type": "integer", "minimum": 0, "nullable": True}
    assert schemas["HyperJobSpec"]["properties"]["childFailurePolicy"]["type"] == "string"
    assert hyperjob["properties"]["spec"] == {"$ref": "#/components/schemas/HyperJobSpec"}
    assert "replicatedJobs" in schemas["HyperJobSpec"]["properties"]


def test_openapi_lists_each_patch_with_field_validation_and_no_strategic_merge():
    paths = openapi.document("batch.volcano.sh/v1alpha1")["paths"]
    patch = paths["/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs/{name}"]["patch"]
    assert {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}} in patch["parameters"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert "/api/v1/pods/{name}" not in openapi.document("v1")["paths"]  # read-only: nothing to patch


def test_openapi_index_points_at_every_group_version_and_changes_with_it():
    paths = openapi.index()["paths"]
    assert set(paths) == {f"api/{r.group_version}" if not r.group else f"apis/{r.group_version}" for r in RESOURCES}
    url = paths["apis/training.volcano.sh/v1alpha1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/training.volcano.sh/v1alpha1?hash=")
    assert url != paths["apis/batch.volcano.sh/v1alpha1"]["serverRelativeURL"].replace("batch", "training")


def test_kinds_without_a_manifest_type_are_objects():
    node = openapi.document("v1")["components"]["schemas"]["Node"]
    assert node["type"] == "object" and node["x-kubernetes-group-version-kind"][0]["kind"] == "Node"


# -- Status errors -----------------------------------------------------------------------------------


def test_a_refusal_naming_a_field_is_invalid_with_the_field_as_its_cause():
    error = status.refused(
        "HyperJob", "training.volcano.sh", "hyperjobs.training.volcano.sh", "x",
        "$.spec.replicatedJobs[0].replicas: Expected `int` >= 0",
    )  # fmt: skip
    body = error.status()
    assert (body["code"], body["reason"], body["kind"], body["status"]) == (422, "Invalid", "Status", "Failure")
    assert body["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": "Expected `int` >= 0", "field": "spec.replicatedJobs[0].replicas"}
    ]
    assert body["details"]["kind"] == "HyperJob" and body["details"]["name"] == "x"


@pytest.mark.parametrize(
    ("reason", "code", "why"),
    [
        ("HyperJob 'x' not found", 404, "NotFound"),
        ("$.metadata.name: HyperJob 'x' already exists in namespace 'team-a'", 409, "AlreadyExists"),
        ("queue 'q' is used by x", 409, "Conflict"),
    ],
)
def test_each_refusal_has_the_code_its_reason_means(reason, code, why):
    args = ("HyperJob", "training.volcano.sh", "hyperjobs.training.volcano.sh", "x", reason)
    body = status.refused(*args, creating=True).status()
    assert (body["code"], body["reason"]) == (code, why)


def test_already_exists_answers_a_create_and_an_update_is_invalid():
    reason = "$.metadata.name: Job 'x' already exists; a running Job's tasks cannot change (delete it first)"
    update = status.refused("Job", "batch.volcano.sh", "jobs.batch.volcano.sh", "x", reason).status()
    assert (update["code"], update["details"]["causes"][0]["field"]) == (422, "metadata.name")


def test_errors_read_as_kubectl_prints_them():
    assert (
        status.not_found("hyperjobs.training.volcano.sh", "x").message == 'hyperjobs.training.volcano.sh "x" not found'
    )
    forbidden = status.forbidden("alice", "create", "hyperjobs", "training.volcano.sh", "team-b", "x")
    assert forbidden.code == 403 and 'User "alice" cannot create resource "hyperjobs"' in forbidden.message
    assert 'in the namespace "team-b"' in forbidden.message
    assert status.unauthorized().status()["code"] == 401
    assert status.too_large("big").status()["reason"] == "RequestEntityTooLarge"
    assert status.bad_request("no").code == 400
    assert status.success("hyperjobs", "x", "training.volcano.sh")["status"] == "Success"


# -- tables ------------------------------------------------------------------------------------------

HYPERJOB = find("training.volcano.sh", "v1alpha1", "hyperjobs")
VIEW = {
    "name": "x", "namespace": "default", "labels": {}, "phase": "Running", "generation": 2, "splitCount": 1,
    "children": [{"name": "x-0", "cluster": "cluster-a", "replicas": 4}], "waitingReason": "", "status": {},
    "lifecycle": "", "restarts": 0, "created": 1.0,
    "manifest": {"apiVersion": "training.volcano.sh/v1alpha1", "kind": "HyperJob", "metadata": {"name": "x"},
                 "spec": {"replicatedJobs": []}},
}  # fmt: skip


def test_a_table_has_the_columns_of_hyperjob_get_and_the_wide_ones_at_priority_one():
    assert HYPERJOB is not None
    obj = api_object(HYPERJOB, VIEW)
    table = tables.table(HYPERJOB, [VIEW], [obj], "7")
    names = [c["name"] for c in table["columnDefinitions"]]
    header, _ = HYPERJOB.rows([], True)
    assert [n.upper() for n in names] == header
    narrow = {c["name"].upper() for c in table["columnDefinitions"] if c["priority"] == 0}
    assert narrow == {"NAME", "PHASE", "CHILDREN", "PLACEMENT", "AGE", "WAITING"}
    assert table["columnDefinitions"][0]["format"] == "name"
    row = table["rows"][0]
    assert row["cells"][:4] == ["x", "Running", "1", "cluster-a:4"]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "x"
    assert table["metadata"]["resourceVersion"] == "7"


def test_kubectls_accept_header_asks_for_a_table():
    assert tables.wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert not tables.wants_table("application/json")


def test_an_api_object_has_uid_generation_and_no_namespace_when_cluster_scoped():
    obj = api_object(HYPERJOB, VIEW)
    assert obj["metadata"]["generation"] == 2 and obj["metadata"]["namespace"] == "default"
    assert obj["metadata"]["uid"] == api_object(HYPERJOB, VIEW)["metadata"]["uid"]  # stable
    queue = find("scheduling.volcano.sh", "v1beta1", "queues")
    assert queue is not None
    manifest = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}}
    groups = {"inqueue": 0, "pending": 0, "running": 0}
    view = {"name": "q", "state": "Open", "spec": {}, "created": 0.0, "podgroups": groups, "usage": {},
            "allocated": {}, "deserved": {}, "manifest": manifest}  # fmt: skip
    assert "namespace" not in api_object(queue, view)["metadata"]


# -- patches and forms -------------------------------------------------------------------------------


def test_merge_patch_merges_objects_removes_nulls_and_replaces_lists():
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}
    assert merge_patch(target, {"a": {"b": None, "d": 3}, "l": [3], "n": 1}) == {
        "a": {"c": 2, "d": 3}, "l": [3], "k": "v", "n": 1
    }  # fmt: skip
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}  # unchanged
    assert merge_patch({"a": 1}, [1]) == [1]


def test_fill_omitted_shows_written_defaults_and_keeps_what_is_stored():
    stored = {"spec": {"reclaimable": True, "tasks": [{"name": "a"}], "weight": 3}}
    written = {"spec": {"reclaimable": True, "weight": 1, "tasks": [{"name": "a", "replicas": 1}], "extra": 2}}
    assert fill_omitted(stored, written) == {
        "spec": {"reclaimable": True, "tasks": [{"name": "a", "replicas": 1}], "weight": 3, "extra": 2}
    }
    assert fill_omitted({"l": [1]}, {"l": [1, 2]}) == {"l": [1]}  # lists of other lengths: stored


def test_a_conceptual_hyperjob_read_through_batch_shows_as_kubectl_applied_it():
    batch = find("batch.volcano.sh", "v1alpha1", "hyperjobs")
    assert batch is not None
    applied = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "HyperJob", "metadata": {"name": "x"},
               "spec": {"template": {"spec": {}}}}  # fmt: skip
    stored = {"apiVersion": "training.volcano.sh/v1alpha1", "kind": "HyperJob", "spec": {"replicatedJobs": []},
              "status": {"phase": "Running"},
              "metadata": {"name": "x", "annotations": {LAST_APPLIED: msgspec.json.encode(applied).decode()}},
              }  # fmt: skip
    shown = in_form(batch, stored)
    assert shown["apiVersion"] == "batch.volcano.sh/v1alpha1" and shown["spec"] == applied["spec"]
    assert shown["status"] == {"phase": "Running"} and shown["metadata"] == stored["metadata"]
    assert in_form(HYPERJOB, stored)["spec"] == stored["spec"]  # through training: as stored
    plain = {**stored, "metadata": {"name": "x"}}
    assert in_form(batch, plain) == plain  # not applied by kubectl: as stored


def test_an_event_of_the_log_is_a_core_v1_event_about_its_object():
    from hyperjob.services.apiserver.resources import event_manifest

    item = {"name": "x.abc", "type": "Warning", "reason": "Unschedulable", "object": "hyperjob/team-a/x",
            "message": "no room", "count": 3, "firstTimestamp": 0.0, "lastTimestamp": 60.0, "cluster": "cluster-a",
            "hyperJob": "", "kind": "HyperJob", "objectName": "team-a/x"}  # fmt: skip
    event = event_manifest(item)
    assert event["involvedObject"] == {"kind": "HyperJob", "name": "x", "namespace": "team-a"}
    assert event["metadata"] == {"name": "x.abc", "namespace": "team-a"}
    assert (event["type"], event["reason"], event["count"]) == ("Warning", "Unschedulable", 3)
    assert event["lastTimestamp"] == "1970-01-01T00:01:00Z" and event["source"]["host"] == "cluster-a"
    assert entry("v1", "events")["shortNames"] == ["ev"] and entry("v1", "events")["verbs"] == ["get", "list", "watch"]

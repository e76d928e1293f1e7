"""Field managers and server-side apply (``apiserver.fields``, pure), and the strategic merge patch
of Kubernetes' own kinds (``apiserver.patch``)."""

from __future__ import annotations

import json

import pytest

from hyperjob.services.apiserver import fields
from hyperjob.services.apiserver.fields import APPLY, UPDATE, Conflicts, Owner
from hyperjob.services.apiserver.patch import strategic_merge_patch

V = "scheduling.volcano.sh/v1beta1"
T0, T1 = "2026-12-07T10:00:00Z", "2026-12-07T11:00:00Z"


def queue(**spec: object) -> dict[str, object]:
    return {"apiVersion": V, "kind": "Queue", "metadata": {"name": "q"}, "spec": spec}


def test_fields_v1_is_kubernetes_form_and_round_trips():
    paths = frozenset({("spec",), ("spec", "weight"), ("metadata", "labels", "app")})
    encoded = fields.encode_fields(paths)
    assert encoded == {"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {".": {}, "f:weight": {}}}
    assert list(encoded["f:spec"]) == [".", "f:weight"]
    assert fields.decode_fields(encoded) == paths


def test_a_create_makes_its_manager_own_every_field_and_the_maps_it_added():
    owners = fields.update({}, queue(weight=2, reclaimable=True), {}, "kubectl-create", V, T0)
    (owner,) = owners.values()
    assert (owner.manager, owner.operation, owner.api_version, owner.time) == ("kubectl-create", UPDATE, V, T0)
    assert fields.encode_fields(owner.fields) == {"f:spec": {".": {}, "f:reclaimable": {}, "f:weight": {}}}


def test_an_apply_owns_what_it_sent_and_a_second_apply_of_another_value_by_another_manager_conflicts():
    live, owners = fields.apply({}, queue(weight=2), {}, "alice", V, force=False, now=T0)
    assert owners[("alice", APPLY, "")].fields == {("spec", "weight")}
    with pytest.raises(Conflicts) as refused:
        fields.apply(live, queue(weight=3), owners, "bob", V, force=False, now=T1)
    assert refused.value.message() == 'Apply failed with 1 conflict: conflict with "alice": .spec.weight'
    assert refused.value.causes() == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".spec.weight"}
    ]


def test_an_apply_of_the_same_value_shares_the_field_without_conflict():
    live, owners = fields.apply({}, queue(weight=2), {}, "alice", V, force=False, now=T0)
    same, shared = fields.apply(live, queue(weight=2), owners, "bob", V, force=False, now=T1)
    assert same == live
    assert shared[("alice", APPLY, "")].fields == shared[("bob", APPLY, "")].fields == {("spec", "weight")}


def test_an_updater_is_named_with_its_api_version_and_several_conflicts_are_listed_by_manager():
    live = queue(weight=2, reclaimable=True)
    owners = fields.update({}, live, {}, "kubectl-client-side-apply", V, T0)
    with pytest.raises(Conflicts) as refused:
        fields.apply(live, queue(weight=3, reclaimable=False), owners, "bob", V, force=False, now=T1)
    assert refused.value.message() == (
        f'Apply failed with 2 conflicts: conflicts with "kubectl-client-side-apply" using {V}:\n'
        "- .spec.reclaimable\n- .spec.weight"
    )
    assert [c["field"] for c in refused.value.causes()] == [".spec.reclaimable", ".spec.weight"]


def test_force_takes_the_fields_over():
    live, owners = fields.apply({}, queue(weight=2, reclaimable=True), {}, "alice", V, force=False, now=T0)
    forced, owners = fields.apply(live, queue(weight=3), owners, "bob", V, force=True, now=T1)
    assert forced["spec"] == {"weight": 3, "reclaimable": True}
    assert owners[("alice", APPLY, "")].fields == {("spec", "reclaimable")}
    assert owners[("bob", APPLY, "")] == Owner("bob", APPLY, V, frozenset({("spec", "weight")}), T1)


def test_a_field_the_applier_omits_next_time_is_removed_unless_another_manager_owns_it():
    config = queue(weight=2, reclaimable=True)
    config["metadata"] = {"name": "q", "labels": {"team": "a", "tier": "gold"}}
    live, owners = fields.apply({}, config, {}, "alice", V, force=False, now=T0)
    live, owners = fields.apply(live, {**queue(weight=2), "metadata": {"labels": {"tier": "gold"}}}, owners, "bob",
                                V, force=False, now=T0)  # fmt: skip
    again = {**queue(weight=2), "metadata": {"name": "q"}}
    pruned, owners = fields.apply(live, again, owners, "alice", V, force=False, now=T1)
    assert pruned["spec"] == {"weight": 2}  # reclaimable: alice's alone, dropped
    assert pruned["metadata"]["labels"] == {"tier": "gold"}  # team dropped; tier still bob's
    assert owners[("alice", APPLY, "")].fields == {("spec", "weight")}


def test_lists_are_atomic_owned_and_replaced_as_a_whole():
    config = {"apiVersion": V, "kind": "HyperJob", "metadata": {"name": "h"}, "spec": {"jobs": [{"n": 1}, {"n": 2}]}}
    live, owners = fields.apply({}, config, {}, "alice", V, force=False, now=T0)
    assert owners[("alice", APPLY, "")].fields == {("spec", "jobs")}
    with pytest.raises(Conflicts, match=r"\.spec\.jobs$"):
        fields.apply(live, {**config, "spec": {"jobs": [{"n": 1}]}}, owners, "bob", V, force=False, now=T1)


def test_an_update_takes_fields_from_appliers_without_conflict_and_frees_what_it_removes():
    live, owners = fields.apply({}, queue(weight=2, reclaimable=True), {}, "alice", V, force=False, now=T0)
    new = queue(weight=5)
    owners = fields.update(live, new, owners, "kubectl-edit", V, T1)
    assert owners[("kubectl-edit", UPDATE, V)].fields == {("spec", "weight")}
    assert ("alice", APPLY, "") not in owners  # lost weight to the edit, reclaimable removed


def test_managed_fields_are_written_as_kubernetes_does_and_a_write_starts_from_the_live_or_its_own():
    owners = fields.update({}, queue(weight=2), {}, "kubectl-create", V, T0)
    entries = fields.to_entries(owners)
    assert entries == [
        {"manager": "kubectl-create", "operation": "Update", "apiVersion": V, "time": T0,
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {}, "f:weight": {}}}},
    ]  # fmt: skip
    live = {**queue(weight=2), "metadata": {"name": "q", "managedFields": entries}}
    assert fields.starting_owners(live, {"metadata": {}}) == owners  # a client that does not know them
    assert fields.starting_owners(live, {"metadata": {"managedFields": [{}]}}) == {}  # a reset
    assert fields.starting_owners(live, {"metadata": {"managedFields": [{"x": 1}]}}) == owners  # not managedFields
    migrated = [{**entries[0], "manager": "kubectl", "operation": "Apply"}]  # kubectl's move to server-side apply
    assert list(fields.starting_owners(live, {"metadata": {"managedFields": migrated}})) == [("kubectl", APPLY, "")]


def test_kubectl_moves_from_client_side_apply_taking_what_the_last_applied_configuration_set():
    last = queue(weight=2, reclaimable=True)
    live = {**last, "metadata": {"name": "q", "annotations": {fields.LAST_APPLIED: json.dumps(last)}}}
    owners = fields.update({}, live, {}, "kubectl-client-side-apply", V, T0)
    merged, moved = fields.apply_moving_from_client_side(
        live, queue(weight=3), owners, "kubectl", V, force=False, now=T1
    )
    assert merged["spec"]["weight"] == 3 and moved[("kubectl", APPLY, "")].fields == {("spec", "weight")}
    with pytest.raises(Conflicts, match="kubectl-client-side-apply"):  # another name opts out
        fields.apply_moving_from_client_side(live, queue(weight=3), owners, "bob", V, force=False, now=T1)
    edited = {**live, "spec": {"weight": 5, "reclaimable": True}}  # changed since by someone else
    owners = fields.update(live, edited, owners, "kubectl-edit", V, T1)
    with pytest.raises(Conflicts, match='"kubectl-edit"'):
        fields.apply_moving_from_client_side(edited, queue(weight=3), owners, "kubectl", V, force=False, now=T1)


def test_the_manager_is_the_field_manager_else_the_user_agents_first_part():
    assert fields.manager_of("kubectl-edit", "kubectl/v1.32.0 (linux/amd64)") == "kubectl-edit"
    assert fields.manager_of(None, "kubectl/v1.32.0 (linux/amd64) kubernetes/abc") == "kubectl"


def test_strategic_merge_patch_merges_maps_and_honours_its_directives():
    pc = {"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}}, "value": 10, "description": "d"}
    assert strategic_merge_patch(pc, {"value": 20, "metadata": {"labels": {"a": None}}}) == {
        "metadata": {"name": "p", "labels": {"b": "2"}}, "value": 20, "description": "d"}  # fmt: skip
    replaced = strategic_merge_patch(pc, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}})
    assert replaced["metadata"]["labels"] == {"c": "3"}
    assert strategic_merge_patch(pc, {"$retainKeys": ["metadata", "value"], "value": 1}) == {
        "metadata": pc["metadata"], "value": 1}  # fmt: skip
    with pytest.raises(ValueError, match="deleteFromPrimitiveList"):
        strategic_merge_patch(pc, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}})

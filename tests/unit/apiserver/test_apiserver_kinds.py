"""Kubeflow's kinds through the apiserver; delete options (``propagationPolicy``, ``dryRun``); the
read-only ``status`` subresource. Requests are handled as routed, the read model and the NATS
contract replaced by fakes that record what would be sent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.requests import Request

from hyperjob.bus import InMemoryBus
from hyperjob.client import workloads
from hyperjob.events.access import Identity
from hyperjob.events.subjects import STREAMS
from hyperjob.services.apiserver import app, discovery, openapi, tables
from hyperjob.services.apiserver.identity import Tokens
from hyperjob.services.apiserver.objects import LAST_APPLIED, Objects, api_object
from hyperjob.services.apiserver.resources import find
from hyperjob.services.apiserver.status import ApiError

KUBEFLOW = [("v1", "MPIJob"), ("v1", "PyTorchJob"), ("v1", "TFJob"), ("v2beta1", "MPIJob")]
IDS = [f"{kind}-{version}" for version, kind in KUBEFLOW]
CLI = Identity(name="cli", role="user")


def job(name: str, applied_as: str, phase: str = "Running", api_version: str = "kubeflow.org/v1") -> dict:
    """A plain job of the read model (``views.jobs``), applied as ``applied_as`` (``Job``: a Volcano Job)."""
    source = {"hyperjob.io/source-kind": f"{api_version}/{applied_as}"} if applied_as != "Job" else {}
    ran = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": source},
        "spec": {"tasks": []},
    }
    applied = {"apiVersion": api_version, "kind": applied_as, "metadata": {"name": name}, "spec": {"runPolicy": {}}}
    return {
        "name": name, "namespace": "default", "labels": {}, "cluster": "cluster-a", "hyperJob": None,
        "phase": phase, "retryCount": 0, "queue": "default", "minAvailable": 1, "pending": 0, "running": 1,
        "succeeded": 0, "failed": 0, "terminating": 0, "created": 1.0, "waitingReason": "",
        "manifest": ran, "applied": applied if applied_as != "Job" else {}, "pods": [],
    }  # fmt: skip


class Contract:
    """The NATS contract as the apiserver's client: every delete is recorded and accepted."""

    def __init__(self) -> None:
        self.deleted: list[tuple[str, str, str]] = []
        self.bus = InMemoryBus(STREAMS)  # where the apiserver's changelog (its resource versions) goes

    async def delete(self, kind: str, name: str, namespace: str) -> None:
        self.deleted.append((kind, name, namespace))


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> tuple[app.State, Contract]:
    """A fleet running a PyTorchJob ``torch`` and a Volcano Job ``plain``."""

    async def jobs(client: object, name: str | None) -> list[dict]:
        return [job("torch", "PyTorchJob"), job("plain", "Job")]

    monkeypatch.setattr(workloads, "jobs", jobs)
    contract = Contract()
    return app.State(client=contract, tokens=Tokens(tmp_path / "none.json"), version="test"), contract  # type: ignore[arg-type]


def request(method: str, path: dict[str, str], query: str = "", body: bytes = b"") -> Request:
    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {"type": "http", "method": method, "query_string": query.encode(), "headers": [], "path_params": path}
    return Request(scope, receive)


PYTORCHJOB = {"group": "kubeflow.org", "version": "v1", "namespace": "default", "plural": "pytorchjobs"}


# -- Kubeflow's kinds -----------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "kind"), KUBEFLOW, ids=IDS)
def test_each_kubeflow_kind_is_discovered_as_its_crd_declares_it(version, kind):
    listed = discovery.resource_list(f"kubeflow.org/{version}")
    assert listed is not None
    found = next(r for r in listed["resources"] if r["name"] == kind.lower() + "s")
    assert (found["kind"], found["singularName"], found["namespaced"]) == (kind, kind.lower(), True)
    assert "shortNames" not in found and "categories" not in found  # the CRDs declare none
    assert set(found["verbs"]) == {"get", "list", "watch", "create", "update", "patch", "delete"}


def test_kubeflow_org_is_one_group_preferring_training_operators_v1():
    group = discovery.group("kubeflow.org")
    assert group is not None
    assert [v["groupVersion"] for v in group["versions"]] == ["kubeflow.org/v1", "kubeflow.org/v2beta1"]
    assert group["preferredVersion"]["version"] == "v1"


@pytest.mark.parametrize(("version", "kind", "schema"), [
    ("v1", "MPIJob", "MPIJobV1"), ("v1", "PyTorchJob", "PyTorchJob"), ("v1", "TFJob", "TFJob"),
    ("v2beta1", "MPIJob", "MPIJob"),
], ids=IDS)  # fmt: skip
def test_each_kubeflow_kind_is_explained_from_the_contracts_type(version, kind, schema):
    schemas = openapi.document(f"kubeflow.org/{version}")["components"]["schemas"]
    gvk = {"group": "kubeflow.org", "version": version, "kind": kind}
    assert schemas[schema]["x-kubernetes-group-version-kind"] == [gvk]
    assert "spec" in schemas[schema]["properties"]


@pytest.mark.parametrize(("version", "kind"), KUBEFLOW, ids=IDS)
async def test_each_kubeflow_kind_lists_only_the_jobs_applied_as_it_with_the_operators_columns(
    monkeypatch, version, kind
):
    async def jobs(client: object, name: str | None) -> list[dict]:
        return [job(f"a-{k.lower()}", k, "Completed") for k in ("MPIJob", "PyTorchJob", "TFJob", "Job")]

    monkeypatch.setattr(workloads, "jobs", jobs)
    resource = find("kubeflow.org", version, kind.lower() + "s")
    assert resource is not None
    items = await resource.load(None, None)  # type: ignore[arg-type]
    assert [i["name"] for i in items] == [f"a-{kind.lower()}"]
    objects = [api_object(resource, i) for i in items]
    assert objects[0]["kind"] == kind and objects[0]["status"]["conditions"] == [
        {"type": "Succeeded", "status": "True"}
    ]
    shown = tables.table(resource, items, objects, "1")
    assert [c["name"] for c in shown["columnDefinitions"] if c["priority"] == 0] == ["Name", "State", "Age"]
    assert shown["rows"][0]["cells"][:2] == [f"a-{kind.lower()}", "Succeeded"]


async def test_a_pytorchjob_is_deleted_as_the_volcano_job_running_it(fleet):
    state, contract = fleet
    answer = await app._item(request("DELETE", {**PYTORCHJOB, "name": "torch"}), state, CLI)
    assert answer.status_code == 200
    assert contract.deleted == [("Job", "torch", "default")]


async def test_deleting_a_volcano_job_as_a_pytorchjob_is_not_found_and_sends_nothing(fleet):
    state, contract = fleet
    with pytest.raises(ApiError) as refused:
        await app._item(request("DELETE", {**PYTORCHJOB, "name": "plain"}), state, CLI)
    assert (refused.value.code, refused.value.message) == (404, 'pytorchjobs.kubeflow.org "plain" not found')
    assert contract.deleted == []


# -- delete options -------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "body", "field"), [
    ("propagationPolicy=Orphan", b"", "propagationPolicy"),
    ("", b'{"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"}', "propagationPolicy"),
    ("", b'{"propagationPolicy": "Sideways"}', "propagationPolicy"),
    ("orphanDependents=true", b"", "orphanDependents"),
    ("", b'{"orphanDependents": true}', "orphanDependents"),
], ids=["orphan-query", "orphan-body", "unknown-policy", "orphan-dependents-query", "orphan-dependents-body"],
)  # fmt: skip
async def test_a_delete_that_would_orphan_is_invalid_naming_the_field_and_sends_nothing(fleet, query, body, field):
    state, contract = fleet
    with pytest.raises(ApiError) as refused:
        await app._item(request("DELETE", {**PYTORCHJOB, "name": "torch"}, query, body), state, CLI)
    assert (refused.value.code, refused.value.reason) == (422, "Invalid")
    assert refused.value.details is not None
    (cause,) = refused.value.details["causes"]
    assert (cause["field"], cause["reason"]) == (field, "FieldValueNotSupported")
    assert refused.value.message.startswith(f'DeleteOptions.meta.k8s.io "" is invalid: {field}: Unsupported value')
    assert contract.deleted == []


@pytest.mark.parametrize(("query", "body"), [
    ("propagationPolicy=Foreground", b""),
    ("", b'{"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}'),
    ("", b""),
], ids=["foreground", "background", "none"])  # fmt: skip
async def test_foreground_and_background_deletes_are_sent(fleet, query, body):
    state, contract = fleet
    answer = await app._item(request("DELETE", {**PYTORCHJOB, "name": "torch"}, query, body), state, CLI)
    assert answer.status_code == 200 and contract.deleted == [("Job", "torch", "default")]


async def test_a_dry_run_delete_finds_the_object_and_sends_nothing(fleet):
    state, contract = fleet
    path = {**PYTORCHJOB, "name": "torch"}
    assert (await app._item(request("DELETE", path, "dryRun=All"), state, CLI)).status_code == 200
    body = b'{"dryRun": ["All"]}'
    assert (await app._item(request("DELETE", path, body=body), state, CLI)).status_code == 200
    with pytest.raises(ApiError) as missing:
        await app._item(request("DELETE", {**path, "name": "nothing"}, "dryRun=All"), state, CLI)
    assert missing.value.code == 404 and contract.deleted == []


async def test_malformed_delete_options_are_a_bad_request(fleet):
    state, contract = fleet
    with pytest.raises(ApiError) as refused:
        await app._item(request("DELETE", {**PYTORCHJOB, "name": "torch"}, body=b"{nope"), state, CLI)
    assert refused.value.code == 400 and contract.deleted == []


# -- the status subresource -----------------------------------------------------------------------


def test_discovery_lists_a_read_only_status_subresource_where_kubernetes_has_one():
    listed = discovery.resource_list("training.volcano.sh/v1alpha1")
    assert listed is not None
    status = next(r for r in listed["resources"] if r["name"] == "hyperjobs/status")
    assert (status["kind"], status["namespaced"], status["verbs"]) == ("HyperJob", True, ["get"])
    core = discovery.resource_list("v1")
    assert core is not None
    names = [r["name"] for r in core["resources"]]
    assert "pods/status" in names and "events/status" not in names


async def test_the_status_of_an_object_reads_as_the_object(fleet):
    state, _ = fleet
    answer = await app._status(request("GET", {**PYTORCHJOB, "name": "torch"}), state, CLI)
    body = json.loads(bytes(answer.body))
    assert (body["kind"], body["metadata"]["name"]) == ("PyTorchJob", "torch")
    assert body["status"]["conditions"] == [{"type": "Running", "status": "True"}]
    with pytest.raises(ApiError) as missing:
        await app._status(request("GET", {**PYTORCHJOB, "name": "nothing"}), state, CLI)
    assert missing.value.code == 404


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
async def test_writing_a_status_is_method_not_allowed_and_sends_nothing(fleet, method):
    state, contract = fleet
    body = b'{"status": {"conditions": []}}'
    with pytest.raises(ApiError) as refused:
        await app._status(request(method, {**PYTORCHJOB, "name": "torch"}, body=body), state, CLI)
    assert (refused.value.code, refused.value.reason) == (405, "MethodNotAllowed")
    assert contract.deleted == []


async def test_a_resource_without_a_status_subresource_has_no_status_path(fleet):
    state, _ = fleet
    events = {"version": "v1", "namespace": "default", "plural": "events", "name": "x"}
    with pytest.raises(ApiError) as missing:
        await app._status(request("GET", events), state, CLI)
    assert missing.value.code == 404


async def test_an_mpijob_read_through_both_versions_changes_in_neither(monkeypatch):
    """Each version keeps what it last saw: an MPIJob shown as applied through v2beta1 (a default
    the store omits filled in) and as stored through v1 is not a change each time the other is read."""
    written = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi"},
               "spec": {"slotsPerWorker": 1, "runPolicy": {}}}  # fmt: skip
    item = job("pi", "MPIJob", api_version="kubeflow.org/v2beta1")
    item["applied"] = {
        **item["applied"],
        "metadata": {"name": "pi", "annotations": {LAST_APPLIED: json.dumps(written)}},
    }

    async def jobs(client: object, name: str | None) -> list[dict]:
        return [item]

    monkeypatch.setattr(workloads, "jobs", jobs)
    v1, v2beta1 = find("kubeflow.org", "v1", "mpijobs"), find("kubeflow.org", "v2beta1", "mpijobs")
    assert v1 is not None and v2beta1 is not None
    objects = Objects(None, bus=InMemoryBus(STREAMS))  # type: ignore[arg-type]
    (as_v1,) = await objects.read(v1)
    (as_v2beta1,) = await objects.read(v2beta1)
    assert "slotsPerWorker" not in as_v1.obj["spec"] and as_v2beta1.obj["spec"]["slotsPerWorker"] == 1
    seen = objects.version
    await objects.read(v1)
    await objects.read(v2beta1)
    assert objects.changes_since(v1, seen) == [] and objects.changes_since(v2beta1, seen) == []
    assert as_v1.obj["metadata"]["uid"] == as_v2beta1.obj["metadata"]["uid"]  # one object

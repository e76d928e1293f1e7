"""Discovery documents: what ``kubectl api-resources`` and every client read before anything else
(``/version``, ``/api``, ``/apis``, one ``APIResourceList`` per group/version). The legacy
(unaggregated) form: kubectl falls back to it when the answer is not an ``APIGroupDiscoveryList``."""

from __future__ import annotations

from typing import Any

from .resources import Resource, group_versions

# A discovery document: JSON of Kubernetes' own shapes.
Document = dict[str, Any]
KUBERNETES_VERSION = ("1", "32")  # the API we speak: kubectl 1.32 warns of no skew


def version(hyperjob_version: str) -> Document:
    major, minor = KUBERNETES_VERSION
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{major}.{minor}.0-hyperjob.{hyperjob_version}",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "",
        "platform": "python",
    }


def core_versions() -> Document:
    """``/api``: the core group's versions."""
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}


def groups() -> Document:
    """``/apis``: every named group with its versions, the first served its preferred one
    (``kubeflow.org``: ``v1``, training-operator's, then mpi-operator's ``v2beta1``)."""
    versions: dict[str, list[Document]] = {}
    for group_version in group_versions():
        if "/" in group_version:
            group, _, ver = group_version.partition("/")
            versions.setdefault(group, []).append({"groupVersion": group_version, "version": ver})
    listed = [{"name": g, "versions": found, "preferredVersion": found[0]} for g, found in versions.items()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": listed}


def group(name: str) -> Document | None:
    """``/apis/<group>``: one group, or None when it is not served."""
    found = next((g for g in groups()["groups"] if g["name"] == name), None)
    return None if found is None else {"kind": "APIGroup", "apiVersion": "v1", **found}


def resource_list(group_version: str) -> Document | None:
    """``/api/v1`` or ``/apis/<group>/<version>``: its resources, or None when it is not served."""
    served = group_versions().get(group_version)
    if served is None:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [entry for r in served for entry in _entries(r)],
    }


def _entries(resource: Resource) -> list[Document]:
    """A resource and its subresources: ``status`` for those that have one, a pod's ``log``."""
    entry: Document = {
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    entries = [entry]
    if resource.status:
        # The system writes every status: the subresource is read-only (PUT and PATCH are refused 405).
        status = {"name": f"{resource.plural}/status", "singularName": "", "verbs": ["get"]}
        entries.append({**status, "namespaced": resource.namespaced, "kind": resource.kind})
    if resource.plural == "pods" and not resource.group:  # kubectl logs: a pod's output (app._pod_log)
        entries.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]})
    return entries

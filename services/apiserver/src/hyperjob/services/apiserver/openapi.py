"""OpenAPI v3 (``/openapi/v3``): one document per group/version, its schemas generated from the
msgspec manifest types (``hyperjob.api.schema``, as ``hyperjob schema`` prints them), so
``kubectl explain hyperjobs.spec`` describes exactly what the splitter decodes.

Each kind's schema carries ``x-kubernetes-group-version-kind``, which is how kubectl finds it.
Kinds HyperJob has no manifest type for (pods, nodes, clusters ...) are served as objects without
a schema of their fields. Each writable resource's object path lists its PATCH operation, as an
apiserver's does: with the ``fieldValidation`` parameter (kubectl then leaves validation to the
server, which is the splitter) and the merge and JSON patch types only (so kubectl sends a JSON merge
patch, as it does to custom resources).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from hyperjob.api.manifest import KINDS
from hyperjob.api.schema import schema_hook

from .resources import Resource, group_versions

Document = dict[str, Any]
REF = "#/components/schemas/{name}"


def index() -> Document:
    """``/openapi/v3``: where each group/version's document is, with its hash (clients cache by it)."""
    paths = {}
    for group_version in group_versions():
        path = f"api/{group_version}" if "/" not in group_version else f"apis/{group_version}"
        digest = hashlib.sha512(json.dumps(document(group_version), sort_keys=True).encode()).hexdigest()[:32]
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest.upper()}"}
    return {"paths": paths}


def document(group_version: str) -> Document:
    """The OpenAPI document of one group/version: a schema per kind it serves (empty when unknown)."""
    served = group_versions().get(group_version, [])
    typed = {r.kind: KINDS[(group_version, r.kind)] for r in served if (group_version, r.kind) in KINDS}
    schemas: Document = {}
    if typed:
        _, components = msgspec.json.schema_components(list(typed.values()), schema_hook=schema_hook, ref_template=REF)
        schemas.update({name: openapi_3_0(schema) for name, schema in components.items()})
    for resource in served:
        name = typed[resource.kind].__name__ if resource.kind in typed else resource.kind
        schemas[name] = {**schemas.get(name, _untyped(resource)), "x-kubernetes-group-version-kind": [_gvk(resource)]}
    return {
        "openapi": "3.0.0",
        "info": {"title": "HyperJob", "version": group_version},
        "paths": {_item_path(r): {"patch": _patch(r)} for r in served if r.writable},
        "components": {"schemas": schemas},
    }


def openapi_3_0(schema: Any) -> Any:
    """A JSON Schema as OpenAPI 3.0 (what kubectl reads) says it: an optional value (``anyOf`` of a
    schema and ``null``) is that schema, ``nullable``; an ``enum`` of strings is typed ``string``;
    the ``default: null`` of an optional field is left out (JSON values: ``Any``)."""
    if isinstance(schema, list):
        return [openapi_3_0(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: openapi_3_0(v) for k, v in schema.items()}
    options = out.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        del out["anyOf"]
        out = {**(rest[0] if len(rest) == 1 else {"anyOf": rest}), **out, "nullable": True}
        if out.get("default", 0) is None:
            del out["default"]
    if "enum" in out and "type" not in out and all(isinstance(v, str) for v in out["enum"]):
        out["type"] = "string"
    return out


def _untyped(resource: Resource) -> Document:
    return {
        "type": "object",
        "description": f"A {resource.kind}, as HyperJob reports it (read-only: the system owns it).",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object"},
            "status": {"type": "object"},
        },
    }


def _item_path(resource: Resource) -> str:
    prefix = f"/apis/{resource.group_version}" if resource.group else f"/api/{resource.version}"
    scope = "/namespaces/{namespace}" if resource.namespaced else ""
    return f"{prefix}{scope}/{resource.plural}/{{name}}"


def _patch(resource: Resource) -> Document:
    body = {"schema": {"type": "object"}}
    return {
        "x-kubernetes-group-version-kind": _gvk(resource),
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string"}} for name in ("dryRun", "fieldValidation")
        ],
        "requestBody": {"content": {"application/merge-patch+json": body, "application/json-patch+json": body}},
        "responses": {"200": {"description": "OK"}},
    }


def _gvk(resource: Resource) -> Document:
    return {"group": resource.group, "version": resource.version, "kind": resource.kind}

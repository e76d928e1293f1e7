"""JSON Schemas of the manifest kinds, generated from the msgspec types themselves
(``msgspec.json.schema``), so they cannot drift from what the services decode: what ``hyperjob
schema`` prints and what the apiserver's OpenAPI serves."""

from __future__ import annotations

from typing import Any

import msgspec

from .manifest import KINDS

# A JSON Schema document: msgspec builds it, of whatever shape the type's schema has.
Schema = dict[str, Any]


def manifest_types() -> dict[str, type[msgspec.Struct]]:
    """Each manifest kind by name; the conceptual HyperJob form is ``HyperJob.batch``."""
    found: dict[str, type[msgspec.Struct]] = {}
    for (api_version, kind), struct in KINDS.items():
        name = kind if kind not in found else f"{kind}.{api_version.split('.')[0]}"
        found[name] = struct
    return found


def schema_hook(type_: type) -> Schema:
    """Fields typed ``object`` (opaque values passed through, e.g. plugin arguments) accept anything."""
    if type_ is object:
        return {"description": "any JSON value"}
    raise NotImplementedError  # msgspec's schema_hook protocol: "not mine", msgspec says unsupported type


__all__ = ["Schema", "manifest_types", "schema_hook"]
